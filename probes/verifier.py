"""A rule-based answer verifier, as RLVR pipelines reward their rollouts (reward gain, SPEC §5).

Each response is judged against the question's known answer by the first rule that applies, and
the rule is recorded:

* ``####`` — the response ends its work with ``#### n`` (GSM8K's convention): the text after the
  last ``####`` is compared with the answer, as numbers when both are numbers (digit-group commas
  dropped), else as normalised text;
* ``math-verify`` — for a mathematical answer (a number or LaTeX): Hugging Face's
  ``math-verify`` (the verifier RLVR pipelines use) parses the answer and the response
  (``\\boxed{}``, LaTeX, "the answer is …", plain numbers) and compares the values symbolically;
* ``exact`` — otherwise (a word, a choice letter): the response's last line, normalised, equals the
  answer, normalised.

``math-verify`` bounds its parsing time with ``signal.alarm``: call :func:`judge` from a process's
main thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
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
    if "####" in response:
        return Judgement(float(_same(response.rsplit("####", 1)[1], gold)), "####")
    gold_parsed = _parse(f"${gold}$") if _MATH.search(gold) else []
    if gold_parsed:
        from math_verify import verify

        return Judgement(float(bool(verify(gold_parsed, _parse(response)))), "math-verify")
    last = response.strip().splitlines()[-1] if response.strip() else ""
    return Judgement(float(_normal(last) == _normal(gold)), "exact")


def _parse(text: str) -> list[Any]:
    from math_verify import parse

    return parse(text)


def _same(found: str, gold: str) -> bool:
    """``#### n`` against the answer: numbers as numbers, anything else as normalised text."""
    number, expected = _NUMBER.search(found), _NUMBER.fullmatch(gold.strip().replace(" ", ""))
    if number and expected:
        try:
            return float(number.group().replace(",", "")) == float(expected.group().replace(",", ""))
        except ValueError:
            return False
    return _normal(found) == _normal(gold)


def _normal(text: str) -> str:
    return " ".join(text.strip().rstrip(".").casefold().split())


def _text(answer: Any) -> str:
    if isinstance(answer, float) and answer.is_integer():
        return str(int(answer))
    return str(answer).strip()
