"""``lara questions pair``: members, non-members and (optionally) clean-reference questions into one
labelled questions file — exact and near duplicates across and within the sets removed and
listed, a balance table, and the blind baseline of SPEC §8.8 with its confound warning."""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from generation.records import Question

from ..scores import CLEAN_SPLIT
from .canonical import canonical
from .canonical import numbers as quantities

SETS = ("members", "non_members", "clean_ref")  # in priority order: a duplicate is dropped from the later set
_NUMBER = re.compile(r"(?<![A-Za-z_])-?\d+(?:[.,]\d+)?")


def normalise(text: str) -> str:
    """Text compared for duplicates: NFKC, lower case, runs of whitespace as one space, trimmed."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).lower()).strip()


@dataclass
class Duplicate:
    dropped: str
    dropped_set: str
    kept: str
    kept_set: str
    similarity: float  # rapidfuzz ratio / 100 of the canonical texts (1.0 = the same once canonical)

    def describe(self) -> str:
        kind = "exact" if self.similarity >= 1.0 else f"near, {self.similarity:.2f}"
        return f"{self.dropped_set} {self.dropped} duplicates {self.kept_set} {self.kept} ({kind})"


@dataclass
class Paired:
    questions: list[Question]
    duplicates: list[Duplicate]
    renamed: dict[str, str] = field(
        default_factory=dict
    )  # new id -> the input id it replaces (ids clashing across sets)


def pair_sets(sets: dict[str, Sequence[Question]], near: float = 0.9) -> Paired:
    """One labelled list (members 1, non-members 0, clean_ref: label None, split ``clean_ref``) with
    duplicates removed: a question is dropped when a question kept before it (sets in :data:`SETS`
    order, then file order) has the same quantities in the same order and a canonical text
    (:func:`~probes.questions.canonical.canonical`: numbering, source tags, number formats and
    LaTeX spellings unified) equal to it or at rapidfuzz ratio ≥ ``near``. Quantities must match
    because a question with other numbers is another problem — exactly what the generator's
    similar questions are."""

    kept: list[tuple[str, Question]] = []
    by_numbers: dict[tuple[str, ...], list[tuple[int, str]]] = {}
    duplicates: list[Duplicate] = []
    for name in SETS:
        for q in sets.get(name, ()):
            text = canonical(q.question)
            numbers = quantities(text)
            match = _best_match(text, by_numbers.get(numbers, []), near)
            if match is not None:
                index, similarity = match
                duplicates.append(Duplicate(q.id, name, kept[index][1].id, kept[index][0], similarity))
                continue
            by_numbers.setdefault(numbers, []).append((len(kept), text))
            kept.append((name, q))
    return _relabel(kept, duplicates)


def _best_match(text: str, pool: list[tuple[int, str]], near: float) -> tuple[int, float] | None:
    """``(index, similarity)`` of the most similar earlier text at ratio ≥ ``near``, or None."""
    if not pool:
        return None
    from rapidfuzz import fuzz, process

    found = process.extractOne(text, [t for _, t in pool], scorer=fuzz.ratio, score_cutoff=near * 100)
    if found is None:
        return None
    _, score, position = found
    return pool[position][0], score / 100.0


def _relabel(kept: list[tuple[str, Question]], duplicates: list[Duplicate]) -> Paired:
    seen: set[str] = set()
    renamed: dict[str, str] = {}
    out: list[Question] = []
    for name, q in kept:
        qid = q.id
        if qid in seen:
            qid = f"{name}/{q.id}"
            renamed[qid] = q.id
        seen.add(qid)
        label = {"members": 1, "non_members": 0}.get(name)
        split = CLEAN_SPLIT if name == "clean_ref" else q.split
        out.append(replace(q, id=qid, label=label, split=split))
    return Paired(out, duplicates, renamed)


def balance_table(sets: dict[str, Sequence[Question]]) -> list[dict[str, Any]]:
    """Per set: questions, median and mean length (characters), quantities per question, LaTeX share, top sources."""
    rows = []
    for name in SETS:
        qs = list(sets.get(name, ()))
        if not qs:
            continue
        lengths = [len(q.question) for q in qs]
        numbers = [len(_NUMBER.findall(q.question)) for q in qs]
        latex = sum(("$" in q.question) or ("\\" in q.question) for q in qs) / len(qs)
        sources = Counter(q.source or "–" for q in qs).most_common(3)
        rows.append(
            {
                "set": name,
                "n": len(qs),
                "length_median": statistics.median(lengths),
                "length_mean": float(np.mean(lengths)),
                "quantities_mean": float(np.mean(numbers)),
                "latex_share": latex,
                "sources": ", ".join(f"{s} ({n})" for s, n in sources),
            }
        )
    return rows


def format_balance(rows: list[dict[str, Any]]) -> str:
    head = f"  {'set':<12} {'n':>6} {'length med/mean':>16} {'quantities':>11} {'LaTeX':>6}  sources"
    body = [
        f"  {r['set']:<12} {r['n']:>6} {r['length_median']:>7.0f} / {r['length_mean']:<6.0f} {r['quantities_mean']:>11.2f} "
        f"{r['latex_share']:>6.0%}  {r['sources']}"
        for r in rows
    ]
    return "\n".join([head, *body])
