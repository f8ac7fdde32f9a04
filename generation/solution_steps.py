"""The computations a worked solution writes down, read as steps ``expression = result``.

Two ways of writing a step are read, in the order they appear:

* **calculator annotations**, GSM8K's ``16 - 3 - 4 = <<16-3-4=9>>9``: the annotation is the step
  and the prose before it (a copy) is skipped;
* **written equations**, ``120 clams / 5 clams a minute = 24 minutes``, ``0.8*100 = 80``: the
  text before ``=`` back to the start of its clause (a line, a sentence, a colon or semicolon,
  an earlier ``=``) is tokenised — numbers, ``+ - * / x × ÷ −`` and parentheses; words are units
  and skipped, and so is an operator next to a word (``clam/minute``) — and the longest tail of
  those tokens that computes the stated result is the step (``so that leaves 100-80 = 20``
  reads ``100-80``).

A number stated after ``=`` that no step computes ("136 + T = 219", "half * 30 = 15") is a
*hidden result*: a later step reading it would take a derived quantity for a constant, so
:mod:`generation.answers` refuses a solution that does. ``%`` after a number is read both ways
(a unit, ``100% = 70%`` of a share; or ``/100``, ``36 x 50% = 18``): whichever computes.
Pure functions; exact arithmetic in fractions.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

NUMBER_TEXT = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_NUMBER = re.compile(rf"(?<![\w.]){NUMBER_TEXT}(?![\d])")
_ANNOTATION = re.compile(r"<<([^<>]*?)=([^<>=]*)>>")
_STATED = re.compile(rf"=[ \t]*\$?[ \t]*(-?)[ \t]*\$?({NUMBER_TEXT}(?:/\d+(?![\d.]))?)(%?)")
_BOUNDARY = re.compile(r"[\n:;=]|[.!?](?=\s)|<<|>>|\$")
_TOKEN = re.compile(rf"({NUMBER_TEXT})(%?)|([-+*/()^])|([A-Za-z][A-Za-z'’-]*)|(\S)")
_SYMBOLS = (
    ("\\times", "*"),
    ("\\cdot", "*"),
    ("\\div", "/"),
    ("\\left(", "("),
    ("\\right)", ")"),
    ("\\left[", "("),
    ("\\right]", ")"),
    ("\\!", ""),
    ("\\,", ""),
    ("×", "*"),
    ("·", "*"),
    ("÷", "/"),
    ("−", "-"),
    ("–", "-"),
)

_WORDS = (
    (r"times", "*"),
    (r"multiplied by", "*"),
    (r"divided by", "/"),
    (r"plus", "+"),
    (r"minus", "-"),
    (r"(?:equals|is equal to)", "="),
)

_COEFFICIENT = re.compile(rf"{NUMBER_TEXT}[A-Za-z](?![A-Za-z])")
_MATH_SEGMENT = re.compile(
    r"\$\$(.+?)\$\$|\$(.+?)\$|\\\[(.+?)\\\]|\\begin\{align\*?\}(.+?)\\end\{align\*?\}", re.DOTALL
)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_PLAIN_PARENS = re.compile(rf"\(({NUMBER_TEXT})\)(?=/)|(?<=/)\(({NUMBER_TEXT})\)")
_POWER_BRACES = re.compile(r"\^\{(-?\d+)\}")

Token = tuple[str, Any]  # ("num", (value, text, percent)) | ("op", "+") | ("(", None) | (")", None)


@dataclass(frozen=True)
class Number:
    """A number written in a step: its value as written (``50`` in ``50%``), its text, and
    whether ``%`` follows it."""

    value: Fraction
    text: str
    percent: bool = False


@dataclass(frozen=True)
class WrittenStep:
    """``tokens``: operator and parenthesis strings, and ints indexing ``numbers``; ``percent``:
    ``%`` evaluates as ``/100``."""

    tokens: tuple[str | int, ...]
    numbers: tuple[Number, ...]
    result: Fraction
    percent: bool = False
    written: str = ""
    line: str = ""  # the line of the solution it stands on ("twice" there says a 2 is a constant)


@dataclass(frozen=True)
class ReadSolution:
    """The steps of a solution in order, and the results it states but computes in no read step."""

    steps: tuple[WrittenStep, ...]
    hidden: tuple[Fraction, ...]
    mentioned: tuple[Fraction, ...]  # every number the text shows outside the read steps
    hidden_from: tuple[tuple[Fraction, tuple[Fraction, ...]], ...] = ()  # each hidden result, and the
    # numbers of the expression it is stated after ("15 x 0.666 = 10.0": 15 and 0.666)


def normalise(text: str) -> str:
    """``text`` with the usual operator symbols and words written as ``* / - + = ^`` (LaTeX too:
    ``\\frac{a}{b}`` is ``(a/b)``, ``2(3)`` and ``(1)(2)`` are products, ``\\boxed{x}`` is ``x``)."""
    for symbol, op in _SYMBOLS:
        text = text.replace(symbol, op)
    text = _BOXED.sub(r"\1", text)
    for _ in range(3):  # nested fractions, innermost first
        text = _LATEX_FRACTION.sub(r"((\1)/(\2))", text)
    text = _PLAIN_PARENS.sub(lambda m: m.group(1) or m.group(2), text)  # "((1)/(2))" -> "(1/2)"
    text = _POWER_BRACES.sub(r"^\1", text)
    text = re.sub(r"(?<=[\d)])[ \t]*(?=\()", "*", text)  # "2(3)", "(1)(2)": products
    text = re.sub(r"(?<=\))[ \t]*(?=\d)", "*", text)
    for words, op in _WORDS:
        text = re.sub(rf"(?<=[\d\s]){words}(?=\s*\$?[\d.(<])", op, text)  # "2 times 5 equals 10"
    return re.sub(r"(?<=\d)[ \t]*[xX][ \t]*(?=[\d.(])", " * ", text)  # "5 x 5", "3x4": times


def read_steps(solution: str) -> ReadSolution:
    """Every step of ``solution`` (annotated or written), and its hidden results."""
    text = normalise(solution)
    steps: list[tuple[int, WrittenStep]] = []
    used: list[tuple[int, int]] = []
    hidden: list[Fraction] = []
    hidden_from: list[tuple[Fraction, tuple[Fraction, ...]]] = []
    for m in _ANNOTATION.finditer(text):
        copy = re.search(r"=[ \t]*\$?[ \t]*$", text[: m.start()])  # "9 * 2 = $<<9*2=18>>": the prose is its copy
        start = _clause_start(text, copy.start()) if copy else m.start()
        step = _step(m.group(1), m.group(2), allow_junk=False)
        if step is None and copy:  # "3 + 2 = <<5=5>>5": an annotation that only restates; its prose computes
            step = _step(text[start : copy.start()], m.group(2), allow_junk=True)
        if step is not None:
            steps.append((m.start(), step))
        elif _number(m.group(2).strip().lstrip("$").rstrip("%")) is not None:  # an annotation that does not compute
            hidden.append(_number(m.group(2).strip().lstrip("$").rstrip("%")))  # type: ignore[arg-type]
            hidden_from.append((hidden[-1], _numbers_in(m.group(1) + " " + text[start : m.start()])))
        used.append((start, m.end()))
    for position, step, span in _math_chains(text, used):
        steps.append((position, step))
        used.append(span)
    for m in _STATED.finditer(text):
        if _inside(m.start(), used) or re.match(r"[ \t]*\$?[ \t]*<<", text[m.start() + 1 :]):
            continue  # inside an annotation, or "= <<…>>" / "= $<<…>>": the annotation is the step
        stated = ("-" if m.group(1) else "") + m.group(2) + m.group(3)
        start = _clause_start(text, m.start())
        step = _step(text[start : m.start()], stated, allow_junk=True)
        if step is None:
            value = _number(m.group(2))
            if value is not None:
                hidden.append(-value if m.group(1) else value)
                hidden_from.append((hidden[-1], _numbers_in(text[start : m.start()])))
            continue
        steps.append((m.start(), step))
        used.append((start, m.end()))
    steps.sort(key=lambda pair: pair[0])
    steps = [(at, dataclasses.replace(step, line=_line_at(text, at))) for at, step in steps]
    mentioned = [
        _number(m.group(0)) for m in _NUMBER.finditer(text) if not _inside(m.start(), used) and _number(m.group(0))
    ]
    return ReadSolution(
        tuple(s for _, s in steps), tuple(hidden), tuple(v for v in mentioned if v is not None), tuple(hidden_from)
    )


def _numbers_in(text: str) -> tuple[Fraction, ...]:
    """The numbers written in ``text``, and its fractions ``a/b`` as one number too."""
    found = [v for v in (_number(m.group(0)) for m in _NUMBER.finditer(text)) if v is not None]
    for m in _FRACTION_TEXT.finditer(text):
        if int(m.group(2)):
            found.append(Fraction(int(m.group(1)), int(m.group(2))))
    return tuple(found)


_FRACTION_TEXT = re.compile(r"(?<![\d.])(?=(\d+)\s*/\s*(\d+)(?![\d.]))")  # overlapping: 15/2/5 has 15/2 and 2/5


def _math_chains(text: str, used: Sequence[tuple[int, int]]) -> list[tuple[int, WrittenStep, tuple[int, int]]]:
    """The steps of LaTeX chains ``a = b = c`` (in ``$…$``, ``\\[…\\]`` or an ``align``): the first
    link that is a computation over numbers alone and whose value is the chain's last one (later
    links only simplify it), where every link that is a number expression agrees; with the
    chain's span."""
    out: list[tuple[int, WrittenStep, tuple[int, int]]] = []
    for m in _MATH_SEGMENT.finditer(text):
        if _inside(m.start(), used):
            continue
        body = next(g for g in m.groups() if g is not None).replace("&", "")
        for line in re.split(r"\\\\(?!\s*=)|\n(?!\s*=)", body):  # "\\ &= …" goes on with the chain
            links = [link.strip() for link in re.split(r"=", line.replace("\\\\", " "))]
            if len(links) < 2:
                continue
            parsed = [_link(link) for link in links]
            values = [p for p in parsed if p is not None]
            if not values or len({v for v, _ in values}) != 1:
                continue
            value = values[-1][0]
            first = next((p[1] for p in parsed if p is not None and p[1] is not None), None)
            if first is not None:
                out.append((m.start(), WrittenStep(first[0], first[1], value, False, line.strip()), m.span()))
    return out


