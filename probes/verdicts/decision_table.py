"""The per-question decisions as data (SPEC §8.10): each detector's and each learned stream's
evidence, the questions' p- and q-values, the flags, the "at least" bound, and their forms in
``verdict.json`` (:meth:`QuestionDecisions.summary`), ``questions.csv`` (ranked by evidence) and
one printed line (:func:`describe_questions`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..scores import format_number, write_csv_atomically

UNDECIDED = (
    "no calibrated mode (no reference model, no clean set): the absolute mode's per-question p-values are "
    "uncalibrated, so no question is flagged and no lower bound is given (its figures: questions_diagnostic)"
)
SHOWN_FLAGGED = 50  # flagged questions described in verdict.json (each with its own and its controls' scores)


@dataclass
class DetectorEvidence:
    """One detector's per-question evidence ``[N]`` (``controls``: ``[N, C]`` decisive-mode scores of
    the controls, or None), its null pool (what, and how many), and the questions it left out."""

    original: np.ndarray
    controls: np.ndarray | None
    residual: np.ndarray
    p_value: np.ndarray
    null_size: int
    scale: float
    left_out: dict[str, int]
    null: str = "the controls' residuals"
    null_values: np.ndarray | None = None  # the pool, in the residuals' units (for residual AUCs; not written out)


@dataclass
class Stream:
    """One learned score per question over ``detectors`` (``score [N]``, higher = member) and its
    conformal p-values against a null (``what``: every control's residual, or the clean set's
    originals); ``pool``: the smallest null a p-value was taken against (a fold's), ``null_size``:
    all null texts; ``weights``: the fitted weight of each detector in each fold."""

    name: str
    detectors: list[str]
    score: np.ndarray
    p_value: np.ndarray
    pool: int
    null_size: int
    weights: dict[str, list[float]]
    what: str
    left_out: dict[str, int]
    null_scores: np.ndarray | None = None  # the null texts' learned scores (for residual AUCs; not written out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "detectors": self.detectors,
            "null": self.what,
            "null_size": self.null_size,
            "pool": self.pool,
            "weights": self.weights,
            "left_out": self.left_out,
        }


@dataclass
class QuestionDecisions:
    """The per-question table of one audited set; ``at_least``: a lower ``level`` confidence bound on
    how many of its questions are contaminated."""

    ids: list[str]
    mode: str
    calibrated: bool
    fdr: float
    method: str
    combine: str
    detectors: dict[str, DetectorEvidence]
    streams: list[Stream]
    p_value: np.ndarray
    q_value: np.ndarray
    flagged: np.ndarray
    at_least: int
    level: float
    notes: list[str] = field(default_factory=list)
    lines: list[tuple[np.ndarray, int]] = field(
        default_factory=list
    )  # (p-values [N], pool) behind "at least"; not written out

    @property
    def rank(self) -> np.ndarray:
        """``[N]`` each question's rank by evidence (1 = smallest p-value; untested ones last)."""
        order = np.lexsort((np.arange(len(self.ids)), np.nan_to_num(self.p_value, nan=np.inf)))
        out = np.empty(len(self.ids), dtype=np.int64)
        out[order] = np.arange(1, len(self.ids) + 1)
        return out

    def summary(self) -> dict[str, Any]:
        """The ``questions`` block of ``verdict.json``: settings, counts, the "at least" bound, the
        flagged ids (best first) and the first flagged questions' evidence. An uncalibrated
        (absolute) mode decides nothing: no flag, no bound (null, with the reason); its figures are
        in :meth:`diagnostic`."""
        if not self.calibrated:
            return {
                "fdr": self.fdr,
                "method": self.method,
                "combine": self.combine,
                "mode": self.mode,
                "calibrated": False,
                "n": len(self.ids),
                "n_tested": int(np.isfinite(self.p_value).sum()),
                "n_flagged": None,
                "at_least": None,
                "undecided": UNDECIDED,
                "flagged": [],
                "flagged_detail": [],
                "notes": self.notes,
            }
        order = [i for i in np.argsort(self.rank, kind="stable") if self.flagged[i]]
        n_tested = int(np.isfinite(self.p_value).sum())
        return {
            "fdr": self.fdr,
            "method": self.method,
            "combine": self.combine,
            "mode": self.mode,
            "calibrated": self.calibrated,
            "n": len(self.ids),
            "n_tested": n_tested,
            "n_flagged": int(self.flagged.sum()),
            "at_least": {
                "value": self.at_least,
                "of": n_tested,
                "level": self.level,
                "method": "closed testing with a sum-of-p-values local test",
            },
            "flagged": [self.ids[i] for i in order],
            "detectors": {
                n: {"null": d.null, "null_size": d.null_size, "scale": d.scale, "left_out": d.left_out}
                for n, d in self.detectors.items()
            },
            "streams": {s.name: s.to_dict() for s in self.streams},
            "flagged_detail": [self._detail(i) for i in order[:SHOWN_FLAGGED]],
            "notes": self.notes,
        }

    def diagnostic(self) -> dict[str, Any] | None:
        """What an uncalibrated mode's decisions would be, kept apart from the ``questions`` block
        (``verdict.json``'s ``questions_diagnostic``): never a decision. None for a calibrated mode."""
        if self.calibrated:
            return None
        order = [i for i in np.argsort(self.rank, kind="stable") if np.isfinite(self.p_value[i])]
        return {
            "mode": self.mode,
            "calibrated": False,
            "what": "the absolute mode's per-question p-values, uncalibrated: the generator's similars may not be "
            "exchangeable with real questions, so these are no decisions (SPEC §8.10)",
            "below_fdr_threshold": int(self.flagged.sum()),
            "lower_bound_if_calibrated": self.at_least,
            "smallest_p": [{"id": self.ids[i], "p_value": float(self.p_value[i])} for i in order[:SHOWN_FLAGGED]],
        }

    def _detail(self, i: int) -> dict[str, Any]:
        return {
            "id": self.ids[i],
            "p_value": float(self.p_value[i]),
            "q_value": float(self.q_value[i]),
            "detectors": {
                n: {
                    "score": float(d.original[i]),
                    "residual": float(d.residual[i]),
                    "p_value": float(d.p_value[i]),
                    "controls": None if d.controls is None else [float(x) for x in d.controls[i] if not math.isnan(x)],
                }
                for n, d in self.detectors.items()
            },
        }

    def columns(self) -> dict[str, list[Any]]:
        """The table, column by column, rows ranked by evidence: ``id, rank, mode, <det>_residual,
        <det>_p…, <stream>_score, <stream>_p…, p_value, q_value, flagged``."""
        order = np.argsort(self.rank, kind="stable")
        mode = self.mode if self.calibrated else f"{self.mode} (uncalibrated)"
        out: dict[str, list[Any]] = {
            "id": [self.ids[i] for i in order],
            "rank": self.rank[order].tolist(),
            "mode": [mode] * len(self.ids),
        }
        for n, d in self.detectors.items():
            out[f"{n}_residual"], out[f"{n}_p"] = d.residual[order].tolist(), d.p_value[order].tolist()
        for s in self.streams:
            key = "learned_" + s.name.replace(" ", "_")
            out[f"{key}_score"], out[f"{key}_p"] = s.score[order].tolist(), s.p_value[order].tolist()
        out.update(
            p_value=self.p_value[order].tolist(),
            q_value=self.q_value[order].tolist(),
            # an uncalibrated mode flags nothing: empty, which is no decision (never a 0, a "not flagged")
            flagged=[int(self.flagged[i]) if self.calibrated else "" for i in order],
        )
        return out

    def write_csv(self, path: str | Path) -> None:
        """:meth:`columns` as CSV (atomically)."""

        columns = self.columns()
        numeric = [k for k in columns if k not in ("id", "rank", "mode", "flagged")]
        rows = (
            [
                columns["id"][i],
                columns["rank"][i],
                columns["mode"][i],
                *[format_number(columns[k][i]) for k in numeric],
                columns["flagged"][i],
            ]
            for i in range(len(self.ids))
        )
        write_csv_atomically(path, ["id", "rank", "mode", *numeric, "flagged"], rows)

    def to_frame(self) -> Any:
        """:meth:`columns` as a ``pandas.DataFrame`` indexed by id."""
        import pandas as pd

        return pd.DataFrame(self.columns()).set_index("id")


def write_no_decisions(ids: list[str], path: str | Path) -> None:
    """The table when there is no verdict: every question undecided (blank ``flagged``, never 0)."""

    write_csv_atomically(
        path,
        ["id", "rank", "mode", "p_value", "q_value", "flagged"],
        ([qid, "", "no verdict", "nan", "nan", ""] for qid in ids),
    )
