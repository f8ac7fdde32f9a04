"""How the numbers of a worked solution's steps are read: as the question's quantities (or their
shares), earlier results or constants, with the words around them (:mod:`generation.answers` uses
it; the rules are in its docstring).

* :func:`bind` gives each number of each step its readings;
* :func:`cue_in` and the tables below say which words name a constant of a value: a unit ("a
  week": 7), a multiplier ("twice": 2), an ordinal ("every second": 2);
* :func:`whole_steps` says which results must stay whole.
"""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction
from typing import Iterable

from .numbers import Slot
from .solution_program import CONSTANT, Operand, Reading, Step
from .solution_steps import Number, WrittenStep

# A unit's constant, and the words of a question that make a quantity of that value ambiguous.
UNIT_CUES: dict[int, tuple[str, ...]] = {
    2: (
        "half",
        "twice",
        "double",
        "pair",
        "couple",
        "both",
        "legs",
        "wheels",
        "hands",
        "eyes",
        "weekend",
        "back and forth",
        "round trip",
        "round-trip",
        "there and back",
    ),
    3: ("third", "triple", "thrice", "yard", "triangle"),
    4: (
        "quarter",
        "fourth",
        "quadruple",
        "legs",
        "wheels",
        "tires",
        "square",
        "season",
        "four-week",
        "weeks in a month",
        "month",
    ),
    5: ("nickel", "fifth", "weekday"),
    6: ("hexagon", "half a dozen"),
    8: ("octopus", "spider", "legs"),
    7: ("week",),
    10: ("dime", "decade", "tenth", "fingers", "toes"),
    12: ("dozen", "month", "year", "inch", "foot", "feet"),
    16: ("ounce", "pound"),
    24: ("hour", "day"),
    25: ("quarter",),
    30: ("month",),
    52: ("week", "year"),
    60: ("minute", "hour", "seconds"),
    100: ("percent", "%", "cent", "century", "dollar"),
    365: ("year", "day"),
    1000: ("thousand", "kilo", "gram", "liter", "litre", "meter", "metre"),
}
# Words that explain a constant but say too little to flag a reuse: "every second glass" (2).
ORDINAL_CUES: dict[int, tuple[str, ...]] = {2: ("second", "other"), 3: ("third",), 4: ("fourth",), 5: ("fifth",)}

# The words of a multiplier — on a step's own line they say a number of that value is the constant:
# "so it was 2*7" beside "twice", "x 2 people" beside "both" (a unit's name, "a month", says too little).
MULTIPLIERS: dict[int, tuple[str, ...]] = {
    2: ("half", "twice", "double", "both", "pair", "couple"),
    3: ("third", "triple", "thrice"),
    4: ("quarter", "quadruple", "fourth"),
    12: ("dozen",),
}

# The units alone (no multiplier): on a step's line they make a number of their value ambiguous.
UNITS: dict[int, tuple[str, ...]] = {
    value: tuple(c for c in cues if c not in {w for ws in MULTIPLIERS.values() for w in ws} | {"half"})
    for value, cues in UNIT_CUES.items()
}


def whole_steps(steps: list[Step], quantities: list[Slot], question: str, answer_step: int) -> tuple[bool, ...]:
    """Per step, whether its result must stay whole: it is whole in the original, and it is the
    answer or no sum of money stated with cents (``$4.20``) feeds it, directly or through earlier
    steps."""
    money = [q.kind == "decimal" and _is_money(question, q) for q in quantities]
    cents: list[bool] = []
    for step in steps:
        readings = [r for o in step.operands for r in o.readings]
        cents.append(
            any(r.kind == "quantity" and money[r.index] for r in readings)
            or any(r.kind == "step" and cents[r.index] for r in readings)
        )
    return tuple(
        s.result.denominator == 1 and (i == answer_step or not c) for i, (s, c) in enumerate(zip(steps, cents))
    )


def _is_money(text: str, slot: Slot) -> bool:
    before, after = text[max(0, slot.start - 2) : slot.start], text[slot.end : slot.end + 9].lower()
    return any(sign in before for sign in "$€£¥") or after.lstrip().startswith(("dollar", "cent", "euro", "pound"))