def _link(link: str) -> tuple[Fraction, tuple[tuple[str | int, ...], tuple[Number, ...]] | None] | None:
    """A chain link's value and, when it computes (an operator over numbers), its tokens; None for
    a link with letters (a variable, a function) or that does not evaluate."""
    bare = re.sub(r"\\(?:text|mathrm|textbf)\{[^{}]*\}|\\[ ,;!]|\\q?quad", " ", link).rstrip(" .,")
    if re.search(r"[A-Za-z{}\\]", bare) or not re.search(r"\d", bare):
        return None  # a variable, a function, \\sqrt or \\pi: not a number expression read here
    tokens, numbers = _tokens(bare)
    if tokens is None or not numbers:
        return None
    value = evaluate(tokens, [n.value for n in numbers])
    if value is None:
        return None
    computes = any(t in ("+", "-", "*", "/", "^") for t in tokens) and len(numbers) > 1
    return value, ((tokens, tuple(numbers)) if computes else None)


def _line_at(text: str, position: int) -> str:
    """The line of ``text`` holding ``position``."""
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start : end if end >= 0 else len(text)]


def _inside(position: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(a <= position < b for a, b in spans)


def _clause_start(text: str, equals: int) -> int:
    """Where the clause ending at the ``=`` at ``equals`` starts."""
    start = 0
    for m in _BOUNDARY.finditer(text, 0, equals):
        start = m.end()
    return start


def _step(expression: str, stated: str, allow_junk: bool) -> WrittenStep | None:
    """The step ``expression = stated``, or None when it does not compute. With ``allow_junk``
    (prose), the longest tail of the expression's tokens that computes the result is taken."""
    stated = stated.strip().lstrip("$").strip()
    percent_result = stated.endswith("%")
    result = _number(stated.rstrip("%").strip().lstrip("$"))
    if result is None:
        return None
    tokens, numbers = _tokens(expression)
    if tokens is None or not numbers:
        return None
    starts = [i for i, t in enumerate(tokens) if isinstance(t, int) or t in ("(", "-")] if allow_junk else [0]
    for start in starts:
        tail = tokens[start:]
        used = sorted({t for t in tail if isinstance(t, int)})
        if not any(t in ("+", "-", "*", "/", "^") for t in tail):
            continue  # "receives 18=18 emails": a number restated, no computation
        renumber = {old: new for new, old in enumerate(used)}
        tail = tuple(renumber[t] if isinstance(t, int) else t for t in tail)
        kept = tuple(numbers[i] for i in used)
        for percent in (False, True) if any(n.percent for n in kept) else (False,):
            value = evaluate(tail, [_value(n, percent) for n in kept])
            if value is not None and (value == result or (percent and percent_result and value == result / 100)):
                return WrittenStep(tail, kept, result, percent, expression.strip())
    return None


def _value(number: Number, percent: bool) -> Fraction:
    return number.value / 100 if percent and number.percent else number.value


def _tokens(expression: str) -> tuple[tuple[str | int, ...] | None, list[Number]]:
    """Numbers, operators and parentheses of ``expression`` (words and other marks dropped, and an
    operator next to a word: ``clam/minute`` is a unit)."""
    if "\\" in expression:  # a LaTeX command (\\sqrt, \\pi, \\log …) changes the value: not read here
        return None, []
    if _COEFFICIENT.search(expression):  # "12A + 8A": an unknown's coefficients, algebra — not arithmetic
        return None, []
    raw: list[tuple[str, Any]] = []
    for m in _TOKEN.finditer(expression):
        if m.group(1):
            raw.append(("num", Number(_number(m.group(1)) or Fraction(0), m.group(1), bool(m.group(2)))))
        elif m.group(3):
            raw.append(("op", m.group(3)))
        elif m.group(4):
            raw.append(("word", m.group(4)))
    tokens: list[str | int] = []
    numbers: list[Number] = []
    for i, (kind, value) in enumerate(raw):
        if kind == "word":
            continue
        if kind == "num":
            numbers.append(value)
            tokens.append(len(numbers) - 1)
            continue
        after = raw[i + 1][0] if i + 1 < len(raw) else None
        if value in "*/+-^" and after in ("word", None):  # "clam/minute", "per day -": a unit, not an operation
            continue
        tokens.append(value)
    return tuple(tokens), numbers


def _number(text: str) -> Fraction | None:
    text = text.replace(",", "").strip()
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def evaluate(tokens: Sequence[str | int], values: Sequence[Fraction]) -> Fraction | None:
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
            value = values[token]
            if peek() == "(" or isinstance(peek(), int):
                raise ValueError("juxtaposed")
            return value
        if token == "(":
            value = expression()
            if peek() != ")":
                raise ValueError("unbalanced")
            position += 1
            if peek() == "(" or isinstance(peek(), int):  # "(a+b)(c)" or "(a) b": implicit products are not read
                raise ValueError("juxtaposed")
            return value
        if token == "-":
            return -atom()
        raise ValueError(f"unexpected {token!r}")

    def chain(operators: dict[str, Any], operand: Any) -> Fraction:
        nonlocal position
        value = operand()
        while peek() in operators:
            op = operators[peek()]  # type: ignore[index]
            position += 1
            value = op(value, operand())
        return value

    def power() -> Fraction:
        nonlocal position
        base = atom()
        if peek() != "^":
            return base
        position += 1
        exponent = power()  # right-associative
        if exponent.denominator != 1 or abs(exponent) > 64 or (base == 0 and exponent < 0):
            raise ValueError("a power that is no exact number")
        return base ** int(exponent)

    def product() -> Fraction:
        return chain({"*": operator.mul, "/": operator.truediv}, power)

    def expression() -> Fraction:
        return chain({"+": operator.add, "-": operator.sub}, product)

    try:
        value = expression()
    except (ValueError, ZeroDivisionError):
        return None
    return value if position == len(tokens) else None
