"""Numeric value slots of a question: where the quantities are, and how to vary them.

A *slot* is one quantity the question states: an integer (``16``, ``1,200``), a decimal
(``3.50``), a fraction (``3/4``, ``\\frac{2}{5}``) or a number word (``three`` … ``twenty``,
``thirty`` … ``ninety``). Signs, currency symbols and ``%`` stay in the text around the slot,
so a varied value keeps them (``-5`` stays negative, ``$3.50`` stays dollars).

Numbers that are *structure*, not quantities, are not slots: exponents and subscripts
(``x^2``, ``a_1``, ``10^{-3}``), root indices (``\\sqrt[3]``), ordinals (``3rd``), compound
modifiers (``6-sided``, ``three-digit``), numbers glued to a preceding letter or digit
(``H2O``, ``x2``), zero (``= 0``), and the numbers that state the answer's form, a range or a
constraint, or draw a figure (:mod:`generation.protected`). Changing those would change the
problem's type.
"""

from __future__ import annotations

import functools
import math
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from .magnitudes import balanced_weights, draw_near, round_values
from .protected import protected_spans

SlotKind = Literal["int", "decimal", "fraction", "latex_fraction", "word"]

UNITS = {
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    11: "eleven",
    12: "twelve",
    13: "thirteen",
    14: "fourteen",
    15: "fifteen",
    16: "sixteen",
    17: "seventeen",
    18: "eighteen",
    19: "nineteen",
    20: "twenty",
    30: "thirty",
    40: "forty",
    50: "fifty",
    60: "sixty",
    70: "seventy",
    80: "eighty",
    90: "ninety",
}
WORD_VALUES = {word: value for value, word in UNITS.items()}

_LATEX_FRACTION = re.compile(r"\\[dt]?frac\{\s*(\d+)\s*\}\{\s*(\d+)\s*\}")
_PLAIN_FRACTION = re.compile(r"(?<![\w./])(\d+)/(\d+)(?![\w/]|\.\d)")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+|(?<=[\s$(])(?=\.\d))(?:\.(\d+))?(?!\.\d)")  # ".75": 0.75
_WORD = re.compile(r"(?<![\w-])(" + "|".join(sorted(WORD_VALUES, key=len, reverse=True)) + r")(?![\w-])", re.IGNORECASE)
_ORDINAL_AFTER = re.compile(r"(st|nd|rd|th)\b")
_STRUCTURAL_BEFORE = re.compile(r"(\^|_|\^\{-?|_\{|\\sqrt\[)$")
_COMPOUND_AFTER = re.compile(r"-[A-Za-z]")


@dataclass(frozen=True)
class Slot:
    """One quantity in a text.

    Attributes:
        start, end: character span of the quantity itself (no sign, symbol or ``%``).
        text: ``text[start:end]``.
        kind: ``int``, ``decimal``, ``fraction`` (``a/b``), ``latex_fraction`` (``\\frac{a}{b}``)
            or ``word``.
        value: the exact value (a Fraction; words and integers are whole).
        decimals: digits after the point (decimals only).
        percent: the quantity is followed by ``%`` or ``percent``.
        year: a four-digit integer in 1900–2100 after a word that introduces a year ("in 2015",
            "since 1990"); "a target of 1900 calories" is a quantity like any other.
    """

    start: int
    end: int
    text: str
    kind: SlotKind
    value: Fraction
    decimals: int = 0
    percent: bool = False
    year: bool = False

    @property
    def key(self) -> tuple[str, Fraction, int, bool]:
        """Two slots with the same key state the same quantity (varied together): "20 students" and
        "20 %" do not."""
        return (self.kind, self.value, self.decimals, self.percent)


