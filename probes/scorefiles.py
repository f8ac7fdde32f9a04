"""The score-file bundle, in one home below its writer (``lara detect``, the ``detect`` stage) and
its readers (``lara verdict``, the ``verdict`` stage, the Python API).

A model's bundle is four files beside each other: ``SCORES.csv`` (one oriented column per detector
and ``<det>@cal``), ``SCORES.raw.csv`` (the raw statistics), ``SCORES.controls.csv`` (the
detectors' scores on each question's matched controls, SPEC §8.1: ``id``, ``control``,
``text_sha256`` — the sha256 of the control's text, so two tables can be checked to score the same
texts — and one column per detector) and ``SCORES.meta.json``. The meta is written last and binds
``SCORES.csv`` and the controls file by their sha256 (or records that there is no controls file),
with each detector's settings digest. A controls file is therefore used only when the meta binds it
to these scores: a file left beside them by another run (another model, another ``--sets``) is never
picked up, and one given explicitly that the meta does not bind is refused in one line.

:class:`ScoredSet` is one model's scores on some questions as the verdict reads them.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lara_core.files import file_sha256, write_text_atomically

from .errors import InputError, MismatchError
from .scores import ScoreTable, format_number, meta_path, read_csv_rows, write_csv_atomically

logger = logging.getLogger(__name__)

HASH_COLUMN = "text_sha256"


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
        rows = read_csv_rows(path, "control score file")
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


def write_scored(
    output: str | Path, table: ScoreTable, raw: ScoreTable, controls: ControlTable | None, info: dict[str, Any]
) -> list[Path]:
    """Write the bundle: SCORES.csv (``output``), .raw.csv, .controls.csv (or none: a stale one from
    an earlier run is removed) and, last, .meta.json (``info`` plus the bindings, which are also
    recorded in ``info``), which binds SCORES.csv and the controls file by their sha256 (the old meta
    is removed first, so an interrupted write binds nothing). Returns the paths written."""
    output = Path(output)
    raw_path, controls_path = output.with_suffix(".raw.csv"), output.with_suffix(".controls.csv")
    meta_file = meta_path(output)
    meta_file.unlink(missing_ok=True)  # an interrupted write leaves no meta, so nothing beside it is trusted
    table.write_csv(output)
    info["scores_file"] = {"name": output.name, "sha256": file_sha256(output)}
    raw.write_csv(raw_path)
    written = [output, raw_path]
    if controls is not None:
        controls.write_csv(controls_path)
        written.append(controls_path)
        info["controls_file"] = {"name": controls_path.name, "sha256": file_sha256(controls_path)}
    else:
        if controls_path.exists():
            logger.info("removing %s: it belongs to an earlier run (these scores have no controls)", controls_path)
            controls_path.unlink()
        info["controls_file"] = None
    write_text_atomically(meta_file, json.dumps(info, indent=1, default=str) + "\n")
    return [*written, meta_file]


@dataclass
class ScoredFiles:
    """What was read: the scores, their controls (None without), each detector's settings digest
    (``{}`` when no meta says), and notes for the output."""

    scores: ScoreTable
    controls: ControlTable | None
    settings: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    prompt_format: dict[str, Any] | None = (
        None  # how the questions were prompted (a local model's; None: unknown or served)
    )


def bound_settings(meta: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any] | None]:
    """From a scores meta (``lara detect``'s ``.meta.json``, or ``DetectSummary.info``): each
    detector's settings digest and the prompt format (``{}`` and None without one)."""
    settings = {
        n: d["settings_digest"] for n, d in (meta or {}).get("detectors", {}).items() if d.get("settings_digest")
    }
    return settings, ((meta or {}).get("responder") or {}).get("prompt_format")


def read_scored(
    scores_path: str | Path, controls_path: str | Path | None = None, use_controls: bool = True
) -> ScoredFiles:
    """``scores_path`` and its controls (``controls_path``, default the bound file beside it).

    ``use_controls=False`` reads the scores alone (a run whose calibration is off).

    Raises:
        MismatchError: the controls file is not the one the scores' meta binds.
        InputError: a bound controls file is missing, or a file is unreadable.
    """
    scores_path = Path(scores_path)
    table = ScoreTable.read_csv(scores_path)
    meta = _read_meta(meta_path(scores_path))
    stale_meta = meta is not None and not _meta_describes(meta, scores_path)
    if stale_meta:
        meta = None
    settings, prompt = bound_settings(meta)
    out = ScoredFiles(table, None, settings, prompt_format=prompt)
    if stale_meta:
        out.notes.append(
            f"{meta_path(scores_path).name} was written with other scores than {scores_path.name} "
            "(an interrupted write, or another run's file): it is not used"
        )
    if not use_controls:
        return out
    beside = scores_path.with_suffix(".controls.csv")
    given = Path(controls_path) if controls_path is not None else None
    if meta is None or "controls_file" not in meta or not _meta_describes(meta, scores_path):
        return _unbound(out, scores_path, given, beside)
    bound = meta["controls_file"]
    if bound is None:
        if given is not None:
            raise MismatchError(
                f"{scores_path} was scored without controls ({meta_path(scores_path).name} "
                f"says so), so {given} belongs to another run; rerun lara detect with --sets to score controls"
            )
        if beside.exists():
            out.notes.append(f"ignored {beside.name}: it belongs to an earlier run (these scores have no controls)")
        return out
    path = given or scores_path.with_name(bound["name"])
    if not path.is_file():
        raise InputError(
            f"{meta_path(scores_path).name} records the controls file {bound['name']}, which is "
            f"missing; rerun lara detect --sets to the same -o"
        )
    digest = file_sha256(path)
    if digest != bound["sha256"]:
        raise MismatchError(
            f"{path} does not belong to {scores_path}: the scores' meta records controls with sha256 "
            f"{bound['sha256'][:12]}…, this file has {digest[:12]}… (written by another lara detect run); "
            "rerun lara detect --sets to the same -o, or give the right file with --controls"
        )
    out.controls = ControlTable.read_csv(path)
    return out


def _meta_describes(meta: dict[str, Any], scores_path: Path) -> bool:
    """Whether the meta was written with these very scores (its recorded sha256 of SCORES.csv)."""
    bound = meta.get("scores_file")
    return bound is None or bound.get("sha256") == file_sha256(scores_path)


def _unbound(out: ScoredFiles, scores_path: Path, given: Path | None, beside: Path) -> ScoredFiles:
    """Scores without a meta that binds controls (made by hand, or by an earlier version): only an
    explicitly given controls file is used, and the output says it was not checked."""
    if given is not None:
        out.controls = ControlTable.read_csv(given)
        out.notes.append(
            f"{given.name} was given with scores that do not record their controls; that they belong "
            f"together was not checked"
        )
    elif beside.exists():
        out.notes.append(
            f"ignored {beside.name}: {scores_path.name} does not record which controls it was scored "
            "with (no lara detect meta); name the file with --controls to use it"
        )
    return out


def _read_meta(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg}); rerun lara detect, or delete it") from None
    return meta if isinstance(meta, dict) else None


