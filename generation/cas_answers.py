"""Answers of similar questions re-solved by a computer algebra system (sympy), from the question.

Where a question is one computation — "Compute $\\dbinom{31}{28}$.", "Simplify $\\sqrt{242}$.",
"Evaluate $99^2+99+1$." — or one equation in one unknown — "Solve for $x$: $\\frac{x}2 + \\frac{x}3
= 5$" — its mathematics is read into sympy with each of the question's quantities as a symbol, once
per question; the original's value must equal its known answer (else the reading is not trusted),
and a similar question's answer is the same expression with the similar's quantities, written in
LaTeX (``11 \\sqrt{2}``, ``\\frac{14}{3}``). An equation must have exactly one real solution.
What is read: numbers, ``+ - \\cdot \\times \\div``, ``\\frac``, powers, ``\\sqrt`` (and ``\\sqrt[n]``),
``\\binom``, ``!``, ``\\lceil \\rceil``, ``\\lfloor \\rfloor``, ``\\pi``; anything else (a function, a
second unknown, a sum with ``\\dots``) leaves the question to the worked solution or unanswered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .numbers import Slot, find_slots, math_spans

_ASK = re.compile(r"^\s*(?:compute|evaluate|simplify|calculate|find|what\s+is)\b", re.IGNORECASE)
_SOLVE = re.compile(r"\bsolve\b|\bvalue\s+of\s+\$?[a-z]\$?|\bfind\s+\$?[a-z]\$?\b", re.IGNORECASE)
_COMMANDS = (
    (r"\\left|\\right|\\displaystyle|\\,|\\!|\\;", ""),
    (r"\\cdot|\\times", "*"),
    (r"\\div", "/"),
    (r"\\pi\b", " pi "),
    (r"\\lceil", " ceiling("),
    (r"\\rceil", ")"),
    (r"\\lfloor", " floor("),
    (r"\\rfloor", ")"),
)
_UNKNOWN = re.compile(r"(?<![A-Za-z\\])([a-z])(?![A-Za-z])")


@dataclass(frozen=True)
class CasSolution:
    """A question's mathematics as a sympy expression of its quantities (``symbols[i]`` stands for
    the question's ``i``-th distinct quantity), or an equation to solve for ``unknown``."""

    slots: tuple[Slot, ...]
    keys: tuple[tuple, ...]
    expression: Any
    symbols: tuple[Any, ...]
    unknown: Any = None

    def answer_for(self, variant: str) -> str | None:
        """The variant's answer in LaTeX, or None (another structure, no single real solution)."""
        import sympy

        found = find_slots(variant)
        if len(found) != len(self.slots) or any(a.kind != b.kind for a, b in zip(found, self.slots)):
            return None
        values: dict[tuple, Any] = {}
        for old, new in zip(self.slots, found):
            if values.setdefault(old.key, new.value) != new.value:
                return None
        bound = {s: sympy.Rational(values[k].numerator, values[k].denominator) for s, k in zip(self.symbols, self.keys)}
        if any(abs(v) > 10**6 for v in bound.values()):
            return None
        value = _value(self.expression.subs(bound), self.unknown)
        return None if value is None else sympy.latex(value)


def read_question(question: str, answer: Any) -> CasSolution | str:
    """The question read for sympy (see the module docstring), or why it cannot be."""
    if not math_spans(question):
        return "no mathematics to compute"
    slots = tuple(find_slots(question))
    keys = tuple(dict.fromkeys(s.key for s in slots))
    text = _with_symbols(question, slots, keys)
    spans = [_inside_delimiters(text[a:b]) for a, b in math_spans(text)]
    if _ASK.match(question) and len(spans) == 1 and "=" not in spans[0]:
        expression, unknown = _sympy(spans[0]), None
    elif _SOLVE.search(question) and sum("=" in s for s in spans) == 1:
        equation = next(s for s in spans if "=" in s)
        names = sorted(set(_UNKNOWN.findall(equation)))
        if len(names) != 1:
            return "an equation in more or fewer than one unknown"
        left, _, right = equation.partition("=")
        expression, unknown = _sympy(f"({left})-({right})"), names[0]
    else:
        return "not one computation or one equation"
    if expression is None:
        return "mathematics sympy does not read here"
    if not _small(expression):
        return "numbers too large to compute with"
    import sympy

    symbols = tuple(sympy.Symbol(f"Q{i}") for i in range(len(keys)))
    unknown_symbol = sympy.Symbol(unknown) if unknown else None
    known = _sympy(str(answer).strip("$")) if answer is not None else None
    original = {s: sympy.Rational(k[1].numerator, k[1].denominator) for s, k in zip(symbols, keys)}
    value = _value(expression.subs(original), unknown_symbol)
    if known is None or value is None or not _equal(value, known):  # (simplify only here: once a question)
        return "the computation read does not give the known answer"
    return CasSolution(slots, keys, expression, symbols, unknown_symbol)