def bind(written: Iterable[WrittenStep], quantities: list[Slot], question: str) -> list[Step]:
    """Each written step with the readings of its numbers (see the module docstring)."""
    cents = {i for i, q in enumerate(quantities) if re.match(r"\s*cents?\b", question[q.end : q.end + 8])}
    units = {Fraction(v) for v in UNITS if cue_in(question, Fraction(v), UNITS)}
    steps: list[Step] = []
    for step in written:
        results = {
            s.result for s in steps if s.result.denominator > 1 and not share_cue(question + step.line, s.result)
        }
        tokens, numbers = _merge_fractions(step, quantities, results)
        tokens, numbers = _merge_negatives(tokens, numbers, {s.result for s in steps if s.result < 0})
        hundred = _per_hundred(tokens, numbers)
        divisors = {  # "66 / 3" may be 1/3's inverse; "600 / 4" beside "a month" and "a week" is 4 weeks
            t
            for i, t in enumerate(tokens)
            if isinstance(t, int) and i and tokens[i - 1] == "/" and numbers[t].value not in units
        }
        repeated = Counter(n.value for n in numbers)
        operands = tuple(
            Operand(
                n.value,
                n.percent,
                _readings(n, quantities, steps, cents, (step.line, k in hundred, k in divisors, repeated[n.value] > 1)),
            )
            for k, n in enumerate(numbers)
        )
        steps.append(Step(tokens, operands, step.result, step.percent))
    return steps


def _readings(
    number: Number,
    quantities: list[Slot],
    earlier: list[Step],
    cents: set[int],
    context: tuple[str, bool, bool, bool],
) -> tuple[Reading, ...]:
    """What ``number`` may stand for: the quantities and earlier results of its value, else a
    quantity's share, else a constant. ``context``: the step's line, whether the number is taken
    per hundred there (``20 * 20 / 100``: the second 20 is the percentage), and whether it divides
    (``66 / 3`` may be 1/3 as its inverse, ``4 * 600`` is no 1/4), and whether the step writes its
    value twice (``2 * 2`` beside "twice": one of them is the multiplier)."""
    value = number.value
    line, per_hundred, divides, repeated = context
    multiplier = not number.percent and cue_in(line, value, MULTIPLIERS, whole_word=True)
    if multiplier and not repeated:
        # "3 books/person x 2 people" on the line of "both"; "so it was 2*7" on the line of "twice": a constant
        return (CONSTANT,)
    out = [
        Reading("quantity", i)
        for i, q in enumerate(quantities)
        if q.value == value and (q.percent or not number.percent)
    ]
    if value < 0:  # "-4" where an earlier step gave -4 may still be the question's 4, negated
        out += [Reading("quantity", i, "negated") for i, q in enumerate(quantities) if q.value == -value]
    if len({quantities[r.index].percent for r in out}) == 2:  # 20 students and 20 %: which, by how it is used
        out = [r for r in out if quantities[r.index].percent == (per_hundred or number.percent)]
    out += [Reading("step", i) for i, s in enumerate(earlier) if s.result == value]
    if out:
        # "2*7=14 kgs of rice a week" after a result of 7: the 7 may be the days; "twice the 2 who play
        # tennis, so 2 * 2": one 2 is the multiplier — read both ways
        unit = not number.percent and cue_in(line, value, UNITS, whole_word=True)
        return (*out, CONSTANT) if unit or multiplier else tuple(out)
    if not number.percent:
        for i, q in enumerate(quantities):
            if q.percent and q.value:
                forms = {"share": q.value / 100, "less": 1 - q.value / 100, "more": 1 + q.value / 100}
                if divides:  # "50 %" as "52 / 2" (a 4 that multiplies is more often 4 weeks than 1/25 %)
                    forms["per_share"] = 100 / q.value
                out += [Reading("quantity", i, form) for form, v in forms.items() if v == value]
            elif divides and q.kind in ("fraction", "latex_fraction") and q.value and 1 / q.value == value:
                out.append(Reading("quantity", i, "inverse"))  # "1/3 as many" as "66 / 3"
            elif i in cents and q.value / 100 == value:  # "25 cents" read as 0.25 (dollars)
                out.append(Reading("quantity", i, "share"))
    return tuple(out) if len(out) == 1 else (CONSTANT,)


def quantity_read(steps: list[Step]) -> set[Fraction]:
    """The values of the numbers the steps read as quantities."""
    return {o.value for s in steps for o in s.operands if any(r.kind == "quantity" for r in o.readings)}


SHARE_CUES = {
    Fraction(1, 2): ("half",),
    Fraction(1, 4): ("quarter",),
    Fraction(1, 3): ("third",),
    Fraction(2): ("half",),
}


