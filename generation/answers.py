"""Answers of similar questions, re-solved by re-running the original's worked solution.

A detector that reads answers (reward gain: how much more often the audited model is right than
the reference) can be calibrated against a question's matched controls only if the controls have
answers too. A similar question differs from its original only in its quantities
(:mod:`generation.numbers`), so the original's worked solution — its steps read by
:mod:`generation.solution_steps`, GSM8K's ``<<6*2=12>>`` annotations or written equations — is a
program: each number of a step is one of the question's quantities, an earlier step's result, or a
constant (``/ 60`` minutes), and the same program run on the similar's quantities gives the
similar's answer.

How each number of a step is read:

* a quantity of the same value (``50%`` of a stated 50 %, or its share ``0.5``, ``1 - 0.5``,
  ``1 + 0.5``; a fraction ``3/4`` written as ``3/4``), or an earlier step's result; where it could
  be both, both readings must give the same new value; where it could be two quantities ("five $5
  bills": ``5 x 5``), each way of reading them that leaves the fewest quantities unread is tried,
  and they must agree;
* else a constant.

Some numbers of a solution it cannot vouch for (:mod:`generation.solution_doubts` names them and
why) rest on some of the question's quantities (:mod:`generation.held_quantities`), which a
matched control then keeps at their original values (:attr:`WorkedSolution.held`; a similar
question, which changes every quantity, gets no answer); :func:`read_solution` refuses the
solution, naming the first doubt, where a doubt rests on no quantity or every quantity is held.
A step must yield the question's known answer (algebra, "Let x be…", leaves the solution unread);
a step whose result is non-negative in the original stays so in the similar, and one whose result
is whole stays whole — unless it is not the answer and reads a sum of money stated with cents
(``$4.20``): 7.2 people or -3 muffins are not the same kind of problem.

Otherwise the similar's answer is unknown (None), never a guess. Pure functions; no model.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction
from typing import Any

from .cas_answers import read_question
from .numbers import find_slots
from .records import PerturbationSet
from .solution_binding import bind, whole_steps
from .solution_doubts import solution_doubts
from .solution_program import Reading, Step, WorkedSolution
from .solution_steps import read_steps

RESOLVER_VERSION = "worked-solution-v4"  # v4: a negative result written again is that result; v3: held quantities, inverse forms, answers in cents; v2: written and annotated steps together, distractors, shares, reuse

MAX_ALTERNATIVES = 64  # ways of reading numbers that could be two quantities, tried before giving up


def read_solution(question: str, solution: Any, answer: Any) -> WorkedSolution | str:
    """The worked solution of ``question`` read as a program, or the reason it cannot be used. A
    program whose doubtful numbers all rest on known quantities holds those (:attr:`WorkedSolution.held`:
    only a control that keeps them gets an answer); one with a number that rests on none is refused."""
    target = number_of(answer)
    if target is None:
        return "the known answer is not a number"
    if not isinstance(solution, str) or not solution.strip():
        return "no worked solution"
    slots = tuple(find_slots(question))
    if not slots:
        return "the question states no quantity"
    keys = tuple(dict.fromkeys(s.key for s in slots))
    quantities = [next(s for s in slots if s.key == key) for key in keys]
    written = read_steps(solution)
    steps = bind(written.steps, quantities, question)
    answering = [i for i, s in enumerate(steps) if s.result == target]
    if not answering:
        return f"no step of the worked solution yields the answer ({answer})"
    alternatives = _alternatives(steps)
    if alternatives is None:
        return f"more than {MAX_ALTERNATIVES} ways to read its numbers as the question's quantities"
    read = _read_quantities(steps, alternatives[0])
    doubts = solution_doubts(question, solution, steps, quantities, slots, written.hidden_from, read)
    held: set[int] = set()
    for why, rests in doubts:
        if rests is None:
            return why
        held |= rests
    if held and all(i in held or q.year for i, q in enumerate(quantities)):
        return doubts[0][0]  # nothing left to vary
    return WorkedSolution(
        slots,
        keys,
        tuple(steps),
        answering[-1],
        whole_steps(steps, quantities, question, answering[-1]),
        tuple(s.result >= 0 for s in steps),
        tuple(alternatives),
        is_latex(answer),
        frozenset(held),
    )


def _alternatives(steps: list[Step]) -> list[tuple[tuple[int, int, Reading], ...]] | None:
    """The ways of reading the numbers that could be several things that leave the fewest
    quantities unread and earlier results unused (a solution works a result out to use it: in
    ``9 / 3 = 3. 3 + 8 = 11`` the second 3 is the first step's); None when there are too many to
    try even with a number that could be a quantity or a result left to agree both ways."""
    for choosable in (lambda readings: True, lambda readings: all(r.kind == "quantity" for r in readings)):
        choices = [
            (s, o, operand.readings)
            for s, step in enumerate(steps)
            for o, operand in enumerate(step.operands)
            if len(operand.readings) > 1 and choosable(operand.readings)
        ]
        if math.prod(len(c[2]) for c in choices) <= MAX_ALTERNATIVES:
            break
    else:
        return None
    combos = [
        tuple((s, o, r) for (s, o, _), r in zip(choices, pick)) for pick in itertools.product(*(c[2] for c in choices))
    ]
    coverage = [_coverage(steps, combo) for combo in combos]
    best = max(coverage)
    return [combo for combo, n in zip(combos, coverage) if n == best]


def _coverage(steps: list[Step], choice: tuple[tuple[int, int, Reading], ...]) -> int:
    """How many quantities and earlier results the steps read, with ``choice``'s readings."""
    read = _read_by(steps, choice)
    return len({r.index for r in read if r.kind == "quantity"}) + len({r.index for r in read if r.kind == "step"})


def _read_quantities(steps: list[Step], choice: tuple[tuple[int, int, Reading], ...]) -> set[int]:
    return {r.index for r in _read_by(steps, choice) if r.kind == "quantity"}


def _read_by(steps: list[Step], choice: tuple[tuple[int, int, Reading], ...]) -> list[Reading]:
    chosen = {(s, o): r for s, o, r in choice}
    out: list[Reading] = []
    for s, step in enumerate(steps):
        for o, operand in enumerate(step.operands):
            out.extend((chosen[(s, o)],) if (s, o) in chosen else operand.readings)
    return out


def number_of(value: Any) -> Fraction | None:
    """A known answer or a number in a solution as an exact fraction (``$1,200.50`` reads 1200.5)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = str(value).strip().replace(",", "").lstrip("$").rstrip("%").strip()
    latex = _LATEX_NUMBER.fullmatch(text.replace(" ", ""))  # MATH's "\\frac{14}{3}", "-\\dfrac{1}{2}"
    if latex:
        sign = -1 if latex.group(1) else 1
        return sign * Fraction(int(latex.group(2)), int(latex.group(3))) if int(latex.group(3)) else None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


_LATEX_NUMBER = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")


def is_latex(answer: Any) -> bool:
    """Whether a known answer is written in LaTeX (a similar's is then written so too)."""
    return isinstance(answer, str) and "\\" in answer


def answers_for(question: str, solution: Any, answer: Any, variants: list[str | None]) -> tuple[list[Any], str | None]:
    """Each variant's answer (None where it cannot be told, or the variant is None), and the reason
    when neither the worked solution nor the question's own mathematics (:mod:`generation.cas_answers`)
    can be used (then every answer is None)."""
    worked: Any = read_solution(question, solution, answer)
    if isinstance(worked, str):
        why = worked
        worked = read_question(question, answer) if answer is not None and "$" in question else why
        if isinstance(worked, str):
            return [None] * len(variants), why
    return [None if v is None else worked.answer_for(v) for v in variants], None


def attach_answers(record: PerturbationSet) -> None:
    """Fill ``record.answers`` from its question's worked solution (``extra["solution"]``) and
    known answer (a question without either keeps None), and stamp the method in its provenance
    (part of the job's settings either way)."""
    record.provenance = {**record.provenance, "answers": RESOLVER_VERSION}
    question = record.question
    solution = question.extra_value("solution")
    if (solution is None and "$" not in question.question) or question.answer is None:
        return
    answers, why = answers_for(question.question, solution, question.answer, [*record.similars, *record.controls])
    k = len(record.similars)
    record.answers = {"similars": answers[:k], "controls": answers[k:], **({"unavailable": why} if why else {})}