def _inside_delimiters(span: str) -> str:
    """A math span without its ``$``, ``$$``, ``\\[ \\]`` or ``\\( \\)``."""
    for left, right in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if span.startswith(left) and span.endswith(right) and len(span) >= len(left) + len(right):
            return span[len(left) : len(span) - len(right)]
    return span


def _with_symbols(question: str, slots: tuple[Slot, ...], keys: tuple[tuple, ...]) -> str:
    """``question`` with each quantity written ``(Qi)`` (``i``: its distinct quantity's index)."""
    out, last = [], 0
    for slot in slots:
        out.append(question[last : slot.start])
        out.append(f"(Q{keys.index(slot.key)})")
        last = slot.end
    out.append(question[last:])
    return "".join(out)


def _sympy(latex: str) -> Any:
    """A sympy expression of LaTeX ``latex`` (quantities as ``(Qi)``), or None."""
    import sympy
    from sympy.parsing.sympy_parser import (
        convert_xor,
        factorial_notation,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    text = latex.strip().rstrip(".,;")
    for pattern, replacement in _COMMANDS:
        text = re.sub(pattern, replacement, text)
    for _ in range(4):  # innermost first
        text = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"((\1)/(\2))", text)
        text = re.sub(r"\\[dt]?frac\s*(\w)\s*(\w)", r"((\1)/(\2))", text)
        text = re.sub(r"\\[dt]?binom\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"binomial(\1,\2)", text)
        text = re.sub(r"\\sqrt\s*\[([^\]]*)\]\s*\{([^{}]*)\}", r"root(\2,\1)", text)
        text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", text)
        text = re.sub(r"\\sqrt\s*(\w)", r"sqrt(\1)", text)
        text = re.sub(r"\^\s*\{([^{}]*)\}", r"^(\1)", text)
    if "\\" in text or re.search(r"[{}]|\.\.\.", text):
        return None
    transformations = standard_transformations + (implicit_multiplication_application, convert_xor, factorial_notation)
    allowed: dict[str, Any] = {f"Q{i}": sympy.Symbol(f"Q{i}") for i in range(64)}
    allowed |= {"binomial": sympy.binomial, "sqrt": sympy.sqrt, "root": sympy.root, "pi": sympy.pi}
    allowed |= {"ceiling": sympy.ceiling, "floor": sympy.floor}
    try:
        return parse_expr(text, local_dict=allowed, transformations=transformations, evaluate=True)
    except Exception:  # noqa: BLE001 - any text sympy cannot parse is simply not read
        return None


def _value(expression: Any, unknown: Any) -> Any:
    """``expression``'s exact value (as sympy evaluates it on numbers), or the one real solution of
    ``expression = 0`` for ``unknown`` (a polynomial of degree one or two); None where there is none,
    or where the numbers are too large to compute with quickly (``\\binom{735235}{2356}``)."""
    import sympy

    try:
        if not _small(expression):
            return None
        if unknown is None:
            value = expression.doit()
            return value if value.is_number and value.is_finite and value.is_real is not False else None
        poly = sympy.Poly(expression, unknown)
        if poly.degree() not in (1, 2) or poly.free_symbols - {unknown}:
            return None
        roots = [r for r in sympy.roots(poly, multiple=True) if r.is_real]
        return roots[0] if len(set(roots)) == 1 else None
    except Exception:  # noqa: BLE001 - sympy refusing a computation leaves it unanswered
        return None


def _small(expression: Any) -> bool:
    """Whether every number of ``expression`` is below a million and every exponent, binomial and
    factorial argument below a thousand (so that computing it takes milliseconds)."""
    import sympy

    for node in sympy.preorder_traversal(expression):
        if node.is_Number and abs(node) > 10**6:
            return False
        if isinstance(node, (sympy.Pow, sympy.binomial, sympy.factorial)):
            if any(a.is_Number and abs(a) > 1000 for a in node.args[1 if isinstance(node, sympy.Pow) else 0 :]):
                return False
    return True


def _equal(value: Any, known: Any) -> bool:
    import sympy

    try:
        return bool(sympy.simplify(value - known) == 0)
    except Exception:  # noqa: BLE001
        return False
