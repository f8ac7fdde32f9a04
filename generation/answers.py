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

The similar's answer is given only when everything checks (:func:`read_solution` names the first
rule that fails):

* the last step yielding the question's known answer is the answer step;
* a result the solution states but computes in no step read here (``half * 30 = 15``) is never
  read later as a constant;
* a quantity read more often than the question states it is no unit constant in disguise: where
  the question also names a unit whose constant is that value ("every 12 months" and ``/ 12``,
  "7 tacos" and a week), which reading is the constant cannot be told;
* in a solution written in LaTeX (MATH's), where numbers are mostly worked out in the reasoning, no
  quantity may be left unread, and no number may sit beside a quantity it is one or two away from,
  twice or half (``\\frac{7\\times6\\times5}{3\\times2}`` for choosing 3 of 7);
* a quantity the solution never reads is a distractor — it changes nothing — only when the
  solution reads none of its forms as a constant (``0.8`` for 20 %, the ``4`` of ``3/4``, ``0.75``
  for 75 cents, nor its sum, difference, product or ratio with another number of the problem: "3
  dogs and 4 cats, so 7 pets"), reads no constant but units and simple shares
  (:data:`PLAIN_CONSTANTS`: another may have been worked out from it where no step shows), and it
  is not 1 (``1 batch`` is read by multiplying by one);
* a step whose result is non-negative in the original stays so in the similar, and one whose
  result is whole stays whole — unless it is not the answer and reads a sum of money stated with
  cents (``$4.20``): 7.2 people or -3 muffins are not the same kind of problem.

Otherwise the similar's answer is unknown (None), never a guess. Pure functions; no model.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction
from typing import Any

from .cas_answers import read_question
from .numbers import Slot, find_slots
from .records import PerturbationSet
from .solution_binding import ORDINAL_CUES, UNIT_CUES, bind, cue_in, quantity_read, whole_steps
from .solution_program import CONSTANT, Reading, Step, WorkedSolution
from .solution_steps import read_steps

RESOLVER_VERSION = "worked-solution-v2"  # v2: written and annotated steps together, distractors, shares, reuse

MAX_ALTERNATIVES = 64  # ways of reading numbers that could be two quantities, tried before giving up

# Constants a solution may read beside a quantity it leaves unread: units and simple shares. Any
# other constant may be a number worked out where no step shows it, from that very quantity.
PLAIN_CONSTANTS = frozenset(
    {Fraction(n) for n in (*range(1, 13), *UNIT_CUES)} | {Fraction(1, d) for d in (2, 3, 4, 10, 100)} | {Fraction(3, 4)}
)


def read_solution(question: str, solution: Any, answer: Any) -> WorkedSolution | str:
    """The worked solution of ``question`` read as a program, or the reason it cannot be used."""
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
    constants = [o.value for s in steps for o in s.operands if o.readings == (CONSTANT,)]
    hidden = sorted((set(constants) | quantity_read(steps)) & set(written.hidden))
    if hidden:  # "12 inches = 1 foot", then "4 * 1": that 1 is the foot, not the stated "1 inch"
        return f"a result computed in a step not read here ({_show(hidden[0])})"
    strict = _mathematical(solution)
    derived = _worked_out_nearby(steps, quantities) if strict else None
    derived = derived or _worked_out_in_words(steps, quantities, question)
    if derived is not None:
        return f"a number worked out from a quantity where no step shows it ({derived})"
    over = _read_too_often(steps, slots, quantities, question)
    if over is not None:
        return f"a quantity read more often than the question states it ({over!r})"
    alternatives = _alternatives(steps)
    if alternatives is None:
        return f"more than {MAX_ALTERNATIVES} ways to read its numbers as the question's quantities"
    read = _read_quantities(steps, alternatives[0])
    known = {q.value for q in quantities} | {s.result for s in steps} | set(constants) | {Fraction(1), Fraction(2)}
    seen = {o.value for s in steps for o in s.operands} | {s.result for s in steps}
    for index, quantity in enumerate(quantities):
        if index not in read and not quantity.year and (strict or not _distractor(quantity, constants, known, seen)):
            return f"a quantity the worked solution never reads as it is stated ({quantity.text!r})"
    return WorkedSolution(
        slots,
        keys,
        tuple(steps),
        answering[-1],
        whole_steps(steps, quantities, question, answering[-1]),
        tuple(s.result >= 0 for s in steps),
        tuple(alternatives),
        is_latex(answer),
    )


def _mathematical(solution: str) -> bool:
    """Whether a solution is written in LaTeX (MATH's): there a number the question never states is
    mostly worked out in the reasoning (``\\frac{7\\times6\\times5}{3\\times2}``: 6 and 5 come from
    7), so a quantity left unread is no distractor, and a number next to a quantity it is one or two
    away from, or twice or half, is taken for worked out from it (:func:`_worked_out_nearby`)."""
    return "\\" in solution  # \\frac, \\boxed, \\cdot: GSM8K's "$" is money


def _worked_out_in_words(steps: list[Step], quantities: list[Slot], question: str) -> str | None:
    """The first constant of the steps that nothing explains — it is no unit or multiplier the
    question names ("dozen": 12, "a week": 7, "twice": 2, a percentage's 100), no number the question
    states as structure ("the 3rd floor", "a 10-foot section") and not 0 or 1 — so it was worked out
    in words from the problem's numbers (``150 / 3`` after 2 and 1 hours; ``12.8 / 2`` after 2/5
    was left; ``4 * 7`` for the rest of the week): None where every constant is explained."""
    structure = {v for v in (_plain_number(m.group(0)) for m in _ANY_NUMBER.finditer(question)) if v is not None}
    structure -= {q.value for q in quantities}
    percent = any(q.percent for q in quantities) or "%" in question or "percent" in question.lower()
    for step in steps:
        for operand in step.operands:
            value = operand.value
            if operand.readings != (CONSTANT,) or value in (0, 1) or value in structure:
                continue
            explained = cue_in(question, value) or cue_in(question, value, ORDINAL_CUES) or _share_cue(question, value)
            if (percent and value in (100, Fraction(1, 100))) or explained:
                continue
            return _show(value)
    return None


_ANY_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SHARES = {Fraction(1, 2): ("half",), Fraction(1, 4): ("quarter",), Fraction(1, 3): ("third",), Fraction(2): ("half",)}


def _share_cue(question: str, value: Fraction) -> bool:
    """Whether the question names a share of that value ("half": 0.5, "a quarter": 0.25)."""
    words = question.lower()
    return any(re.search(rf"(?<![a-z]){cue}", words) for cue in _SHARES.get(value, ()))


def _plain_number(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _worked_out_nearby(steps: list[Step], quantities: list[Slot]) -> str | None:
    """The first number of a step, not itself a quantity's reading, that is a quantity of the same
    step plus or minus one or two, twice or half it (``7 × 6 × 5``), or None."""
    for step in steps:
        stated = {quantities[r.index].value for o in step.operands for r in o.readings if r.kind == "quantity"}
        for operand in step.operands:
            if any(r.kind == "quantity" for r in operand.readings) or operand.value == 0:
                continue
            near = {q + d for q in stated for d in (-2, -1, 1, 2)} | {2 * q for q in stated} | {q / 2 for q in stated}
            if operand.value in near:
                return _show(operand.value)
    return None


def _read_too_often(steps: list[Step], slots: tuple[Slot, ...], quantities: list[Slot], question: str) -> str | None:
    """The text of a quantity read more often than stated whose value is the constant of a unit the
    question names, or None."""
    counts: dict[int, int] = {}
    for step in steps:
        for operand in step.operands:
            if len(operand.readings) == 1 and operand.readings[0].kind == "quantity":
                index = operand.readings[0].index
                counts[index] = counts.get(index, 0) + 1
    for index, n in counts.items():
        quantity = quantities[index]
        stated = sum(s.key == quantity.key for s in slots)
        if n > stated and cue_in(question, quantity.value):
            return quantity.text
    return None


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
    if quantity.percent:
        forms |= {1 - value / 100, 1 + value / 100}
    if quantity.kind in ("fraction", "latex_fraction"):
        forms |= {Fraction(value.numerator), Fraction(value.denominator)}
    for other in known:  # "3 dogs and 4 cats, so 7 pets. 7 * 2 = 14": 7 is worked out in words
        forms |= {value + other, value - other, other - value, value * other}
        forms |= {value / other} if other else set()
        forms |= {other / value} if value else set()
    return not forms & (set(constants) | seen)


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


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


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
