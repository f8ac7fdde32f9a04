"""A rule-based answer verifier, as RLVR pipelines reward their rollouts (reward gain, SPEC §5).

The final answer is the one the response *states*, read by the first of these that applies:

1. the first explicit marker — "the answer is …" / "answer: …" (any case), or a line reading
   ``#### <value>`` (GSM8K's convention; a ``####`` line with more than one word is a Markdown
   heading, not a marker): only the value right after it, up to the end of its sentence or line,
   is judged, so a check or restatement after it is ignored;
2. else the last ``\\boxed{}``;
3. else the last number of the response (a numeric answer, no LaTeX in the response), the whole
   response read by ``math-verify`` (another mathematical answer, or a response with LaTeX), or
   the response's last line (any other answer).

Values are normalised first: Unicode minus (U+2212), digit-group commas, a trailing period, ``$``,
scientific notation (``1.5e-3``), lettered choices (``(B)``, ``B)``, ``B.`` are all ``B``).

The rule recorded in the :class:`Judgement` (one of :data:`RULES`):

* ``####`` — a ``####`` line was the first marker;
* ``math-verify`` — a mathematical answer stated after "the answer is" or in the last
  ``\\boxed{}`` (or, unstated, a non-numeric one read by math-verify from the whole response),
  compared by value: plain numbers exactly, anything else by Hugging Face's ``math-verify``;
* ``last number`` — a numeric answer, nothing stated: the response's last number;
* ``exact`` — a non-mathematical answer (a word, a choice letter) stated after a marker, in the
  last ``\\boxed{}`` or on the last line, compared as normalised text.

``math-verify`` bounds its parsing time with ``signal.alarm``: call :func:`judge` from a process's
main thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
_NUMBER = re.compile(rf"(?:(?<![\w).])[-+])?(?<![\w.])(?:{_NUM})")  # "3-5" reads 3 and 5, not -5
_PLAIN = re.compile(rf"[-+]?(?:{_NUM})")
_HASHES = re.compile(r"^[ \t]*####[ \t]*(\S+?)\.?[ \t]*$", re.MULTILINE)  # "#### 42": one value
_STATED = re.compile(r"\banswer\s+is\b\s*:?|\banswer\s*:", re.IGNORECASE)
_VALUE_END = re.compile(r"\n|\.(?=\s|$)")  # a value runs to the end of its line or sentence
_MATH = re.compile(r"\d|\\|\$|[\^=+*/]")  # an answer math-verify should read: a digit, LaTeX, an operator
_CHOICE = re.compile(r"\(([a-z])\)|([a-z])(?:[.):](?=\s|$)|$)")  # "(b)", "b)", "b.", "b" (casefolded)
RULES = ("####", "math-verify", "last number", "exact")


@dataclass(frozen=True)
class Judgement:
    """A response's reward (1 correct, 0 not) and the rule that decided it."""

    reward: float
    rule: str


def judge(response: str, answer: Any) -> Judgement:
    """The reward of ``response`` for a question whose answer is ``answer``."""
    text = _unminus(response)
    gold = _unminus(_text(answer))
    mathematical = bool(_MATH.search(gold))
    stated = _first_marker(text)
    if stated is not None:
        value, hashes = stated
        rule = "####" if hashes else "math-verify" if mathematical else "exact"
        return Judgement(float(_same(value, gold, mathematical)), rule)
    boxed = _last_boxed(text)
    if boxed is not None:
        return Judgement(float(_same(boxed, gold, mathematical)), "math-verify" if mathematical else "exact")
    if mathematical and _number(gold) is not None and "\\" not in text:  # LaTeX: math-verify reads it
        numbers = _NUMBER.findall(text)
        return Judgement(float(bool(numbers) and _number(numbers[-1]) == _number(gold)), "last number")
    if mathematical:
        return Judgement(float(_verify(gold, text)), "math-verify")
    lines = text.strip().splitlines()
    return Judgement(float(_same_text(lines[-1] if lines else "", gold)), "exact")


def gold_readable(answer: Any) -> bool:
    """Whether the verifier can read a known answer at all: any non-mathematical text, a plain
    number, or a mathematical one ``math-verify`` parses. One it cannot parse would mark every
    response wrong (a reward of 0 that is no measurement)."""
    gold = _unminus(_text(answer))
    if not _MATH.search(gold) or _number(gold) is not None:
        return True
    return bool(_parse(f"${gold}$"))


def _first_marker(text: str) -> tuple[str, bool] | None:
    """The value after the first explicit marker and whether that marker was a ``####`` line, or
    None. A phrase marker with nothing after it on its line ("what the answer is.") does not count."""
    found = _marked_values(text)
    return (text[found[1] : found[2]], found[3]) if found else None


