"""Answers of similar questions, re-solved from the original's worked solution.

A detector that reads answers (reward gain: how much more often the audited model is right than
the reference) can be calibrated against a question's matched controls only if the controls have
answers too. A similar question differs from its original only in its quantities
(:mod:`generation.numbers`), so where the original carries a worked solution whose arithmetic can
be read — ``6 * 2 = 12. 12 + 16 = 28.``, ``120 students - 62 girls = 58 boys``, GSM8K's
``<<6*2=12>>`` — the same steps computed with the similar's quantities give the similar's answer.

Each step ``expression = result`` is parsed; each number in it is read as one of the question's
quantities (same value), an earlier step's result, or a constant (``/ 60`` minutes). An answer is
given only when everything checks:

* every step's expression evaluates (exactly, in fractions) to the result it states, and the last
  step that yields the question's known answer is the answer step;
* every quantity the similar changes is read by some step (a solution that uses "20 %" as
  ``0.2``, or skips a step, would otherwise keep the old value silently);
* a number that could be two things (a quantity and an earlier result, or two quantities) takes the
  same new value either way;
* a quantity is read no more often than the question states it (a second reading of 12 in "every 12 months … 12 ÷ 12" or of 7 in
  "7 tacos … 18 * 7" may be a constant that happens to equal it);
* where every result of the original's steps is whole and non-negative, so is every result of the
  similar's.

Otherwise the similar's answer is unknown (None), never a guess. Pure functions; no model.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .numbers import Slot, find_slots
from .records import PerturbationSet

RESOLVER_VERSION = "worked-solution-v1"

_NUM = r"\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_WORDS = r"(?:[ \t]+(?!x\b)[A-Za-z][A-Za-z'-]*){0,2}"  # units after a number: "120 students - 62 girls"
_TERM = rf"\(*[ \t]*{_NUM}%?{_WORDS}[ \t]*\)*"
_OP = r"[ \t]*(?:[-+*/]|x(?=[ \t]))[ \t]*"
_EQUATION = re.compile(rf"(?<![\w.,$])({_TERM}(?:{_OP}{_TERM})+)[ \t]*=[ \t]*({_NUM})")
_STATED = re.compile(r"=[ \t]*\$?\d")  # a number stated as the result of something
_ANNOTATION = re.compile(r"<<([^<>=]+)=([^<>=]+)>>")  # GSM8K's calculator annotations
_TOKEN = re.compile(rf"({_NUM})|([-+*/()])|([A-Za-z][A-Za-z'-]*)")  # a word is a unit, skipped; "x" alone: times
_SYMBOLS = {"×": "*", "÷": "/", "−": "-", "\\times": "*", "\\div": "/", "\\cdot": "*", "·": "*"}


@dataclass(frozen=True)
class Operand:
    """A number of a step: the question's quantities (slot indices) and earlier steps' results
    (step indices) it may be, or neither (a constant)."""

    value: Fraction
    slots: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class Step:
    """``tokens``: operator and parenthesis strings, and ints indexing ``operands``."""

    tokens: tuple[str | int, ...]
    operands: tuple[Operand, ...]
    result: Fraction


@dataclass(frozen=True)
class WorkedSolution:
    """The steps of a question's solution, read against its quantities (``slots``)."""

    slots: tuple[Slot, ...]
    steps: tuple[Step, ...]
    answer_step: int
    whole: bool  # every result of the original's steps is a whole, non-negative number

    def answer_for(self, variant: str) -> int | float | None:
        """The answer of ``variant`` (the original with other quantities), or None when it cannot
        be told (another slot structure, an ambiguous number, a division by zero, an answer less
        whole than the original's)."""
        found = find_slots(variant)
        if len(found) != len(self.slots) or any(a.kind != b.kind for a, b in zip(found, self.slots)):
            return None
        new = [s.value for s in found]
        results: list[Fraction] = []
        for step in self.steps:
            values = [_new_value(o, new, results) for o in step.operands]
            if any(v is None for v in values):
                return None
            value = _evaluate(step.tokens, values)  # type: ignore[arg-type]
            if value is None or (self.whole and (value.denominator != 1 or value < 0)):
                return None  # 17.5 cards where the original counted whole ones: not the same kind of problem
            results.append(value)
        return _as_answer(results[self.answer_step])


def _new_value(operand: Operand, new: list[Fraction], results: list[Fraction]) -> Fraction | None:
    """What ``operand`` becomes with the variant's quantities ``new`` and the results so far;
    None when its readings disagree."""
    if not operand.slots and not operand.steps:
        return operand.value
    readings = {new[i] for i in operand.slots} | {results[i] for i in operand.steps}
    return readings.pop() if len(readings) == 1 else None


def read_solution(question: str, solution: Any, answer: Any) -> WorkedSolution | str:
    """The worked solution of ``question`` read step by step, or the reason it cannot be used."""
    target = _number(answer)
    if target is None:
        return "the known answer is not a number"
    if not isinstance(solution, str) or not solution.strip():
        return "no worked solution"
    slots = tuple(find_slots(question))
    if not slots:
        return "the question states no quantity"
    text = solution
    for symbol, op in _SYMBOLS.items():
        text = text.replace(symbol, op)
    pairs = [(m.group(1), m.group(2)) for m in _ANNOTATION.finditer(text)]
    if not pairs:
        found = list(_EQUATION.finditer(text))
        read = [m.span() for m in found]
        unread = [m.start() for m in _STATED.finditer(text) if not any(a <= m.start() < b for a, b in read)]
        if unread:  # a result computed in a way not read here: a later step would take it for a constant
            line = text[max(0, text.rfind("\n", 0, unread[0]) + 1) : unread[0] + 12].strip()
            return f"a result computed in a step not read here ({line!r})"
        pairs = [(m.group(1), m.group(2)) for m in found]
    steps: list[Step] = []
    for expression, stated in pairs:
        step = _read_step(expression, stated, slots, steps)
        if isinstance(step, str):
            return step
        steps.append(step)
    answering = [i for i, s in enumerate(steps) if s.result == target]
    if not answering:
        return f"no step of the worked solution yields the answer ({answer})"
    used = {i for s in steps for o in s.operands for i in o.slots}
    unused = [s.text for i, s in enumerate(slots) if i not in used and not s.year]
    if unused:
        return f"a quantity the worked solution never reads as it is stated ({unused[0]!r})"
    return WorkedSolution(
        slots, tuple(steps), answering[-1], all(s.result.denominator == 1 and s.result >= 0 for s in steps)
    )


