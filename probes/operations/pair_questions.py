"""Pairing questions as one operation (``lara questions pair``): members, non-members and a clean
reference pool in, one labelled questions file out — duplicates removed across the sets, the
balance of each set, the blind text-only baseline, and the provenance beside the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from generation.records import read_questions

from ..errors import InputError
from ..questions.pairing import balance_table, pair_sets
from ..questions.question_files import read_provenance, write_question_file
from ..questions.reading import match_group
from ..verdicts.blind import blind_baseline


@dataclass(frozen=True)
class PairSettings:
    """How the sets are paired.

    Attributes:
        near: the rapidfuzz ratio (0–1] at or above which two questions are near duplicates.
        seed: the blind baseline's folds and bootstrap.
    """

    near: float = 0.9
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.near <= 1:
            raise InputError(f"--near {self.near}: give a ratio in (0, 1], e.g. 0.9 (near, of PairSettings)")


@dataclass
class PairOutcome:
    """What :func:`pair_questions` did: the questions ``read``, ``paired`` (the questions kept, the
    duplicates removed, the ids renamed: ``questions.pairing.pair_sets``), the ``balance`` table of
    each set, the ``blind`` baseline's record, and the files ``written`` (the questions, their meta)."""

    read: int
    paired: Any
    balance: dict[str, Any]
    blind: dict[str, Any]
    written: list[Path]


def pair_questions(inputs: Mapping[str, Path | None], output: Path, settings: PairSettings) -> PairOutcome:
    """Read ``inputs`` (``members``, ``non_members`` and optionally ``clean_ref``: questions files),
    pair them and write the labelled file ``output`` with its provenance (``OUTPUT.meta.json``)."""
    sets = {name: read_questions(path) for name, path in inputs.items() if path is not None}
    paired = pair_sets(sets, near=settings.near)
    balance = balance_table({name: [q for q in paired.questions if _set_of(q) == name] for name in sets})
    labelled = [q for q in paired.questions if q.label is not None]
    blind = blind_baseline(
        [q.question for q in labelled],
        np.array([q.label for q in labelled]),
        seed=settings.seed,
        groups=[match_group(q.extra) for q in labelled],
    )
    record = {
        "pairing": {
            "inputs": {k: str(v) for k, v in inputs.items() if v is not None},
            "near": settings.near,
            "duplicates": [vars(d) for d in paired.duplicates],
            "renamed_ids": paired.renamed,
            "balance": balance,
            "blind_baseline": {k: blind.get(k) for k in ("auc", "null", "confounded", "warning", "error")},
        },
        "provenance": [p for path in inputs.values() if path is not None for p in (read_provenance(path) or [])],
    }
    written = write_question_file(paired.questions, output, record)
    return PairOutcome(sum(len(v) for v in sets.values()), paired, balance, blind, list(written))


def _set_of(q: Any) -> str:
    return "members" if q.label == 1 else "non_members" if q.label == 0 else "clean_ref"