def share_cue(text: str, value: Fraction) -> bool:
    """Whether ``text`` names a share of that value ("half": 0.5, "a quarter": 0.25)."""
    words = text.lower()
    return any(re.search(rf"(?<![a-z]){cue}", words) for cue in SHARE_CUES.get(value, ()))


def cue_in(
    text: str, value: Fraction, cues_of: dict[int, tuple[str, ...]] = UNIT_CUES, whole_word: bool = False
) -> bool:
    """Whether ``text`` names a unit whose constant is ``value`` ("twice" for 2, "dozen" for 12);
    ``whole_word``: the cue as a word of its own ("half", "halves", not "halfway")."""
    cues = cues_of.get(int(value), ()) if value.denominator == 1 else ()
    words = _PERIODS.sub(" ", text.lower())
    end = r"(?:s|d|ed|es)?(?![a-z])" if whole_word else ""
    return any(re.search(rf"(?<![a-z]){re.escape(cue)}{end}", words) for cue in cues)


# "the first half" of a match, "the third quarter" of a year: a period's name, no share or multiplier
_PERIODS = re.compile(r"\b(?:first|second|third|fourth|last|other|final|next)\s+(?:half|halves|quarters?)\b")


def _per_hundred(tokens: tuple[str | int, ...], numbers: list[Number]) -> set[int]:
    """The numbers of a step taken per hundred: followed by ``/ 100`` or ``* .01``."""
    out = set()
    for i, token in enumerate(tokens[:-2]):
        if isinstance(token, int) and isinstance(tokens[i + 2], int):
            after = numbers[tokens[i + 2]].value  # type: ignore[index]
            if (tokens[i + 1] == "/" and after == 100) or (tokens[i + 1] == "*" and after == Fraction(1, 100)):
                out.add(token)
    return out


def _merge_negatives(
    tokens: tuple[str | int, ...], numbers: list[Number], negatives: set[Fraction]
) -> tuple[tuple[str | int, ...], list[Number]]:
    """``-4`` read as one number where an earlier step's result is -4 (``4 - 8 = -4``, then
    ``-4 + 5 = 1``: the -4 is that result, not the question's 4 negated); only a unary minus (at
    the start, after an operator or an opening parenthesis)."""
    if not negatives:
        return tokens, numbers
    out_tokens: list[str | int] = []
    numbers = list(numbers)
    i = 0
    while i < len(tokens):
        token, after = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
        unary = not out_tokens or out_tokens[-1] in ("+", "-", "*", "/", "^", "(")
        if token == "-" and unary and isinstance(after, int) and -numbers[after].value in negatives:
            n = numbers[after]
            numbers[after] = Number(-n.value, f"-{n.text}", n.percent)
            out_tokens.append(after)
            i += 2
            continue
        out_tokens.append(token)
        i += 1
    return tuple(out_tokens), numbers


def _merge_fractions(
    step: WrittenStep, quantities: list[Slot], results: set[Fraction]
) -> tuple[tuple[str | int, ...], list[Number]]:
    """``3 / 4`` read as one number where the question states that fraction, or an earlier step's
    result is it (``1 - (1/3) = 2/3``, then ``100 / (2/3)``: the 2/3 is that result); not after a
    ``/``, where it would change the grouping."""
    fractions = {q.value for q in quantities if q.kind in ("fraction", "latex_fraction")} | results
    tokens, numbers = list(step.tokens), list(step.numbers)
    out_tokens: list[str | int] = []
    out_numbers: list[Number] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if (
            isinstance(token, int)
            and i + 2 < len(tokens)
            and tokens[i + 1] == "/"
            and isinstance(tokens[i + 2], int)
            and (not out_tokens or out_tokens[-1] != "/")
        ):
            a, b = numbers[token], numbers[tokens[i + 2]]  # type: ignore[index]
            if b.value and a.value / b.value in fractions and a.value.denominator == b.value.denominator == 1:
                out_numbers.append(Number(a.value / b.value, f"{a.text}/{b.text}"))
                out_tokens.append(len(out_numbers) - 1)
                i += 3
                continue
        if isinstance(token, int):
            out_numbers.append(numbers[token])
            out_tokens.append(len(out_numbers) - 1)
        else:
            out_tokens.append(token)
        i += 1
    return tuple(out_tokens), out_numbers