def first_scored(controls: np.ndarray, width: int) -> np.ndarray:
    """``[N, width]``: each row's first ``width`` scores (not NaN), in index order, NaN-padded."""
    out = np.full((len(controls), width), np.nan)
    for j, row in enumerate(np.asarray(controls, dtype=np.float64)):
        scored = row[~np.isnan(row)][:width]
        out[j, : len(scored)] = scored
    return out


@dataclass
class ScoredSet:
    """One model's scores on some questions (``ids``) and, optionally, on their controls;
    ``settings``: each detector's settings digest (from ``lara detect``'s meta; ``{}`` unknown)."""

    scores: ScoreTable
    controls: ControlTable | None
    ids: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    prompt_format: dict[str, Any] | None = None
    max_controls: int | None = None  # read only each question's first this many controls (the verdict's; None: all)

    def __post_init__(self) -> None:
        if not self.ids:
            self.ids = list(self.scores.ids)
        self._row = {qid: i for i, qid in enumerate(self.scores.ids)}

    def original(self, name: str) -> np.ndarray:
        """``[n]`` scores of column ``name`` on the originals (NaN where a row is missing)."""
        if name not in self.scores.columns:
            raise InputError(f"no score column {name!r}; columns: {', '.join(self.scores.columns)}")
        values = self.scores.columns[name]
        return np.array([values[self._row[i]] if i in self._row else np.nan for i in self.ids])

    def has_controls(self, name: str) -> bool:
        return self.controls is not None and name in self.controls.columns

    def control_matrix(self, name: str, width: int | None = None) -> np.ndarray:
        """``[n, C]`` scores of column ``name`` on each question's controls (``width`` C: default
        :attr:`width`), by control index; with ``max_controls``, each question's first that many
        *scored* controls in index order (a detector that reads answers scores the first controls
        that have one, which need not be the first controls: :func:`first_scored`)."""
        assert self.controls is not None
        if self.max_controls is None:
            return self.controls.matrix(name, self.ids, width if width is not None else self.width)
        return first_scored(self.controls.matrix(name, self.ids, self.largest), width or self.width)

    @property
    def largest(self) -> int:
        """The largest control index."""
        return int(self.controls.index.max()) if self.controls is not None and len(self.controls.index) else 0

    @property
    def width(self) -> int:
        """The largest control index (C), at most ``max_controls``."""
        return self.largest if self.max_controls is None else min(self.largest, self.max_controls)

    def subset(self, ids: Sequence[str]) -> "ScoredSet":
        return ScoredSet(self.scores, self.controls, list(ids), self.settings, self.prompt_format, self.max_controls)

    def limited(self, max_controls: int | None) -> "ScoredSet":
        """The same scores, reading only each question's first ``max_controls`` controls."""
        return ScoredSet(self.scores, self.controls, list(self.ids), self.settings, self.prompt_format, max_controls)
