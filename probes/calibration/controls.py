"""Matched controls (SPEC §8.1): each question's first C valid similar questions, and the table of
detector scores on them (``SCORES.controls.csv``: ``id``, ``control``, one column per detector).

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


def control_texts(sets: Sequence[Any], n_controls: int = DEFAULT_CONTROLS) -> dict[str, list[str]]:
    """``{question id: its first n_controls valid similars}`` from perturbation sets (a question
    with fewer keeps what it has; SPEC §8.1 leaves one with fewer than 2 out later)."""
    if n_controls < 1:
        raise InputError(f"the number of controls must be >= 1, got {n_controls}")
    return {s.question.id: [x for x in s.similars if x is not None][:n_controls] for s in sets}


@dataclass
class ControlTable:
    """Detector scores on the controls: one row per (question id, control index).

    Attributes:
        ids: ``[M]`` question ids (repeated once per control).
        index: ``[M]`` control index c = 1 … C within the question.
        columns: detector → ``[M]`` scores (higher = member).
    """

    ids: list[str]
    index: np.ndarray
    columns: dict[str, np.ndarray] = field(default_factory=dict)

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
        write_csv_atomically(path, ["id", "control", *names],
                             ([qid, int(self.index[k]), *(format_number(self.columns[n][k]) for n in names)]
                              for k, qid in enumerate(self.ids)))

    @classmethod
    def read_csv(cls, path: str | Path) -> "ControlTable":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"control score file not found: {path}")
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
        if not rows or rows[0][:2] != ["id", "control"]:
            raise InputError(f"{path}: expected a header 'id,control,<score>,...' (lara detect --sets writes one)")
        names = rows[0][2:]
        ids, index, values = [], [], [[] for _ in names]
        for lineno, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            if len(row) != len(names) + 2:
                raise InputError(f"{path}:{lineno}: {len(row)} fields, expected {len(names) + 2}")
            try:
                ids.append(row[0])
                index.append(int(row[1]))
                for j, text in enumerate(row[2:]):
                    values[j].append(float(text) if text.strip() else math.nan)
            except ValueError:
                raise InputError(f"{path}:{lineno}: not a number in {row}") from None
        return cls(ids, np.array(index, dtype=np.int64), {n: np.array(v, dtype=np.float64) for n, v in zip(names, values)})

