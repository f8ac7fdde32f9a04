"""Which texts of a perturbation set feed which LaRA array, and which members are usable.

A member i (0 = the original, 1…K = the similars) is usable when its question q_i, its blanked
variant q_i⁻ and at least ``min_paraphrases`` of its paraphrases exist (generation records a
failure for every missing part). R_i averages over the paraphrases that exist.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from generation.errors import InputError as GenerationInputError
from generation.records import PerturbationSet, jsonl_lines

from ..errors import InputError

logger = logging.getLogger(__name__)

# Reasons a question gets NaN metrics (stable strings, counted in summaries).
ORIGINAL_UNUSABLE = "original_unusable"
TOO_FEW_SIMILARS = "too_few_similars"


@dataclass(frozen=True)
class SetLayout:
    """The texts of one set in LaRA's array order.

    Attributes:
        id: question id.
        u: K+1 texts q_0…q_K (None where missing).
        w: K+1 blanked variants (None where missing).
        phi: K+1 lists of M paraphrases (None where missing).
        member_ok: K+1 flags, the members used.
        paraphrase_ok: K+1 lists of M flags.
        reason: why the question cannot be scored ('' when it can).
    """

    id: str
    u: tuple[str | None, ...]
    w: tuple[str | None, ...]
    phi: tuple[tuple[str | None, ...], ...]
    member_ok: tuple[bool, ...]
    paraphrase_ok: tuple[tuple[bool, ...], ...]
    reason: str

    @property
    def k(self) -> int:
        return len(self.u) - 1

    @property
    def m(self) -> int:
        return max((len(row) for row in self.phi), default=0)

    def texts(self) -> list[str]:
        """Every text the metrics read (usable members only), in array order."""
        out: list[str] = []
        for i, ok in enumerate(self.member_ok):
            if ok:
                out += [self.u[i], self.w[i]]  # type: ignore[list-item]
                out += [p for p, p_ok in zip(self.phi[i], self.paraphrase_ok[i]) if p_ok]  # type: ignore[misc]
        return out


def layout(record: PerturbationSet, min_paraphrases: int = 2) -> SetLayout:
    """The :class:`SetLayout` of a perturbation set."""
    u = (record.question.question, *record.similars)
    w = tuple(record.blanked)
    phi = tuple(tuple(row) for row in record.paraphrases)
    if not (len(u) == len(w) == len(phi)):
        raise InputError(
            f"set {record.question.id!r}: {len(u) - 1} similars but {len(w)} blanked variants and {len(phi)} paraphrase "
            "lists (expected 1+K of each); regenerate it with `lara generate`"
        )
    paraphrase_ok = tuple(tuple(p is not None for p in row) for row in phi)
    member_ok = tuple(
        u[i] is not None and w[i] is not None and sum(paraphrase_ok[i]) >= max(1, min(min_paraphrases, len(phi[i])))
        for i in range(len(u))
    )
    n_sim = sum(member_ok[1:])
    if not member_ok[0]:
        reason = f"{ORIGINAL_UNUSABLE}: the original's blanked variant or paraphrases are missing"
    elif n_sim < 2:
        reason = f"{TOO_FEW_SIMILARS}: {n_sim} usable similar question(s) of {len(u) - 1}; at least 2 are needed"
    else:
        reason = ""
    return SetLayout(record.question.id, u, w, phi, member_ok, paraphrase_ok, reason)


def all_texts(record: PerturbationSet) -> list[str]:
    """Every text of a set (original, similars, blanked variants, paraphrases), missing parts skipped."""
    texts = [record.question.question, *record.similars, *record.blanked]
    texts += [p for row in record.paraphrases for p in row]
    return [t for t in texts if t is not None]


def distinct_texts(records: Sequence[PerturbationSet]) -> list[str]:
    """Every text of every set, each once, in first-seen order (what an activation store must hold)."""
    return list(dict.fromkeys(t for record in records for t in all_texts(record)))


def looks_like_sets(path: str | Path) -> bool:
    """True when the first record of a JSONL file is a perturbation set."""
    try:
        for _, line in jsonl_lines(path):
            data = json.loads(line)
            return isinstance(data, dict) and {"similars", "blanked", "paraphrases"} <= set(data)
    except (OSError, GenerationInputError, json.JSONDecodeError):
        return False
    return False