def _marked_values(text: str) -> tuple[int, int, int, bool] | None:
    """The first explicit marker: (its start, its value's ``[start, end)`` characters, whether it
    was a ``####`` line), or None."""
    found: list[tuple[int, int, int, bool]] = [(m.start(), *m.span(1), True) for m in _HASHES.finditer(text)]
    for m in _STATED.finditer(text):
        rest = text[m.end() :].lstrip("*: \t")  # "**Answer:** 42", "The answer is: 42"
        end = _VALUE_END.search(rest)
        raw = rest[: end.start()] if end else rest
        value = raw.strip()
        if value.strip("*") and not value.startswith((",", ";", ".", "?", "!")):
            begin = len(text) - len(rest) + len(raw) - len(raw.lstrip())
            found.append((m.start(), begin, begin + len(value), False))
    return min(found) if found else None


def answer_span(response: str) -> tuple[int, int] | None:
    """``[start, end)``: the characters of ``response`` holding the answer it states, read as
    :func:`judge` reads it without knowing the answer — the first marker's value, else the last
    ``\\boxed{}``'s contents, else the last number; None when it states none of these (rollout
    reference scores, SPEC §10, read the answer's tokens there)."""
    text = _unminus(response)  # one character for one: the offsets hold in ``response``
    marked = _marked_values(text)
    if marked is not None:
        return marked[1], marked[2]
    boxed = _last_boxed_span(text)
    if boxed is not None:
        return boxed
    numbers = list(_NUMBER.finditer(text))
    return numbers[-1].span() if numbers else None


def _last_boxed(text: str) -> str | None:
    """The contents of the last ``\\boxed{…}`` (braces balanced), or None."""
    span = _last_boxed_span(text)
    return text[span[0] : span[1]] if span else None


def _last_boxed_span(text: str) -> tuple[int, int] | None:
    """``[start, end)`` of the last ``\\boxed{…}``'s contents (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for i in range(begin - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return begin, i
    return None


def _same(found: str, gold: str, mathematical: bool) -> bool:
    """A stated value against the known answer: by value for a mathematical answer, else as text."""
    if not mathematical:
        return _same_text(found, gold)
    value = found.strip().strip("*").strip()
    if "\\" not in value:  # "$28", "$28$": currency or inline math around a plain value
        value = value.replace("$", "").strip()
    expected = _number(gold)
    lead = _PLAIN.match(value)
    if lead and (lead.end() == len(value) or re.match(r"\s*(?:[^\W\d_]|[,;:%)])", value[lead.end() :])):
        got = _number(lead.group())  # "28", "1,234", "1.5e-3", "28 apples", "42, since …"
        if expected is not None:
            return got == expected
        value = format(got, "f")
    if expected is not None:
        gold = format(expected, "f")
    return _verify(gold, value)


def _same_text(found: str, gold: str) -> bool:
    """Normalised text equality; a choice letter also matches "(B)", "B)", "B." leading the value."""
    found_n, gold_n = _normal(found), _normal(gold)
    if found_n == gold_n:
        return True
    letter = _choice(gold_n)
    return letter is not None and _choice(found_n, leading=True) == letter


def _choice(text: str, leading: bool = False) -> str | None:
    """The choice letter ``text`` is (or, ``leading``, begins with), or None."""
    m = _CHOICE.match(text)
    if m is None or (not leading and m.end() != len(text)):
        return None
    return m.group(1) or m.group(2)


def _normal(text: str) -> str:
    text = text.strip().strip("*").strip()
    for wrapper in (r"\$(.*)\$", r"\\boxed\{(.*)\}", r"\\text\{(.*)\}"):
        text = re.sub(rf"^{wrapper}$", r"\1", text.strip())
    text = " ".join(text.rstrip(".").casefold().split())
    letter = _choice(text)
    return letter if letter is not None else text


def _number(text: str) -> Decimal | None:
    """``text`` as a plain number (digit-group commas dropped, scientific notation read), or None."""
    text = text.strip().rstrip(".")
    if not _PLAIN.fullmatch(text):
        return None
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def _verify(gold: str, response: str) -> bool:
    from math_verify import verify

    expected = _parse(f"${gold}$")
    return bool(expected) and bool(verify(expected, _parse(response)))


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    return parse(text)


def _unminus(text: str) -> str:
    return text.replace("\u2212", "-")


def _text(answer: Any) -> str:
    if isinstance(answer, float) and answer.is_integer():
        return str(int(answer))
    return str(answer).strip()
