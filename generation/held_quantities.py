"""The quantities a matched control keeps at the original's values, where a worked solution cannot
vouch for how they enter its answer.

:mod:`generation.answers` re-runs a worked solution on a similar's quantities only where every
number of its steps is accounted for. Some numbers are not:

* a constant nothing in the question explains (``4 * 7`` for the rest of a week of which 3 days
  are stated) was worked out in words from the question's numbers;
* a result the solution states but computes in no step it writes (``half * 30 = 15``);
* a quantity the solution never reads as stated may have been read in another form;
* a quantity read more often than stated may be a unit's constant in disguise ("every 12 months").

Re-running the program with new values for the quantities such a number came from would give a
wrong answer. A control that keeps those quantities at their original values runs it right:
whatever was worked out from them is worked out the same. This module finds which quantities a
doubtful number may rest on: every way of writing it as a quantity (or its share), an earlier
step's result, or either combined with one more number — a quantity, an earlier result, a constant
the question or solution names, a small whole number — by ``+ − × ÷``, all of them taken together
(a coincidental way only holds more). A number that no such way writes from a quantity is
unexplained: the solution is refused (:func:`origins` returns None). Pure functions; exact
arithmetic.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Iterable, Sequence

from .numbers import Slot
from .solution_program import CONSTANT, Operand, Step

Table = dict[Fraction, frozenset[int]]  # a value, and the quantities (distinct indices) it rests on


def step_sources(steps: Sequence[Step]) -> list[frozenset[int]]:
    """Per step, every quantity its result rests on, through earlier results, under every reading."""
    out: list[frozenset[int]] = []
    for step in steps:
        out.append(frozenset().union(*(operand_sources(o, out) for o in step.operands)))
    return out


def operand_sources(operand: Operand, sources: Sequence[frozenset[int]]) -> frozenset[int]:
    """The quantities a number of a step rests on, under every reading (``sources``: the earlier steps')."""
    rests: set[int] = set()
    for r in operand.readings:
        if r.kind == "quantity":
            rests.add(r.index)
        elif r.kind == "step":
            rests |= sources[r.index]
    return frozenset(rests)


def table(
    quantities: Sequence[Slot],
    steps: Sequence[Step],
    sources: Sequence[frozenset[int]],
    before: int,
    constants: Iterable[Fraction],
    rounded: bool = False,
) -> Table:
    """The numbers a doubtful number of step ``before`` may be worked out from: every quantity in
    its stated and share forms (``rounded``: and rounded, where the question rounds), the results of
    the steps before it, and ``constants`` (the units and structure the question names, resting on
    nothing)."""
    out: dict[Fraction, set[int]] = {}
    for value in constants:
        out.setdefault(value, set())
    for i, q in enumerate(quantities):
        for form in forms(q, rounded):
            out.setdefault(form, set()).add(i)
    for s in range(min(before, len(steps))):
        out.setdefault(steps[s].result, set()).update(sources[s])
    return {value: frozenset(rests) for value, rests in out.items()}


def forms(q: Slot, rounded: bool = False) -> set[Fraction]:
    """A quantity's value as a step may read it: as stated; a percentage as a share (``0.2``,
    ``0.8``, ``1.2``, ``5`` of 20 %); a fraction's two terms, its rest and its inverse; with
    ``rounded``, rounded down or up ($2.74 as $3: a use of a quantity no step reads, not what a
    constant is written from — any decimal rounds to some small whole number)."""
    value = q.value
    out = {value}
    if rounded and value.denominator > 1:
        out |= {Fraction(math.floor(value)), Fraction(math.ceil(value))}
    if q.percent:
        out |= {value / 100, 1 - value / 100, 1 + value / 100} | ({100 / value} if value else set())
    if q.kind in ("fraction", "latex_fraction"):
        out |= {Fraction(value.numerator), Fraction(value.denominator), 1 - value} | ({1 / value} if value else set())
    return out


def origins(value: Fraction, numbers: Table, exhaustive: bool = False) -> frozenset[int] | None:
    """Every quantity ``value`` may rest on, or None where nothing writes it from a quantity. The
    simplest ways that write it are taken: as one of ``numbers`` that rests on a quantity; failing
    that, all the ways two of them combined by ``+ − × ÷`` write it, where at least one rests on a
    quantity; failing those, one of them plus or minus 1 or 2, or times or over 2, 3 or 4 (``8 - 2``,
    ``4 / 2``). ``exhaustive``: a form of a quantity and the ways two numbers write it, together (a
    result computed where no step shows it: "18 emails" of 18 % of 100 rests on the 100 too)."""
    direct = numbers.get(value)
    if direct and not exhaustive:  # a form of a quantity or an earlier result (``0.5`` of a stated 50 %)
        return direct
    for level in (_pairs, _with_small):
        held = level(value, numbers)
        if held is not None or direct:
            return frozenset(held or ()) | (direct or frozenset())
    return None


def _pairs(value: Fraction, numbers: Table) -> frozenset[int] | None:
    """What every way of writing ``value`` as two of ``numbers`` (one resting on a quantity), or as
    the sum or difference of three ("11 hours" after 2, 5 and 4), rests on."""
    held: set[int] = set()
    found = False
    for a, rests_a in numbers.items():
        for b in _partners(value, a):
            rests_b = numbers.get(b)
            if rests_b is not None and (rests_a or rests_b):
                found = True
                held |= rests_a | rests_b
    resting = [(v, r) for v, r in numbers.items() if r]
    for i, (a, rests_a) in enumerate(resting):
        for b, rests_b in resting[i + 1 :]:
            for c in {value - a - b, value - a + b, value + a - b, a + b - value}:
                rests_c = numbers.get(c)
                if rests_c and c not in (a, b):
                    found = True
                    held |= rests_a | rests_b | rests_c
    return frozenset(held) if found else None


def _with_small(value: Fraction, numbers: Table) -> frozenset[int] | None:
    """What every way of writing ``value`` as one of ``numbers`` plus or minus 1 or 2, or times or
    over 2, 3 or 4 ("one more than", "twice", "a third of") rests on."""
    held: set[int] = set()
    for a, rests in numbers.items():
        near = {a + d for d in (-2, -1, 1, 2)} | {a * m for m in (2, 3, 4)} | {a / m for m in (2, 3, 4)}
        if rests and value in near:
            held |= rests
    return frozenset(held) if held else None


def _partners(value: Fraction, a: Fraction) -> set[Fraction]:
    """The b with a + b, a − b, b − a, a × b, a ÷ b or b ÷ a equal to ``value``."""
    out = {value - a, a - value, value + a}
    if a:
        out.add(value / a)
        out.add(value * a)
    if value:
        out.add(a / value)
    return out


def partners_of(index: int, quantities: Sequence[Slot], steps: Sequence[Step], numbers: Table) -> frozenset[int]:
    """A quantity no step reads as stated, and every quantity it may have been used with where no step
    shows it: a number of a step equal to one of its forms (the ``.75`` of a stated 1/4 left over),
    a number a step repeats as many times as the quantity counts ("the first two have 200 each":
    ``200 + 200``), and each of ``numbers`` it may have been combined with into a constant of the
    steps ("3 dogs and 4 cats", then "7 * 5" for the pets' treats, where "a week" explains the 7)."""
    mine = forms(quantities[index], rounded=True)
    sources = step_sources(steps)
    held = {index}
    loose = []
    for step in steps:
        repeats = Counter(o.value for o in step.operands)
        for operand in step.operands:
            if operand.value in mine or (repeats[operand.value] > 1 and repeats[operand.value] in mine):
                held |= operand_sources(operand, sources)
            if operand.readings == (CONSTANT,) and operand.value not in (0, 1):
                loose.append(operand.value)
    if not mine & {Fraction(0), Fraction(1)}:  # "3 dogs and 4 cats", then "the 7 pets": the cats too
        for value in loose:
            for a in mine:
                held |= _partners_rest(value, a, numbers)
    return frozenset(held)


def _partners_rest(value: Fraction, a: Fraction, numbers: Table) -> set[int]:
    """What every number ``b`` of ``numbers`` with ``value`` = ``a`` + − × ÷ ``b`` rests on."""
    return {i for b in _partners(value, a) for i in numbers.get(b, ())}
