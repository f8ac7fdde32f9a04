"""A rule-based answer verifier, as RLVR pipelines reward their rollouts (reward gain, SPEC §5).

Each response is judged against the question's known answer by the first rule that applies, and
the rule is recorded:

* ``####`` — a line of the response reads ``#### <answer>`` (GSM8K's convention, not a Markdown
  heading: the text after it must be a single value): the last such value is compared with the
  answer — by ``math-verify`` for a mathematical answer (so ``#### \\frac{3}{4}`` equals 0.75),
  as normalised text otherwise;
* ``math-verify`` — for a mathematical answer (a number or LaTeX): Hugging Face's
  ``math-verify`` (the verifier RLVR pipelines use) parses the answer and the response
  (``\\boxed{}``, LaTeX, "the answer is …", plain numbers) and compares the values symbolically;
* ``exact`` — otherwise (a word, a choice letter): the response's last line, or what follows its
  last "answer is", normalised, equals the answer, normalised.

``math-verify`` bounds its parsing time with ``signal.alarm``: call :func:`judge` from a process's
main thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_HASHES = re.compile(r"^\s*####\s*(\S+?)\.?\s*$", re.MULTILINE)  # "#### 42" on a line of its own, one value
_ANSWER_IS = re.compile(r"answer is:?\s*(.+?)\s*\.?\s*$", re.IGNORECASE)
_MATH = re.compile(r"\d|\\|\$|[\^=+*/]")  # an answer math-verify should read: a digit, LaTeX, an operator
RULES = ("####", "math-verify", "exact")


@dataclass(frozen=True)
class Judgement:
    """A response's reward (1 correct, 0 not) and the rule that decided it."""

    reward: float
    rule: str


def judge(response: str, answer: Any) -> Judgement:
    """The reward of ``response`` for a question whose answer is ``answer``."""
    gold = _text(answer)
    mathematical = bool(_MATH.search(gold))
    marked = _HASHES.findall(response)
    if marked:
        return Judgement(float(_same(marked[-1], gold, mathematical)), "####")
    if mathematical:
        return Judgement(float(_verify(gold, response)), "math-verify")
    return Judgement(float(_same(response, gold, False)), "exact")


def _verify(gold: str, response: str) -> bool:
    from math_verify import verify

    expected = _parse(f"${gold}$")
    return bool(expected) and bool(verify(expected, _parse(response)))


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    return parse(text)


def _same(found: str, gold: str, mathematical: bool) -> bool:
    """A final answer against the known one: as values for a mathematical answer (digit-group
    commas dropped), else as normalised text — the last line, or what follows "answer is"."""
    if mathematical:
        plain = _NUMBER.fullmatch(found.strip().replace(",", ""))
        if plain and _NUMBER.fullmatch(gold.strip().replace(",", "")):
            return float(plain.group()) == float(gold.strip().replace(",", ""))
        return _verify(gold, found)
    last = found.strip().splitlines()[-1] if found.strip() else ""
    stated = _ANSWER_IS.findall(last)
    return _normal(stated[-1] if stated else last) == _normal(gold)


def _normal(text: str) -> str:
    return " ".join(text.strip().rstrip(".").casefold().split())


def _text(answer: Any) -> str:
    if isinstance(answer, float) and answer.is_integer():
        return str(int(answer))
    return str(answer).strip()
