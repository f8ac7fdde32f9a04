"""Score tables (SCORES.csv), the currency between detectors, fusion and evaluation, and the
labels aligned to them.

SCORES.csv: a header ``id,<score>,<score>…`` and one row per question; every score column is
oriented higher = more likely a member; non-finite scores are written ``nan``/``inf``. Numbers
are written in Python's shortest round-tripping form, so a table survives a round trip bit for
bit.

Labels come from any JSONL file whose objects carry ``id`` and ``label`` (1 member, 0
non-member, null unknown): the questions file or the perturbation-set file, read by
:mod:`probes.questions.reading` with the questions' other fields.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from lara_core.files import atomic_path

from .errors import InputError


@dataclass
class ScoreTable:
    """Scores of N questions under several detectors.

    Attributes:
        ids: ``[N]`` question ids (unique).
        columns: detector name → ``[N]`` float64 scores (higher = member).
    """

    ids: list[str]
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(set(self.ids)) != len(self.ids):
            dup = next(i for i in self.ids if self.ids.count(i) > 1)
            raise InputError(f"duplicate question id {dup!r} in a score table")
        for name, values in self.columns.items():
            if len(values) != len(self.ids):
                raise InputError(f"score column {name!r} has {len(values)} values for {len(self.ids)} ids")

    def add(self, name: str, values: np.ndarray) -> None:
        if "," in name or name == "id" or not name:
            raise InputError(f"invalid score column name {name!r} (no commas, not 'id')")
        values = np.asarray(values, dtype=np.float64)
        if len(values) != len(self.ids):
            raise InputError(f"score column {name!r} has {len(values)} values for {len(self.ids)} ids")
        self.columns[name] = values

    def write_csv(self, path: str | Path) -> None:
        """Write atomically (temporary file, then rename)."""
        names = list(self.columns)
        write_csv_atomically(
            path,
            ["id", *names],
            ([qid, *(format_number(self.columns[n][i]) for n in names)] for i, qid in enumerate(self.ids)),
        )

    @classmethod
    def read_csv(cls, path: str | Path) -> "ScoreTable":
        path = Path(path)
        rows = read_csv_rows(path, "score file")
        if not rows or not rows[0] or rows[0][0] != "id":
            raise InputError(f"{path}: expected a header row starting with 'id' (id,<score>,...)")
        names = rows[0][1:]
        if not names:
            raise InputError(f"{path}: no score columns after 'id'")
        ids: list[str] = []
        values = [[] for _ in names]
        for lineno, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            if len(row) != len(names) + 1:
                raise InputError(f"{path}:{lineno}: {len(row)} fields, expected {len(names) + 1}")
            ids.append(row[0])
            for j, text in enumerate(row[1:]):
                try:
                    values[j].append(float(text) if text.strip() else math.nan)
                except ValueError:
                    raise InputError(f"{path}:{lineno}: column {names[j]!r} holds {text!r}, not a number") from None
        if not ids:
            raise InputError(f"{path}: no rows")
        return cls(ids, {n: np.array(v, dtype=np.float64) for n, v in zip(names, values)})


def meta_path(table: str | Path) -> Path:
    """The meta written beside a score table: ``SCORES.csv`` → ``SCORES.meta.json``."""
    return Path(table).with_suffix(".meta.json")


def read_csv_rows(path: Path, what: str) -> list[list[str]]:
    """Every row of the CSV file ``path`` (the ``what`` named when it is missing)."""
    if not path.is_file():
        raise InputError(f"{what} not found: {path}")
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def format_number(x: float) -> str:
    """A float in Python's shortest round-tripping form; ``nan``/``inf``/``-inf`` otherwise."""
    return repr(float(x)) if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def write_csv_atomically(path: str | Path, header: list[str], rows: Iterable[list[object]]) -> None:
    """Write a CSV to a temporary file beside ``path``, then rename it over ``path``."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


CALIBRATED = "cal"  # a detector's score against its question's matched controls (SPEC §8.1)
AGAINST_REFERENCE = "ref"  # a detector's score minus the reference model's (SPEC §8.7)


def derived_column(detector: str, kind: str) -> str:
    """The name of a column derived from ``detector``'s: ``<detector>@cal`` or ``<detector>@ref``
    (``kind``: :data:`CALIBRATED` or :data:`AGAINST_REFERENCE`) — built here and nowhere else."""
    if kind not in (CALIBRATED, AGAINST_REFERENCE):
        raise ValueError(f"a derived column is {CALIBRATED!r} or {AGAINST_REFERENCE!r}, not {kind!r}")
    return f"{detector}@{kind}"


def split_column(column: str) -> tuple[str, str | None]:
    """``(detector, kind)`` of a derived column, ``(column, None)`` of any other."""
    base, at, kind = column.rpartition("@")
    return (base, kind) if at and kind in (CALIBRATED, AGAINST_REFERENCE) else (column, None)


CLEAN_SPLIT = "clean_ref"  # the split of known-clean questions (LaRA's clean reference, the verdict's clean set)


def join_tables(tables: list[ScoreTable]) -> ScoreTable:
    """Columns of several tables side by side, on the first table's ids (a missing row is NaN;
    a column name present twice is an error)."""
    out = ScoreTable(list(tables[0].ids), dict(tables[0].columns))
    for table in tables[1:]:
        row = {i: k for k, i in enumerate(table.ids)}
        for name, values in table.columns.items():
            if name in out.columns:
                raise InputError(f"score column {name!r} appears in more than one input; rename one")
            out.add(name, np.array([values[row[i]] if i in row else np.nan for i in out.ids]))
    return out


def align_labels(ids: list[str], labels: Mapping[str, int | None]) -> tuple[np.ndarray, dict[str, int]]:
    """Labels in the order of ``ids`` (−1 where unknown) and counts of what did not match:
    ``unlabelled`` (scored, no label), ``not_scored`` (labelled, no score row)."""
    y = np.array([-1 if labels.get(i) is None else labels[i] for i in ids], dtype=np.int8)
    scored = set(ids)
    return y, {
        "unlabelled": int((y < 0).sum()),
        "not_scored": sum(1 for k, v in labels.items() if v is not None and k not in scored),
    }


def jsonable(value: Any) -> Any:
    """Replace non-finite floats by None (JSON has no NaN) and numpy scalars/arrays by Python values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value
