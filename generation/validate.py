"""Validators for every part of a perturbation set; both backends' output passes through them.

Each check is a pure function returning ``None`` (valid) or a :class:`Problem` with a reason
code from :mod:`generation.records` and a message that can be shown to an LLM on retry.
Texts are compared after folding case and white space.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from . import records as r
from .numbers import find_slots

MAX_KEY_INFORMATION_WORDS = 15


@dataclass(frozen=True)
class Problem:
    reason: str
    detail: str


def normalize(text: str) -> str:
    """Case- and white-space-folded text, for "is this a copy" comparisons."""
    return " ".join(text.split()).casefold()


def count_blanks(text: str) -> int:
    return text.count(r.BLANK)


def changed_fraction(original: Sequence[Fraction], candidate: Sequence[Fraction]) -> float:
    """Share of the original's quantities that the candidate changed.

    Aligned by order when both have the same number of quantities; otherwise the share of the
    original's values that the candidate does not repeat (multiset difference).
    """
    if not original:
        return 1.0
    if len(original) == len(candidate):
        return sum(a != b for a, b in zip(original, candidate)) / len(original)
    kept = sum((Counter(original) & Counter(candidate)).values())
    return 1.0 - kept / len(original)


def check_similar(original: str, candidate: str, accepted: Sequence[str], min_changed: float = 1.0) -> Problem | None:
    """A similar question: non-empty, no marker, not a copy or duplicate, numbers changed.

    Args:
        original: q0.
        candidate: the proposed similar question.
        accepted: similar questions already accepted for this q0.
        min_changed: share of q0's quantities that must change (SPEC: all of them).
    """
    if not candidate.strip():
        return Problem(r.EMPTY, "a similar question is empty")
    if r.BLANK in candidate:
        return Problem(r.BLANK_COUNT, f"a similar question must not contain {r.BLANK}")
    if normalize(candidate) == normalize(original):
        return Problem(r.COPY, "a similar question repeats the original problem word for word")
    if any(normalize(candidate) == normalize(other) for other in accepted):
        return Problem(r.DUPLICATE, "two similar questions are identical")
    before = [s.value for s in find_slots(original)]
    after = [s.value for s in find_slots(candidate)]
    if before and not after:
        return Problem(
            r.NUMBERS_UNCHANGED, "a similar question has no numerical values; every value must be changed, not removed"
        )
    share = changed_fraction(before, after)
    if share + 1e-12 < min_changed:
        kept = sorted({str(v) for v in (Counter(before) & Counter(after)).elements()})
        return Problem(
            r.NUMBERS_UNCHANGED,
            f"a similar question keeps the original values {', '.join(kept) or '(same values)'}; change every number",
        )
    return None


def check_key_information(description: str, original: str) -> Problem | None:
    """A short description of the information type to remove, without its value."""
    words = description.split()
    if not words:
        return Problem(r.EMPTY, "the description of the key information is empty")
    if len(words) > MAX_KEY_INFORMATION_WORDS:
        return Problem(
            r.TOO_LONG, f"describe the information type in at most {MAX_KEY_INFORMATION_WORDS} words, not {len(words)}"
        )
    if r.BLANK in description:
        return Problem(r.BLANK_COUNT, f"the description must not contain {r.BLANK}")
    values = {s.text for s in find_slots(original) if s.kind != "word"}
    leaked = [v for v in values if re.search(rf"(?<![\d.]){re.escape(v)}(?![\d])", description)]
    if leaked:
        return Problem(
            r.REVEALS_BLANK,
            f"the description must not state the value ({leaked[0]}); describe only the type of information",
        )
    return None


def removed_spans(source: str, blanked: str) -> list[str] | None:
    """The texts that the markers of ``blanked`` replaced in ``source``, or None if ``blanked`` is
    not ``source`` with some spans replaced by markers (white space folded)."""
    pieces = [" ".join(p.split()) for p in blanked.split(r.BLANK)]
    text = " ".join(source.split())
    first, last = pieces[0], pieces[-1]
    if not text.startswith(first) or not text.endswith(last) or len(first) + len(last) > len(text):
        return None
    removed: list[str] = []
    cursor = len(first)
    end_limit = len(text) - len(last)
    for piece in pieces[1:-1]:
        found = text.find(piece, cursor + 1, end_limit) if piece else cursor
        if found < 0:
            return None
        removed.append(text[cursor:found])
        cursor = found + len(piece)
    removed.append(text[cursor:end_limit])
    return [span.strip() for span in removed]


def check_blanked(source: str, blanked: str, k: int) -> Problem | None:
    """Exactly ``k`` markers; the rest of ``source`` unchanged; each marker replaced something."""
    n = count_blanks(blanked)
    if n != k:
        return Problem(r.BLANK_COUNT, f"expected exactly {k} {r.BLANK} marker(s), found {n}")
    spans = removed_spans(source, blanked)
    if spans is None:
        return Problem(
            r.CHANGED_OUTSIDE_BLANKS,
            f"only replace the key information with {r.BLANK}; keep every other word of the problem unchanged",
        )
    if any(not span for span in spans):
        return Problem(
            r.CHANGED_OUTSIDE_BLANKS, f"each {r.BLANK} must replace the removed information, not be inserted beside it"
        )
    if sum(len(span) for span in spans) > 0.5 * len(source):
        return Problem(r.CHANGED_OUTSIDE_BLANKS, "too much text was removed; blank only the key information")
    return None


def reveals(candidate: str, source: str, removed: Sequence[str]) -> str | None:
    """The first removed text that ``candidate`` states more often than ``source`` does."""
    for span in removed:
        if not span.strip():
            continue
        pattern = rf"(?<![\w.]){re.escape(span)}(?![\w]|\.\d)"
        if len(re.findall(pattern, candidate)) > len(re.findall(pattern, source)):
            return span
    return None


def check_paraphrase(
    source: str, candidate: str, k: int, accepted: Sequence[str], removed: Sequence[str] = ()
) -> Problem | None:
    """A paraphrase of a blanked variant: same marker count, not a copy or duplicate, no reveal.

    Args:
        source: the blanked variant q_i⁻.
        candidate: the proposed paraphrase.
        k: number of markers q_i⁻ holds.
        accepted: paraphrases already accepted for q_i⁻.
        removed: the texts the markers replaced (see :func:`removed_spans`).
    """
    if not candidate.strip():
        return Problem(r.EMPTY, "a paraphrase is empty")
    n = count_blanks(candidate)
    if n != k:
        return Problem(r.BLANK_COUNT, f"every paraphrase must keep exactly {k} {r.BLANK} marker(s), found {n}")
    if normalize(candidate) == normalize(source):
        return Problem(r.COPY, "a paraphrase repeats the problem word for word; reword it")
    if any(normalize(candidate) == normalize(other) for other in accepted):
        return Problem(r.DUPLICATE, "two paraphrases are identical")
    leaked = reveals(candidate, source, removed)
    if leaked is not None:
        return Problem(
            r.REVEALS_BLANK, f"a paraphrase reveals the blanked value ({leaked}); keep it hidden behind {r.BLANK}"
        )
    return None


def check_set(record: r.PerturbationSet, k: int, min_changed: float = 1.0) -> list[str]:
    """Re-validate every present part of a record; returns the problems found (empty = valid)."""
    problems: list[str] = []
    original = record.question.question
    members: list[str | None] = [original, *record.similars]
    for i, similar in enumerate(record.similars, start=1):
        if similar is not None:
            others = [s for j, s in enumerate(record.similars, start=1) if s is not None and j < i]
            problem = check_similar(original, similar, others, min_changed)
            if problem:
                problems.append(f"similars[{i}]: {problem.reason}: {problem.detail}")
    if record.key_information is not None:
        problem = check_key_information(record.key_information, original)
        if problem:
            problems.append(f"key_information: {problem.reason}: {problem.detail}")
    for i, (member, blanked) in enumerate(zip(members, record.blanked)):
        if blanked is None:
            continue
        if member is None:
            problems.append(f"blanked[{i}]: present although member {i} is missing")
            continue
        problem = check_blanked(member, blanked, k)
        if problem:
            problems.append(f"blanked[{i}]: {problem.reason}: {problem.detail}")
            continue
        removed = removed_spans(member, blanked) or []
        accepted: list[str] = []
        for j, paraphrase in enumerate(record.paraphrases[i]):
            if paraphrase is None:
                continue
            problem = check_paraphrase(blanked, paraphrase, k, accepted, removed)
            if problem:
                problems.append(f"paraphrases[{i}][{j}]: {problem.reason}: {problem.detail}")
            accepted.append(paraphrase)
    return problems