def _read_step(expression: str, stated: str, slots: tuple[Slot, ...], earlier: list[Step]) -> Step | str:
    result = _number(stated)
    tokens: list[str | int] = []
    operands: list[Operand] = []
    for m in _TOKEN.finditer(expression):
        if m.group(1):
            value = _number(m.group(1))
            assert value is not None
            operands.append(
                Operand(
                    value,
                    tuple(i for i, s in enumerate(slots) if s.value == value),
                    tuple(i for i, s in enumerate(earlier) if s.result == value),
                )
            )
            tokens.append(len(operands) - 1)
        elif m.group(2):
            tokens.append(m.group(2))
        elif m.group(3) == "x":
            tokens.append("*")
    if result is None or not operands:
        return f"a step that cannot be read ({expression.strip()} = {stated.strip()})"
    if _evaluate(tokens, [o.value for o in operands]) != result:
        return f"a step that does not compute ({expression.strip()} = {stated.strip()})"
    # a number that may also be an earlier result is checked per similar instead (its readings must agree)
    readings = Counter(slots[o.slots[0]].key for o in operands if o.slots and not o.steps)
    readings.update(slots[o.slots[0]].key for step in earlier for o in step.operands if o.slots and not o.steps)
    times_stated = Counter(s.key for s in slots)
    over = [key for key, n in readings.items() if n > times_stated[key]]
    if over:
        # "12 ÷ 12 = 1" for "every 12 months", "18 * 7 = 126" (days) after "7 + 8 + 3 = 18" (tacos): read more often than
        # the question states it, one reading is a constant that happens to equal the quantity, and which cannot be told
        return f"a quantity read more often than the question states it ({next(s.text for s in slots if s.key == over[0])!r})"
    return Step(tuple(tokens), tuple(operands), result)


def _number(value: Any) -> Fraction | None:
    """A known answer or a number in a solution as an exact fraction (``$1,200.50`` reads 1200.5)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = str(value).strip().replace(",", "").lstrip("$").rstrip("%").strip()
    try:
        return Fraction(text)
    except ValueError:
        return None


def _evaluate(tokens: tuple[str | int, ...] | list[str | int], values: list[Fraction]) -> Fraction | None:
    """Value of the token expression (ints index ``values``), with the usual precedence; None on
    a malformed expression or a division by zero."""
    position = 0

    def peek() -> str | int | None:
        return tokens[position] if position < len(tokens) else None

    def atom() -> Fraction:
        nonlocal position
        token = peek()
        position += 1
        if isinstance(token, int):
            return values[token]
        if token == "(":
            value = expression()
            if peek() != ")":
                raise ValueError("unbalanced")
            position += 1
            return value
        if token == "-":
            return -atom()
        raise ValueError(f"unexpected {token!r}")

    def chain(operators: dict[str, Any], operand: Any) -> Fraction:
        """``operand (op operand)*`` for the ``operators`` of one precedence level, left to right."""
        nonlocal position
        value = operand()
        while peek() in operators:
            op = operators[peek()]  # type: ignore[index]
            position += 1
            value = op(value, operand())
        return value

    def product() -> Fraction:
        return chain({"*": operator.mul, "/": operator.truediv}, atom)

    def expression() -> Fraction:
        return chain({"+": operator.add, "-": operator.sub}, product)

    try:
        value = expression()
    except (ValueError, ZeroDivisionError):
        return None
    return value if position == len(tokens) else None


def _as_answer(value: Fraction) -> int | float | None:
    """An int when whole, a float when a short decimal, else None."""
    if value.denominator == 1:
        return int(value)
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return float(value) if denominator == 1 else None


def answers_for(question: str, solution: Any, answer: Any, variants: list[str | None]) -> tuple[list[Any], str | None]:
    """Each variant's answer (None where it cannot be told, or the variant is None), and the reason
    when the solution itself cannot be used (then every answer is None)."""
    worked = read_solution(question, solution, answer)
    if isinstance(worked, str):
        return [None] * len(variants), worked
    return [None if v is None else worked.answer_for(v) for v in variants], None


def attach_answers(record: PerturbationSet) -> None:
    """Fill ``record.answers`` from its question's worked solution (``extra["solution"]``) and
    known answer (a question without either keeps None), and stamp the method in its provenance
    (part of the job's settings either way)."""
    record.provenance = {**record.provenance, "answers": RESOLVER_VERSION}
    question = record.question
    solution = question.extra_value("solution")
    if solution is None or question.answer is None:
        return
    answers, why = answers_for(question.question, solution, question.answer, [*record.similars, *record.controls])
    k = len(record.similars)
    record.answers = {"similars": answers[:k], "controls": answers[k:], **({"unavailable": why} if why else {})}
