"""A worked solution as a program over a question's quantities, and running it on new values.

:mod:`generation.answers` reads a solution into a :class:`WorkedSolution`: steps whose numbers
each stand for a quantity of the question, an earlier step's result or a constant. Running it
with a similar question's quantities gives the similar's answer (:meth:`WorkedSolution.answer_of`);
:meth:`WorkedSolution.stages` and :meth:`WorkedSolution.extend` run it a quantity at a time, so
the offline generator can draw each quantity among the values that keep the steps computed so far
whole and non-negative (:mod:`generation.value_draws`). Pure functions; exact arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from .numbers import Slot, find_slots
from .solution_steps import evaluate

Choice = tuple[tuple[int, int, "Reading"], ...]  # (step, operand, reading): how ambiguous numbers are read


@dataclass(frozen=True)
class Reading:
    """What a number of a step stands for: ``quantity`` (``index``: a distinct quantity of the
    question, ``form``: ``stated``, ``share`` p/100, ``less`` 1 − p/100, ``more`` 1 + p/100,
    ``per_share`` 100/p, a fraction's ``inverse`` 1/f, or ``negated`` −q),
    ``step`` (``index``: an earlier step), or ``constant``."""

    kind: str
    index: int = -1
    form: str = "stated"


CONSTANT = Reading("constant")


@dataclass(frozen=True)
class Operand:
    value: Fraction  # as written
    percent: bool  # ``%`` follows it
    readings: tuple[Reading, ...]  # one, or several that must agree on every variant


@dataclass(frozen=True)
class Step:
    tokens: tuple[str | int, ...]  # operators, parentheses, ints indexing ``operands``
    operands: tuple[Operand, ...]
    result: Fraction
    percent: bool  # ``%`` evaluates as /100


@dataclass(frozen=True)
class WorkedSolution:
    """A question's solution as a program over its distinct quantities (``keys``, in order of first
    appearance among ``slots``)."""

    slots: tuple[Slot, ...]
    keys: tuple[tuple, ...]
    steps: tuple[Step, ...]
    answer_step: int
    whole: tuple[bool, ...]  # per step: its result must stay a whole number
    signed: tuple[bool, ...]  # per step: its result must stay non-negative
    alternatives: tuple[Choice, ...] = ((),)  # the ways of reading ambiguous numbers, all to agree
    latex: bool = False  # the known answer is LaTeX: a fraction answer is written \\frac{p}{q}
    held: frozenset[int] = frozenset()  # the quantities a variant must keep for the program to hold
    # (:mod:`generation.held_quantities`): a number of the solution may have been worked out from them

    def answer_for(self, variant: str) -> int | float | str | None:
        """The answer of ``variant`` (the original with other quantities), or None when it cannot
        be told (another slot structure, readings that disagree, a division by zero, an answer
        less whole than the original's)."""
        values = self._quantities(variant)
        return None if values is None else self.answer_of(values)

    def answer_of(self, quantities: Sequence[Fraction | int]) -> int | float | str | None:
        """The answer when the distinct quantities (``keys``' order) take ``quantities``, or None."""
        values = [Fraction(v) for v in quantities]
        if any(values[i] != self.keys[i][1] for i in self.held):
            return None  # a number worked out from that quantity where no step shows it would be wrong
        answer = None
        for k, choice in enumerate(self.alternatives):
            value = self._run(values, {(s, o): r for s, o, r in choice})
            if value is None or (k and value != answer):
                return None  # every way of reading the numbers must give the answer
            answer = value
        return None if answer is None else as_answer(answer, self.latex)

    def _quantities(self, variant: str) -> list[Fraction] | None:
        """The variant's value of each distinct quantity, or None (another structure, or one quantity
        given two values)."""
        found = find_slots(variant)
        if len(found) != len(self.slots) or any(a.kind != b.kind for a, b in zip(found, self.slots)):
            return None
        out: dict[tuple, Fraction] = {}
        for old, new in zip(self.slots, found):
            if out.setdefault(old.key, new.value) != new.value:
                return None
        return [out[key] for key in self.keys]

    def _run(self, quantities: list[Fraction], chosen: dict[tuple[int, int], Reading]) -> Fraction | None:
        results: list[Fraction] = []
        for s in range(len(self.steps)):
            value = self._step_value(s, quantities, results, chosen)
            if value is None:
                return None
            results.append(value)
        return results[self.answer_step]

    def stages(self) -> list[list[int]]:
        """Per distinct quantity ``i`` (``keys``' order), the steps that can first be run once the
        quantities up to ``i`` are known (under the first way of reading the numbers)."""
        chosen = {(s, o): r for s, o, r in self.alternatives[0]}
        needs: list[int] = []
        out: list[list[int]] = [[] for _ in self.keys]
        for s, step in enumerate(self.steps):
            need = -1
            for o, operand in enumerate(step.operands):
                for r in (chosen[(s, o)],) if (s, o) in chosen else operand.readings:
                    need = max(need, r.index if r.kind == "quantity" else needs[r.index] if r.kind == "step" else -1)
            needs.append(need)
            if out:
                out[max(need, 0)].append(s)
        return out

    def extend(
        self, quantities: Sequence[Fraction | int], results: dict[int, Fraction], steps: Sequence[int]
    ) -> dict[int, Fraction] | None:
        """``results`` with ``steps`` run on the known ``quantities`` (``keys``' order, a prefix), or
        None when one of them is no longer whole or non-negative where the original's is."""
        chosen = {(s, o): r for s, o, r in self.alternatives[0]}
        out = dict(results)
        values = [Fraction(v) for v in quantities]
        for s in steps:
            value = self._step_value(s, values, out, chosen)
            if value is None:
                return None
            out[s] = value
        return out

    def _step_value(
        self,
        s: int,
        quantities: Sequence[Fraction],
        results: dict[int, Fraction] | list[Fraction],
        chosen: dict[tuple[int, int], Reading],
    ) -> Fraction | None:
        """Step ``s``'s result, or None (readings that disagree, no value, a result less whole or
        more negative than the original's)."""
        step = self.steps[s]
        values = []
        for o, operand in enumerate(step.operands):
            readings = (chosen[(s, o)],) if (s, o) in chosen else operand.readings
            seen = {_reading_value(r, operand, quantities, results) for r in readings}
            if len(seen) != 1 or None in seen:
                return None
            value = seen.pop()
            values.append(value / 100 if step.percent and operand.percent else value)
        value = evaluate(step.tokens, values)
        if value is None or (self.whole[s] and value.denominator != 1) or (self.signed[s] and value < 0):
            return None  # 17.5 cards where the original counted whole ones: not the same kind of problem
        return value


def _reading_value(
    reading: Reading, operand: Operand, quantities: Sequence[Fraction], results: dict[int, Fraction] | list[Fraction]
) -> Fraction | None:
    if reading.kind == "constant":
        return operand.value
    if reading.kind == "step":
        return results[reading.index]
    value = quantities[reading.index]
    if reading.form in ("inverse", "per_share"):
        return (100 if reading.form == "per_share" else 1) / value if value else None
    if reading.form == "negated":
        return -value
    return {"stated": value, "share": value / 100, "less": 1 - value / 100, "more": 1 + value / 100}[reading.form]


def as_answer(value: Fraction, latex: bool = False) -> int | float | str | None:
    """An int when whole; else with ``latex`` a fraction as LaTeX (``\\frac{14}{3}``), without it a
    float when a short decimal, else None."""
    if value.denominator == 1:
        return int(value)
    if latex:
        sign = "-" if value < 0 else ""
        return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return float(value) if denominator == 1 else None
