"""The text two questions are compared by when looking for duplicates across members and
non-members: the same problem copied from two sources differs in ways that carry no meaning —
a "Problem 5." or "12." numbering, a "(2024 AIME I)" source tag, "1,000" for "1000", ``\\dfrac12``
for ``\\frac{1}{2}``, ``$…$`` or ``\\(…\\)`` delimiters, spacing around operators. :func:`canonical`
removes those; the numbers of the problem itself stay, so a templated problem with other numbers
is still another problem.
"""

from __future__ import annotations

import re
import unicodedata

# "Problem 5.", "Question 12:", "Exercise 3)", "#4.", "5.", "(5)", "5)" at the very start — a
# numbering always ends in punctuation ("Exercise 30 minutes a day" is a question, not a number)
_NUMBERING = re.compile(
    r"^\s*(?:(?:problem|question|exercise|example|task)\s*#?\s*\d+[a-z]?\s*[.):]|#?\d+[a-z]?\s*[.):]|\(\d+[a-z]?\))\s+"
)
# a bracketed source tag at the start or the end, which always names a contest or a source:
# "(2024 AIME I)", "[AMC 12B 2021, Problem 7]", "(Source: HMMT)"; "(mod 2023)" or "[1, 2000]" is maths
_CONTESTS = r"aime|amc|imo|usamo|usajmo|hmmt|putnam|olympiad|mathcounts|aops|isl|bmo|cmo|jbmo|apmo|source"
_TAG = rf"[(\[](?=[^()\[\]]{{0,60}}[)\]])(?=[^()\[\]]*\b(?:{_CONTESTS})\b)[^()\[\]]*[)\]]"
_LEADING_TAG = re.compile(rf"^\s*{_TAG}\s*")
_TRAILING_TAG = re.compile(rf"\s*{_TAG}\s*$")
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?:,\d{3})+)(?![\d])")
_FRAC_BARE = re.compile(r"\\frac\s*(\d|\{[^{}]*\})\s*(\d|\{[^{}]*\})")
_SINGLE_BRACE = re.compile(r"([\^_])\{([A-Za-z0-9]+)\}")
_SPACE_AROUND = re.compile(r"\s*([^\w\s])\s*")
NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:\.\d+)?")


def canonical(text: str) -> str:
    """``text`` as duplicates are compared: NFKC, lower case, numbering and source tags removed,
    digit-group commas dropped, LaTeX spellings unified, delimiters and spacing removed."""
    t = unicodedata.normalize("NFKC", text).lower().strip()
    for _ in range(2):  # "Problem 3. (AIME 2024) ..." carries both
        t = _NUMBERING.sub("", t)
        t = _LEADING_TAG.sub("", t)
    t = _TRAILING_TAG.sub("", t)
    t = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), t)
    t = _latex(t)
    t = re.sub(r"\s+", " ", t).strip()
    return _SPACE_AROUND.sub(r"\1", t)


def _latex(t: str) -> str:
    t = re.sub(r"\\[dt]frac", r"\\frac", t)
    t = _FRAC_BARE.sub(lambda m: r"\frac{" + m.group(1).strip("{}") + "}{" + m.group(2).strip("{}") + "}", t)
    t = _SINGLE_BRACE.sub(r"\1\2", t)
    t = re.sub(r"\\left\s*|\\right\s*", "", t)
    t = re.sub(r"\\[,;!: ]|\\quad|\\qquad", " ", t)
    t = re.sub(r"\\[()\[\]]|\$\$?", " ", t)
    return t.replace(r"\cdot", r"\times")


def numbers(text: str) -> tuple[str, ...]:
    """The quantities of a canonical text, in order (two questions with other quantities are other problems)."""
    return tuple(NUMBER.findall(text))
