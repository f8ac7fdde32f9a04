"""Matched controls (SPEC §8.1): each question's first C valid similar questions, and the table of
detector scores on them (``SCORES.controls.csv``: ``id``, ``control``, ``text_sha256`` — the
sha256 of the control's text, so two tables can be checked to score the same texts — and one
column per detector).

The similars of a perturbation set are freshly generated, so the audited model cannot have
trained on them, and they share the question's structure: they are its never-trained-on controls.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import InputError
from ..scores import format_number, write_csv_atomically

DEFAULT_CONTROLS = 3
HASH_COLUMN = "text_sha256"


def control_texts(sets: Sequence[Any], n_controls: int = DEFAULT_CONTROLS) -> dict[str, list[str]]:
    """``{question id: its first n_controls valid similars}`` from perturbation sets — the K
    similars, then the further ones drawn only as controls (a question with fewer keeps what it
    has; SPEC §8.1 leaves one with fewer than 2 out later)."""
    if n_controls < 1:
        raise InputError(f"the number of controls must be >= 1, got {n_controls}")
    return {s.question.id: [text for text, _ in _controls_of(s)][:n_controls] for s in sets}


def control_answers(sets: Sequence[Any], n_controls: int = DEFAULT_CONTROLS) -> dict[str, list[Any]]:
    """``{question id: the answers of its controls}``, aligned with :func:`control_texts` (None
    where the generator could not re-solve one, or the set has no answers)."""
    return {s.question.id: [answer for _, answer in _controls_of(s)][:n_controls] for s in sets}


def _controls_of(s: Any) -> list[tuple[str, Any]]:
    """A set's valid similars then further controls, each with its re-solved answer (or None)."""
    answers = getattr(s, "answers", None) or {}
    texts = [*s.similars, *getattr(s, "controls", [])]
    given = [*(answers.get("similars") or [None] * len(s.similars)), *(answers.get("controls") or [])]
    given += [None] * (len(texts) - len(given))
    return [(text, answer) for text, answer in zip(texts, given) if text is not None]


@dataclass
class ControlTable:
    """Detector scores on the controls: one row per (question id, control index).

    Attributes:
        ids: ``[M]`` question ids (repeated once per control).
        index: ``[M]`` control index c = 1 … C within the question.
        columns: detector → ``[M]`` scores (higher = member).
        text_hash: ``[M]`` sha256 of each control's text (None: unknown, e.g. a table built in code).
    """

    ids: list[str]
    index: np.ndarray
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    text_hash: list[str] | None = None

    def hashes(self) -> dict[tuple[str, int], str] | None:
        """``{(question id, control index): text sha256}``, or None when unknown."""
        if self.text_hash is None:
            return None
        return {(qid, int(c)): h for qid, c, h in zip(self.ids, self.index, self.text_hash)}

    def matrix(self, name: str, ids: Sequence[str], width: int | None = None) -> np.ndarray:
        """``[len(ids), C]`` scores of column ``name`` on each question's controls, NaN where absent."""
        if name not in self.columns:
            raise InputError(f"no control score column {name!r}; columns: {', '.join(self.columns)}")
        width = width or (int(self.index.max()) if len(self.index) else 0)
        row = {qid: i for i, qid in enumerate(ids)}
        out = np.full((len(ids), max(width, 1)), np.nan)
        values = self.columns[name]
        for qid, c, v in zip(self.ids, self.index, values):
            if qid in row and 1 <= c <= width:
                out[row[qid], c - 1] = v
        return out

    def write_csv(self, path: str | Path) -> None:
        """Write atomically; numbers in Python's shortest round-tripping form."""
        names = list(self.columns)
        hashes = self.text_hash if self.text_hash is not None else [""] * len(self.ids)
        write_csv_atomically(
            path,
            ["id", "control", HASH_COLUMN, *names],
            (
                [qid, int(self.index[k]), hashes[k], *(format_number(self.columns[n][k]) for n in names)]
                for k, qid in enumerate(self.ids)
            ),
        )

    @classmethod
    def read_csv(cls, path: str | Path) -> "ControlTable":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"control score file not found: {path}")
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
        if not rows or rows[0][:2] != ["id", "control"]:
            raise InputError(
                f"{path}: expected a header 'id,control,text_sha256,<score>,...' (lara detect --sets writes one)"
            )
        hashed = rows[0][2:3] == [HASH_COLUMN]
        first = 3 if hashed else 2
        names = rows[0][first:]
        ids, index, hashes, values = [], [], [], [[] for _ in names]
        for lineno, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            if len(row) != len(names) + first:
                raise InputError(f"{path}:{lineno}: {len(row)} fields, expected {len(names) + first}")
            try:
                ids.append(row[0])
                index.append(int(row[1]))
                hashes.append(row[2] if hashed else "")
                for j, text in enumerate(row[first:]):
                    values[j].append(float(text) if text.strip() else math.nan)
            except ValueError:
                raise InputError(f"{path}:{lineno}: not a number in {row}") from None
        known = hashed and all(hashes)
        return cls(
            ids,
            np.array(index, dtype=np.int64),
            {n: np.array(v, dtype=np.float64) for n, v in zip(names, values)},
            hashes if known else None,
        )
