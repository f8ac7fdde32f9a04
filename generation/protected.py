"""Numbers a similar question must keep: they state the problem's form, not its quantities.

A similar question changes every quantity (:mod:`generation.numbers`), but some numbers of a real
benchmark's problem are no quantity of it, and changing them makes another problem:

* **the answer's form**: every number of a sentence that says how to give the answer — "Enter
  your answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$", "Express
  your answer to 2 decimal places", "in base $8$", "as a common fraction";
* **ranges and constraints**: a number on either side of a comparison (``<``, ``\\le``, ``≥``,
  ``\\neq`` …): "for $0 \\le x \\le 40$", "where $x > 7$" — the problem's domain;
* **figures**: every number of an Asymptote drawing (``[asy] … [/asy]``), whose coordinates draw
  the figure the text describes.

:func:`protected_spans` gives their character spans; :func:`generation.numbers.find_slots` reads
no quantity inside one. Pure functions.
"""

from __future__ import annotations

import re

_FIGURE = re.compile(r"\[asy\].*?\[/asy\]", re.DOTALL | re.IGNORECASE)
_FORM_CUE = re.compile(
    r"\b(?:(?:enter|express|give|write|round|leave|put|state)\s+(?:your|the|each|all)\b[^.?!\n]{0,20}?\banswers?"
    r"|your\s+answers?\b|in\s+the\s+form\b|to\s+the\s+nearest\b|decimal\s+places?\b|significant\s+(?:figures|digits)\b"
    r"|in\s+base\b|as\s+a\s+(?:common|mixed|improper)\s+fraction\b|in\s+simplest\b|separated\s+by\s+commas\b)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.?!](?=\s|$|\$)|\n")
_COMPARISON = r"(?:<|>|≤|≥|≠|\\le(?:q|qslant)?|\\ge(?:q|qslant)?|\\lt|\\gt|\\ne(?:q)?)(?![a-zA-Z])"
_OPERAND = r"-?\s*\d[\d,]*(?:\.\d+)?"
_AFTER = re.compile(rf"{_COMPARISON}\s*({_OPERAND})")
_BEFORE = re.compile(rf"({_OPERAND})\s*{_COMPARISON}")


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of ``text`` whose numbers state the problem's form (see the module
    docstring), in order; they may overlap."""
    spans = [m.span() for m in _FIGURE.finditer(text)]
    for m in _FORM_CUE.finditer(text):
        spans.append(_sentence(text, m.start(), m.end()))
    for pattern in (_AFTER, _BEFORE):
        spans += [m.span(1) for m in pattern.finditer(text)]
    return sorted(spans)


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around ``text[start:end]``: back to the previous sentence end, on to the next."""
    begin = 0
    for m in _SENTENCE_END.finditer(text, 0, start):
        begin = m.end()
    after = _SENTENCE_END.search(text, end)
    return begin, after.end() if after else len(text)