def find_slots(text: str) -> list[Slot]:
    """The quantities of ``text`` in order of appearance (see the module docstring)."""
    taken: list[tuple[int, int]] = protected_spans(text)  # the answer's form, constraints, figures
    slots: list[Slot] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    def add(slot: Slot, span: tuple[int, int] | None = None) -> None:
        taken.append(span or (slot.start, slot.end))
        if slot.value != 0:
            slots.append(slot)

    for m in _LATEX_FRACTION.finditer(text):
        num, den = int(m.group(1)), int(m.group(2))
        if den and free(m.start(), m.end()):
            add(Slot(m.start(), m.end(), m.group(0), "latex_fraction", Fraction(num, den)))
        taken.append((m.start(), m.end()))
    for m in _PLAIN_FRACTION.finditer(text):
        if not free(m.start(), m.end()) or _is_structural(text, m.start(), m.end()):
            continue
        num, den = int(m.group(1)), int(m.group(2))
        if den:
            add(
                Slot(m.start(), m.end(), m.group(0), "fraction", Fraction(num, den), percent=_is_percent(text, m.end()))
            )
    for m in _NUMBER.finditer(text):
        if not free(m.start(), m.end()):
            continue
        if _is_structural(text, m.start(), m.end()):
            taken.append((m.start(), m.end()))
            continue
        integer = m.group(1).replace(",", "")
        decimals = m.group(2)
        if decimals is None:
            slot = Slot(
                m.start(),
                m.end(),
                m.group(0),
                "int",
                Fraction(int(integer)),
                percent=_is_percent(text, m.end()),
                year=_is_year(text, m.start(), m.group(0)),
            )
        else:
            value = Fraction(int(integer + decimals), 10 ** len(decimals))
            slot = Slot(m.start(), m.end(), m.group(0), "decimal", value, len(decimals), _is_percent(text, m.end()))
        add(slot)
    for m in _WORD.finditer(text):
        if free(m.start(), m.end()):
            add(
                Slot(
                    m.start(),
                    m.end(),
                    m.group(0),
                    "word",
                    Fraction(WORD_VALUES[m.group(0).lower()]),
                    percent=_is_percent(text, m.end()),
                )
            )
    slots.sort(key=lambda s: s.start)
    return slots


_YEAR_CUES = {"in", "since", "until", "till", "by", "from", "year", "after", "before", "during", "around", "circa"}


def _is_year(text: str, start: int, number: str) -> bool:
    """Whether the integer ``number`` at ``start`` reads as a calendar year (see :class:`Slot`)."""
    if len(number) != 4 or not 1900 <= int(number) <= 2100:
        return False
    cue = re.search(r"([A-Za-z]+)\s+$", text[max(0, start - 20) : start])
    return cue is not None and cue.group(1).lower() in _YEAR_CUES


def _is_structural(text: str, start: int, end: int) -> bool:
    before, after = text[max(0, start - 8) : start], text[end : end + 3]
    if start > 0 and (text[start - 1].isalnum()):
        return True
    if _STRUCTURAL_BEFORE.search(before):
        return True
    if _ORDINAL_AFTER.match(after) or _COMPOUND_AFTER.match(after):
        return True
    return False


def _is_percent(text: str, end: int) -> bool:
    rest = text[end : end + 9]
    return rest.startswith("%") or rest.startswith("\\%") or rest.lower().startswith(" percent")


_DISPLAY_MATH = re.compile(r"\$\$.+?\$\$|\\\(.+?\\\)|\\\[.+?\\\]", re.DOTALL)
_INLINE_MATH = re.compile(r"\$([^$]+)\$")
_WORD_IN_MATH = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")


