"""The numbers of a worked solution it cannot vouch for (*doubts*), and the quantities each rests on.

:mod:`generation.answers` reads a worked solution as a program over the question's quantities.
Each doubt below rests on some of them (:mod:`generation.held_quantities`), which a matched
control keeps at their original values; a doubt that rests on none refuses the solution:

* a result the solution states but computes in no step read here (``half * 30 = 15``), read later:
  it rests on what writes it (:func:`generation.held_quantities.origins`) — in an algebraic
  solution ("Let g be…", ``2g = 10``) on every quantity;
* a constant nothing explains — no unit or multiplier the question names ("dozen": 12, "a week": 7,
  "twice": 2, "round trip": 2, a percentage's 100), no number it states as structure, not 0 or 1 —
  was worked out in words (``150 / 3`` after 2 and 1 hours): it rests on its origins; in a
  solution written in LaTeX (MATH's), so does a number beside a quantity it is one or two away
  from, twice or half (``\\frac{7\\times6\\times5}{3\\times2}`` for choosing 3 of 7);
* a number a step writes twice beside its multiplier ("twice the 2 who play tennis, so 2 * 2": one
  of them is the multiplier) rests on what the other reading does;
* a quantity read more often than the question states it whose value is a unit the question names
  ("every 12 months" and ``/ 12``, "7 tacos" and a week): which reading is the constant cannot be
  told, so it is held;
* a quantity whose value the question also states as a number a similar keeps ("page 32 … a
  32-page tabloid"), or a count the question enumerates by an ordinal ("3 classes … the third
  class"), is held;
* a quantity the solution never reads is a distractor — it changes nothing — only when the
  solution reads none of its forms as a constant (``0.8`` for 20 %, the ``4`` of ``3/4``, ``0.75``
  for 75 cents, $3 for $2.74 rounded, nor its sum, difference, product or ratio with another
  number of the problem: "3 dogs and 4 cats, so 7 pets"), reads no constant but units and simple
  shares (:data:`PLAIN_CONSTANTS`), and it is not 1 (``1 batch`` is read by multiplying by one);
  else it is held, with the quantities it may have been used with
  (:func:`generation.held_quantities.partners_of`).

Pure functions; exact arithmetic.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .held_quantities import Table, operand_sources, origins, partners_of, step_sources, table
from .numbers import Slot
from .solution_binding import ORDINAL_CUES, UNIT_CUES, cue_in, quantity_read, share_cue
from .solution_program import CONSTANT, Step

# Constants a solution may read beside a quantity it leaves unread: units and simple shares. Any
# other constant may be a number worked out where no step shows it, from that very quantity.
PLAIN_CONSTANTS = frozenset(
    {Fraction(n) for n in (*range(1, 13), *UNIT_CUES)} | {Fraction(1, d) for d in (2, 3, 4, 10, 100)} | {Fraction(3, 4)}
)


Doubt = tuple[str, "frozenset[int] | None"]  # why a number is doubtful, and the quantities it rests on (None: none)


def solution_doubts(
    question: str,
    solution: str,
    steps: list[Step],
    quantities: list[Slot],
    slots: tuple[Slot, ...],
    hidden: tuple[tuple[Fraction, tuple[Fraction, ...]], ...],
    read: set[int],
) -> list[Doubt]:
    """Every number of the solution it cannot vouch for, in the order of the module docstring's rules
    (``read``: the quantities its steps read as stated)."""
    sources = step_sources(steps)
    constants = [o.value for s in steps for o in s.operands if o.readings == (CONSTANT,)]
    named = _named_constants(question, quantities)
    rounds = re.search(r"\bround|\bnearest\b", question, re.IGNORECASE) is not None  # "$2.74 rounded to $3"

    def rests(value: Fraction, before: int) -> frozenset[int] | None:
        return origins(value, table(quantities, steps, sources, before, named, rounds))

    out: list[Doubt] = []
    everything = frozenset(range(len(quantities)))
    algebra = _ALGEBRA.search(solution) is not None
    for value in sorted((set(constants) | quantity_read(steps)) & {h for h, _ in hidden}):
        # "12 inches = 1 foot", then "4 * 1": that 1 is the foot, not the stated "1 inch"; in algebra
        # ("2g + 4(20 - g) = 70", so "2g = 10") a result solves an equation of every quantity
        numbers = table(quantities, steps, sources, _first_read(steps, value), named, rounds)
        clauses = {n for h, clause in hidden if h == value for n in clause}
        held = everything if algebra else _hidden_rests(value, clauses, numbers)
        out.append((f"a result computed in a step not read here ({show(value)})", held))
    strict = mathematical(solution)
    derived = _worked_out_nearby(steps, quantities) if strict else []
    for s, value in derived + _worked_out_in_words(steps, quantities, question):
        out.append((f"a number worked out from a quantity where no step shows it ({show(value)})", rests(value, s)))
    for step in steps:  # "twice the 2 who play tennis, so 2 * 2": one 2 is the multiplier, which cannot be told
        twice = [o for o in step.operands if CONSTANT in o.readings and len(o.readings) > 1]
        for operand in twice:
            if sum(o.value == operand.value for o in step.operands) > 1:
                why = f"a number a step writes twice beside its multiplier ({show(operand.value)})"
                out.append((why, operand_sources(operand, sources)))
    for index in _read_too_often(steps, slots, quantities, question):
        out.append(
            (f"a quantity read more often than the question states it ({quantities[index].text!r})", frozenset({index}))
        )
    for index, why in _fixed_twins(question, slots, quantities) + _ordinal_counts(question, quantities):
        out.append((why, frozenset({index})))
    all_numbers = table(quantities, steps, sources, len(steps), named, rounds)
    known = {q.value for q in quantities} | {s.result for s in steps} | set(constants) | {Fraction(1), Fraction(2)}
    seen = {o.value for s in steps for o in s.operands} | {s.result for s in steps}
    for index, quantity in enumerate(quantities):
        if index not in read and not quantity.year and (strict or not _distractor(quantity, constants, known, seen)):
            why = f"a quantity the worked solution never reads as it is stated ({quantity.text!r})"
            out.append((why, partners_of(index, quantities, steps, all_numbers)))
    return out


def _fixed_twins(question: str, slots: tuple[Slot, ...], quantities: list[Slot]) -> list[tuple[int, str]]:
    """The quantities whose value the question also states as a number a similar keeps ("page 32
    … a 32-page tabloid"): a step's number of that value may be either."""
    spans = [(s.start, s.end) for s in slots]
    fixed = {
        _plain_number(m.group(0))
        for m in _ANY_NUMBER.finditer(question)
        if not any(a < m.end() and m.start() < b for a, b in spans)
    }
    why = "a quantity the question also states as a number a similar keeps"
    return [(i, f"{why} ({q.text!r})") for i, q in enumerate(quantities) if q.value in fixed]


_ORDINALS = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def _ordinal_counts(question: str, quantities: list[Slot]) -> list[tuple[int, str]]:
    """The counts the question also enumerates by an ordinal ("3 classes … the third class"): a
    similar with 4 classes would leave the fourth out."""
    words = question.lower()
    named = {n for n, word in enumerate(_ORDINALS, start=2) if re.search(rf"(?<![a-z]){word}(?![a-z])", words)}
    why = "a count the question also enumerates by an ordinal"
    return [(i, f"{why} ({q.text!r})") for i, q in enumerate(quantities) if q.value in named and not q.percent]


def _hidden_rests(value: Fraction, clauses: set[Fraction], numbers: Table) -> frozenset[int] | None:
    """What a result stated but computed in no read step rests on: every simple way of writing it
    (:func:`~generation.held_quantities.origins`, exhaustive) and the numbers of the expression it is
    stated after ("15 x 0.6666 = 10.0", which does not compute exactly: 15 and the share)."""
    held = origins(value, numbers, exhaustive=True)
    written = frozenset().union(*(numbers.get(n, frozenset()) for n in clauses))
    return written or None if held is None else held | written


_ALGEBRA = re.compile(r"\blet\s+[a-z]\b|\d[a-z]\b", re.IGNORECASE)  # "Let g be …", "2g + 4s = 70"


def _first_read(steps: list[Step], value: Fraction) -> int:
    """The first step that reads a number of ``value``."""
    return next((s for s, step in enumerate(steps) if any(o.value == value for o in step.operands)), len(steps))


def _named_constants(question: str, quantities: list[Slot]) -> list[Fraction]:
    """The constants the question names: its units' and multipliers' values ("a week": 7), and the
    numbers it states as structure ("the 3rd floor")."""
    named = [Fraction(v) for v in UNIT_CUES if cue_in(question, Fraction(v))]
    named += [Fraction(v) for v in ORDINAL_CUES if cue_in(question, Fraction(v), ORDINAL_CUES)]
    structure = {v for v in (_plain_number(m.group(0)) for m in _ANY_NUMBER.finditer(question)) if v is not None}
    return named + sorted(structure - {q.value for q in quantities})


def mathematical(solution: str) -> bool:
    """Whether a solution is written in LaTeX (MATH's): there a number the question never states is
    mostly worked out in the reasoning (``\\frac{7\\times6\\times5}{3\\times2}``: 6 and 5 come from
    7), so a quantity left unread is no distractor, and a number next to a quantity it is one or two
    away from, or twice or half, is taken for worked out from it (:func:`_worked_out_nearby`)."""
    return "\\" in solution  # \\frac, \\boxed, \\cdot: GSM8K's "$" is money


def _worked_out_in_words(steps: list[Step], quantities: list[Slot], question: str) -> list[tuple[int, Fraction]]:
    """(step, value) of every constant of the steps that nothing explains — it is no unit or
    multiplier the question names ("dozen": 12, "a week": 7, "twice": 2, a percentage's 100), no
    number the question states as structure ("the 3rd floor", "a 10-foot section") and not 0 or 1 —
    so it was worked out in words from the problem's numbers (``150 / 3`` after 2 and 1 hours;
    ``12.8 / 2`` after 2/5 was left; ``4 * 7`` for the rest of the week)."""
    structure = {v for v in (_plain_number(m.group(0)) for m in _ANY_NUMBER.finditer(question)) if v is not None}
    structure -= {q.value for q in quantities}
    percent = any(q.percent for q in quantities) or "%" in question or "percent" in question.lower()
    out = []
    for s, step in enumerate(steps):
        for operand in step.operands:
            value = operand.value
            if operand.readings != (CONSTANT,) or value in (0, 1) or value in structure:
                continue
            explained = cue_in(question, value) or cue_in(question, value, ORDINAL_CUES) or share_cue(question, value)
            if not ((percent and value in (100, Fraction(1, 100))) or explained):
                out.append((s, value))
    return out


_ANY_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _plain_number(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _worked_out_nearby(steps: list[Step], quantities: list[Slot]) -> list[tuple[int, Fraction]]:
    """(step, value) of every number of a step, not itself a quantity's reading, that is a quantity
    of the same step plus or minus one or two, twice or half it (``7 × 6 × 5``)."""
    out = []
    for s, step in enumerate(steps):
        stated = {quantities[r.index].value for o in step.operands for r in o.readings if r.kind == "quantity"}
        near = {q + d for q in stated for d in (-2, -1, 1, 2)} | {2 * q for q in stated} | {q / 2 for q in stated}
        for operand in step.operands:
            if any(r.kind == "quantity" for r in operand.readings) or operand.value == 0:
                continue
            if operand.value in near:
                out.append((s, operand.value))
    return out


def _read_too_often(steps: list[Step], slots: tuple[Slot, ...], quantities: list[Slot], question: str) -> list[int]:
    """Every quantity read more often than stated whose value is the constant of a unit the
    question names (which reading is the constant cannot be told)."""
    counts: dict[int, int] = {}
    for step in steps:
        for operand in step.operands:
            if len(operand.readings) == 1 and operand.readings[0].kind == "quantity":
                index = operand.readings[0].index
                counts[index] = counts.get(index, 0) + 1
    return [
        index
        for index, n in counts.items()
        if n > sum(s.key == quantities[index].key for s in slots) and cue_in(question, quantities[index].value)
    ]


def _distractor(quantity: Slot, constants: list[Fraction], known: set[Fraction], seen: set[Fraction]) -> bool:
    """Whether a quantity no step reads can be left out of the solution safely (see the module
    docstring); ``known``: every other value the solution could combine it with (the question's
    quantities, the steps' results, the constants); ``seen``: every number the steps read or
    compute — none may be a form of it ("the first two have 200 each": ``200 + 200 = 400`` is two
    times 200; "1/3 of the fish": ``21 / 3`` reads its 3)."""
    value = quantity.value
    if value == 1 or any(c not in PLAIN_CONSTANTS for c in constants):
        return False
    forms = {value, value / 100, value / 10, value * 10, value * 100, value / 1000}  # 75 cents as 0.75
    if value.denominator > 1:  # $2.74 rounded to $3
        forms |= {Fraction(math.floor(value)), Fraction(math.ceil(value))}
    if quantity.percent:
        forms |= {1 - value / 100, 1 + value / 100}
    if quantity.kind in ("fraction", "latex_fraction"):
        forms |= {Fraction(value.numerator), Fraction(value.denominator)}
    for other in known:  # "3 dogs and 4 cats, so 7 pets. 7 * 2 = 14": 7 is worked out in words
        forms |= {value + other, value - other, other - value, value * other}
        forms |= {value / other} if other else set()
        forms |= {other / value} if value else set()
    return not forms & (set(constants) | seen)


def show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))
