"""A worked solution from a benchmark's equation column (SVAMP's ``( ( 8.0 * 7.0 ) + 2.0 )``).

The offline generator re-solves a matched control's answer by re-running its question's worked
solution with the control's values (:mod:`generation.answers`); it reads GSM8K's form, one
calculator-annotated step a line (``8 * 7 = <<8*7=56>>56``). A benchmark that gives an equation
instead gets that form here: one step per operation, innermost first, every number as the
question states it (``8.0`` is ``8``). An equation that does not compute, uses anything but
``+ - * /`` and numbers, has a step whose value is no terminating decimal of at most
:data:`MAX_DECIMALS` places, or whose value is not the benchmark's answer, gives no worked solution
and says why (never a guessed one).
"""

from __future__ import annotations

import ast
from decimal import Decimal
from fractions import Fraction
from typing import Any

MAX_DECIMALS = 6
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class _NoSolution(Exception):
    """Why an equation gives no worked solution."""


def worked_solution(equation: str, answer: Any) -> tuple[str | None, str | None]:
    """``(solution, None)``, or ``(None, reason)`` when the equation gives none.

    >>> worked_solution("( ( 8.0 * 7.0 ) + 2.0 )", 58.0)
    ('8 * 7 = <<8*7=56>>56\\n56 + 2 = <<56+2=58>>58', None)
    """
    try:
        tree = ast.parse(equation.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None, "the equation does not parse"
    steps: list[str] = []
    try:
        value = _evaluate(tree, steps)
    except _NoSolution as why:
        return None, str(why)
    if not steps:
        return None, "the equation has no operation"
    try:
        expected = Fraction(str(answer))
    except (ValueError, TypeError):
        return None, f"the answer {answer!r} is not a number"
    if value != expected:
        return None, f"the equation does not give the answer: {_text(value)}, not {answer}"
    return "\n".join(steps), None


def _evaluate(node: ast.AST, steps: list[str]) -> Fraction:
    """The exact value of ``node``; each operation's step appended to ``steps``, innermost first."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, steps)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left, steps), _evaluate(node.right, steps)
        op = _OPS[type(node.op)]
        if op == "/" and right == 0:
            raise _NoSolution("a step divides by zero")
        value = {"+": left + right, "-": left - right, "*": left * right, "/": left / right if right else 0}[op]
        a, b, c = _text(left), _text(right), _text(value)
        steps.append(f"{a} {op} {b} = <<{a}{op}{b}={c}>>{c}")
        return value
    raise _NoSolution(f"the equation holds more than numbers and + - * /: {ast.unparse(node)!r}")


def _text(value: Fraction) -> str:
    """``value`` as a plain decimal (``56``, ``2.5``, ``-3``).

    Raises:
        _NoSolution: it has no terminating decimal of at most :data:`MAX_DECIMALS` places.
    """
    scaled = value * 10**MAX_DECIMALS
    if scaled.denominator != 1:
        raise _NoSolution(f"a step's value is no decimal of at most {MAX_DECIMALS} places: {value}")
    text = format(Decimal(scaled.numerator).scaleb(-MAX_DECIMALS), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