def math_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of LaTeX maths: ``$$…$$``, ``\\(…\\)``, ``\\[…\\]`` and ``$…$``.

    A ``$…$`` pair whose inside reads as prose (two words of three letters or more that are not
    LaTeX commands, or a space before the closing sign) is taken for two currency signs ("costs
    $4.20 each and pays with a $50 bill"), not maths.
    """
    spans = [m.span() for m in _DISPLAY_MATH.finditer(text)]
    position = 0
    while (m := _INLINE_MATH.search(text, position)) is not None:
        inside_display = any(a <= m.start() < b for a, b in spans)
        inside = m.group(1)
        prose = len(_WORD_IN_MATH.findall(inside)) >= 2 or inside[-1].isspace()
        if not inside_display and not prose:
            spans.append(m.span())
            position = m.end()
        else:
            position = m.start() + 1
    return sorted(spans)


def in_math(text: str, position: int) -> bool:
    """Whether ``position`` lies inside LaTeX maths (see :func:`math_spans`)."""
    return any(a <= position < b for a, b in math_spans(text))


# ----------------------------------------------------------------------------- varying values


def vary(slot: Slot, rng: random.Random, keep_digits: bool = False) -> str:
    """A new rendering of ``slot``'s quantity of the same kind and comparable magnitude, != old;
    with ``keep_digits`` an integer also keeps its number of digits (when another such value is
    within reach)."""
    for attempt in range(200):
        new = _draw(slot, rng)
        if new != slot.text and rendered_value(slot, new) != slot.value:
            # digits kept while another such value comes (a 100 % can only become 2 digits): then any value
            if (
                keep_digits
                and attempt < 100
                and slot.kind == "int"
                and _digits(new) != _digits(slot.text)
                and _room(slot)
            ):
                continue
            return new
    raise ValueError(f"cannot find another value for {slot.text!r}")


def vary_share(slot: Slot, denominator: int, rng: random.Random) -> str | None:
    """A new rendering of a decimal or a percentage whose share (the value, or the percentage
    over 100) has a denominator dividing ``denominator``, within half to twice the old value, or
    None when there is none: "0.25" of a quarter becomes "0.50" or "0.75", "20%" of a fifth "40%".
    Other kinds: None."""
    if slot.kind == "decimal":  # multiples of 1/denominator writable with the slot's decimals
        step, render = (
            Fraction(1, math.gcd(denominator, 10**slot.decimals)),
            (lambda v: f"{float(v):.{slot.decimals}f}"),
        )
    elif slot.kind == "int" and slot.percent:  # whole percentages p with p/100 a multiple of 1/denominator
        step, render = Fraction(Fraction(100, denominator).numerator), (lambda v: str(int(v)))
    else:
        return None
    lo, hi = max(1, math.ceil(slot.value / 2 / step)), math.floor(slot.value * 2 / step)
    current = slot.value / step
    count = hi - lo + 1 - (current.denominator == 1 and lo <= current <= hi)
    if count <= 0:
        return None
    return render(draw_near(current, lo, hi, rng) * step)


def _digits(text: str) -> int:
    return len(text.replace(",", ""))


def _room(slot: Slot) -> bool:
    """Whether the draw can give an integer of the same number of digits (100 % under its cap of 99
    cannot: then :func:`vary` takes any value at once rather than after 100 tries)."""
    n = int(slot.value)
    d = len(str(n))
    candidates = _round_candidates(slot)
    if candidates is not None:
        return any(len(str(v)) == d for v in candidates)
    base, lo, hi, scale = _int_span(slot)
    a, b = max(lo, -(-(10 ** (d - 1)) // scale)), min(hi, (10**d - 1) // scale)  # same-digit v of v·scale
    return b - a + 1 - (a <= base <= b) > 0


def _draw(slot: Slot, rng: random.Random) -> str:
    if slot.kind == "int":
        return _draw_int(slot, rng)
    if slot.kind == "decimal":
        return _draw_decimal(slot, rng)
    if slot.kind in ("fraction", "latex_fraction"):
        old_num, old_den = (int(term) for term in re.findall(r"\d+", slot.text))
        num, den = _draw_fraction(old_num, old_den, rng)
        if slot.kind == "fraction":
            return f"{num}/{den}"
        command = slot.text[: slot.text.index("{")]
        return f"{command}{{{num}}}{{{den}}}"
    return _draw_word(slot, rng)


def near_int(n: int, rng: random.Random) -> int:
    """An integer of comparable magnitude to ``n >= 1``, != n: on [max(1, n/2), max(2n, n+4)], as
    often below ``n`` as above (:func:`generation.magnitudes.draw_near`)."""
    return draw_near(n, max(1, n // 2), max(2 * n, n + 4), rng)


def _draw_int(slot: Slot, rng: random.Random) -> str:
    n = int(slot.value)
    if slot.year:  # a calendar year: stay in a plausible range
        new = rng.randint(1950, 2029)
    elif (table := _round_table(n, _cap(slot))) is not None:  # round numbers stay round (40 -> 20, 30, 50…80)
        new = rng.choices(table[0], weights=table[1])[0]
    else:
        base, lo, hi, scale = _int_span(slot)
        new = draw_near(base, lo, hi, rng) * scale
    return f"{new:,}" if "," in slot.text else str(new)


def _cap(slot: Slot) -> int | None:
    """The largest value an integer may take: 99 for a percentage of at most 100, else None."""
    return 99 if slot.percent and slot.value <= 100 else None


def _trailing_zeros(n: int) -> int:
    return len(str(n)) - len(str(n).rstrip("0"))


@functools.lru_cache(maxsize=4096)
def _round_table(n: int, cap: int | None) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """A round integer's new values (:func:`generation.magnitudes.round_values`, up to ``cap``) and
    their weights (:func:`generation.magnitudes.balanced_weights`), or None for an integer that is not
    round (one significant digit, 30 or more). Cached: a draw visits the same number many times."""
    zeros = _trailing_zeros(n) if n >= 10 else 0
    if not (zeros and n >= 30 and n // 10**zeros < 10):
        return None
    values = tuple(v for v in round_values(n, zeros) if cap is None or v <= cap)
    return values, tuple(balanced_weights(values, n))


def _round_candidates(slot: Slot) -> list[int] | None:
    """A round integer's new values under its cap, or None for one that is not round."""
    table = _round_table(int(slot.value), _cap(slot))
    return None if table is None else list(table[0])


def _int_span(slot: Slot) -> tuple[int, int, int, int]:
    """``(base, lo, hi, scale)``: a non-round integer ``base·scale`` becomes ``v·scale``, v in
    [lo, hi] other than base — within half to twice it (at least base + 4), its trailing zeros kept
    from 30 on (120 → 60…240 in tens), under the cap."""
    n = int(slot.value)
    zeros = _trailing_zeros(n) if n >= 30 else 0
    base, scale = n // 10**zeros, 10**zeros
    lo, hi = max(1, base // 2), max(2 * base, base + 4)
    cap = _cap(slot)
    return base, lo, hi if cap is None else min(hi, cap // scale), scale


MAX_SUPPORT = 400


def int_support(slot: Slot, keep_digits: bool = False) -> list[str] | None:
    """Every rendering :func:`vary` can give an integer quantity (not a year), in increasing order,
    or None for another kind or more than :data:`MAX_SUPPORT` values: what a search over a
    quantity's values enumerates instead of sampling."""
    if slot.kind != "int" or slot.year:
        return None
    n = int(slot.value)
    values = _round_candidates(slot)
    if values is None:
        base, lo, hi, scale = _int_span(slot)
        if hi - lo > MAX_SUPPORT:
            return None  # 12345678 has millions: drawn, not enumerated
        values = [v * scale for v in range(lo, hi + 1) if v != base]
    if keep_digits and _room(slot):
        same = [v for v in values if len(str(v)) == len(str(n))]
        values = same or values
    return [f"{v:,}" if "," in slot.text else str(v) for v in values]


def _draw_decimal(slot: Slot, rng: random.Random) -> str:
    step = Fraction(1, 10**slot.decimals)
    if slot.text.endswith(("0", "5")) and slot.decimals:
        step *= 5
    value = slot.value
    units = value / step  # the value in steps ("2.30" in steps of 0.05: 46)
    lo, hi = max(1, math.ceil(units / 2)), max(math.floor(units * 2), math.floor(units) + 4)
    return f"{float(step * draw_near(units, lo, hi, rng)):.{slot.decimals}f}"


def _draw_fraction(num: int, den: int, rng: random.Random) -> tuple[int, int]:
    """New terms of comparable size; a proper fraction stays proper, an improper one improper."""
    new_den = max(2, near_int(den, rng))
    if num < den:
        return rng.randint(1, new_den - 1), new_den
    return max(near_int(num, rng), new_den + 1), new_den


def _draw_word(slot: Slot, rng: random.Random) -> str:
    n = int(slot.value)
    if n < 20:
        word = UNITS[min(19, max(2, near_int(n, rng)))]
    else:
        word = UNITS[rng.choice([v for v in range(20, 100, 10) if v != n])]
    if slot.text.isupper():
        return word.upper()
    return word.capitalize() if slot.text[0].isupper() else word


def rendered_value(slot: Slot, rendered: str) -> Fraction:
    """The value of ``rendered``, a new rendering of ``slot`` (as made by :func:`vary`)."""
    if slot.kind == "word":
        return Fraction(WORD_VALUES[rendered.lower()])
    if slot.kind == "latex_fraction":
        m = _LATEX_FRACTION.fullmatch(rendered)
        assert m is not None
        return Fraction(int(m.group(1)), int(m.group(2)))
    if slot.kind == "fraction":
        num, den = rendered.split("/")
        return Fraction(int(num), int(den))
    if slot.kind == "int":
        return Fraction(int(rendered.replace(",", "")))  # an int is much faster to build than a parsed string
    return Fraction(rendered.replace(",", ""))


def signed_span(text: str, slot: Slot) -> tuple[int, int]:
    """``slot``'s span widened to a unary minus sign ("dropped to -5", "= -1"), not a binary one ("x - 5")."""
    start = slot.start
    if start >= 1 and text[start - 1] in "-−" and (start == 1 or text[start - 2] in " \t(=[{,:$"):
        start -= 1
    return start, slot.end


def replace_spans(text: str, replacements: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, new)`` span replaced (spans must not overlap)."""
    out, last = [], 0
    for start, end, new in sorted(replacements):
        out.append(text[last:start])
        out.append(new)
        last = end
    out.append(text[last:])
    return "".join(out)
