"""Which questions (SPEC §8.10): per-question decisions with a false-discovery guarantee, in the
verdict's deciding mode.

Per detector and question, the residual e_j of the original in that mode's scores (reference:
s_audited − s_reference; absolute: s_audited; relative: as the original's residual, or the score
itself for a detector without controls such as LaRA or reward gain) gets a conformal p-value
against a null pool — the residuals of every control of every audited question (reference,
absolute), or the clean set's (relative). Per question the detectors' p-values are combined
(Cauchy), and Benjamini–Hochberg at ``fdr`` decides which questions are flagged, with q-values.
Flags from the absolute mode are marked uncalibrated, as its verdict is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import conformal, stats
from .verdict import ScoredSet, VerdictSettings

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


@dataclass
class QuestionDecisions:
    """The per-question table of one audited set."""

    ids: list[str]
    mode: str
    calibrated: bool
    fdr: float
    method: str
    detectors: dict[str, DetectorEvidence]
    p_value: np.ndarray
    q_value: np.ndarray
    flagged: np.ndarray
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The ``questions`` block of ``verdict.json``: settings, counts, the flagged ids (best q
        first) and the first flagged questions' evidence."""
        order = [i for i in np.argsort(self.q_value, kind="stable") if self.flagged[i]]
        return {
            "fdr": self.fdr, "method": self.method, "mode": self.mode, "calibrated": self.calibrated,
            "n": len(self.ids), "n_tested": int(np.isfinite(self.p_value).sum()), "n_flagged": int(self.flagged.sum()),
            "flagged": [self.ids[i] for i in order],
            "detectors": {n: {"null": d.null, "null_size": d.null_size, "scale": d.scale, "left_out": d.left_out}
                          for n, d in self.detectors.items()},
            "flagged_detail": [self._detail(i) for i in order[:SHOWN_FLAGGED]],
            "notes": self.notes,
        }

    def _detail(self, i: int) -> dict[str, Any]:
        return {"id": self.ids[i], "p_value": float(self.p_value[i]), "q_value": float(self.q_value[i]),
                "detectors": {n: {"score": float(d.original[i]), "residual": float(d.residual[i]), "p_value": float(d.p_value[i]),
                                  "controls": None if d.controls is None else [float(x) for x in d.controls[i] if not math.isnan(x)]}
                              for n, d in self.detectors.items()}}

    def columns(self) -> dict[str, list[Any]]:
        """The table, column by column: ``id, mode, <det>_residual, <det>_p…, p_value, q_value, flagged``."""
        mode = self.mode if self.calibrated else f"{self.mode} (uncalibrated)"
        out: dict[str, list[Any]] = {"id": list(self.ids), "mode": [mode] * len(self.ids)}
        for n, d in self.detectors.items():
            out[f"{n}_residual"], out[f"{n}_p"] = d.residual.tolist(), d.p_value.tolist()
        out.update(p_value=self.p_value.tolist(), q_value=self.q_value.tolist(), flagged=[int(f) for f in self.flagged])
        return out

    def write_csv(self, path: str | Path) -> None:
        """:meth:`columns` as CSV (atomically)."""
        from ..scores import format_number, write_csv_atomically

        columns = self.columns()
        numeric = [k for k in columns if k not in ("id", "mode", "flagged")]
        rows = ([columns["id"][i], columns["mode"][i], *[format_number(columns[k][i]) for k in numeric], columns["flagged"][i]]
                for i in range(len(self.ids)))
        write_csv_atomically(path, ["id", "mode", *numeric, "flagged"], rows)

    def to_frame(self) -> Any:
        """:meth:`columns` as a ``pandas.DataFrame`` indexed by id."""
        import pandas as pd

        return pd.DataFrame(self.columns()).set_index("id")


def write_no_decisions(ids: list[str], path: str | Path) -> None:
    """The table when there is no verdict: every question undecided (blank ``flagged``, never 0)."""
    from ..scores import write_csv_atomically

    write_csv_atomically(path, ["id", "mode", "p_value", "q_value", "flagged"], ([qid, "no verdict", "nan", "nan", ""] for qid in ids))


def describe_questions(block: dict[str, Any] | None, where: str = "") -> str:
    """One line: how many questions are flagged, at which FDR, in which mode, and the first ids."""
    if block is None:
        return "which questions: none decided (no verdict)"
    mode = f"{block['mode']} mode" + ("" if block["calibrated"] else ", uncalibrated")
    shown = ", ".join(block["flagged"][:8]) + (", …" if block["n_flagged"] > 8 else "")
    method = "BH" if block["method"] == "bh" else "two-stage BH"
    return (f"which questions: {block['n_flagged']} of {block['n_tested']} tested flagged at FDR {100 * block['fdr']:g}% "
            f"({mode}, {method}){': ' + shown if shown else ''}{' -> ' + where if where else ''}")


def decide_questions(verdict: dict[str, Any], audited: ScoredSet, reference: ScoredSet | None, clean: ScoredSet | None,
                     settings: VerdictSettings) -> QuestionDecisions | None:
    """The per-question decisions in the verdict's deciding mode, over its detectors, and — when a
    clean set is given — over the detectors without controls (LaRA, reward gain) against it; each
    detector's p-value is valid under its own null, and the Cauchy combination under any
    dependence. None when there is no verdict."""
    mode = verdict.get("mode")
    if mode is None:
        return None
    notes: list[str] = []
    evidence = {n: _evidence(mode, n, audited, reference, clean, settings, notes) for n in verdict["combined"]["detectors"]}
    if mode != "relative" and clean is not None:
        evidence.update({n: _against_clean_scores(n, audited, clean, settings) for n in _plain(audited, clean, settings)})
    evidence = {n: e for n, e in evidence.items() if e is not None}
    p_value = conformal.combine_per_question({n: e.p_value for n, e in evidence.items()}) if evidence else np.full(len(audited.ids), np.nan)
    flagged, q_value = conformal.benjamini_hochberg(p_value, settings.fdr, settings.fdr_method)
    if mode == "absolute":
        notes.append("flags from the absolute mode are uncalibrated, as its verdict is: the generator's similars may not be "
                     "exchangeable with real questions")
    return QuestionDecisions(list(audited.ids), mode, mode != "absolute", settings.fdr, settings.fdr_method, evidence,
                             p_value, q_value, flagged, notes)


def _plain(audited: ScoredSet, clean: ScoredSet, settings: VerdictSettings) -> list[str]:
    """Detectors without controls that a clean set can calibrate (not constant on both sides)."""
    from .verdict import PLAIN_RELATIVE

    names = [n for n in (settings.detectors or PLAIN_RELATIVE) if n in audited.scores.columns and n in clean.scores.columns
             and not audited.has_controls(n)]
    out = []
    for n in names:
        values = np.concatenate([audited.original(n), clean.original(n)])
        values = values[~np.isnan(values)]
        if len(np.unique(values)) > 1:
            out.append(n)
    return out


def _evidence(mode: str, name: str, audited: ScoredSet, reference: ScoredSet | None, clean: ScoredSet | None,
              settings: VerdictSettings, notes: list[str]) -> DetectorEvidence | None:
    if mode == "relative":
        assert clean is not None
        if audited.has_controls(name) and clean.has_controls(name):
            return _against_clean_residuals(name, audited, clean, settings)
        return _against_clean_scores(name, audited, clean, settings)
    original, controls = audited.original(name), audited.control_matrix(name)
    if mode == "reference":
        assert reference is not None
        ref = reference.subset(audited.ids)
        width = max(audited.width, ref.width)
        with np.errstate(invalid="ignore"):  # inf − inf is NaN: left out, counted
            original, controls = original - ref.original(name), audited.control_matrix(name, width) - ref.control_matrix(name, width)
    evidence = _against_control_residuals(original, controls, settings)
    if settings.decision_residual == "spec" and conformal.discrete(conformal.control_residuals(original, controls)):
        notes.append(f"{name}: its scores are coarse (few distinct residuals), and an original's residual against all its "
                     "controls is then not distributed like the pool's; set verdict.decision_residual: matched")
    return evidence


def _against_control_residuals(original: np.ndarray, controls: np.ndarray, settings: VerdictSettings) -> DetectorEvidence:
    """Null pool: every control residual of every question (each against its question's other controls)."""
    residual = conformal.original_residuals(original, controls, settings.decision_residual == "matched", settings.seed)
    null = conformal.control_residuals(original, controls)
    scale = _scale(controls)
    return DetectorEvidence(original, controls, _scaled(residual, scale), _pvalues(residual, null, settings),
                            int((~np.isnan(null)).sum()), scale, stats.left_out(original, controls, conformal.MIN_CONTROLS))


def _pvalues(residual: np.ndarray, null: np.ndarray, settings: VerdictSettings) -> np.ndarray:
    return conformal.conformal_pvalues(residual, null, settings.decision_pvalue == "randomised", settings.seed)


def _against_clean_residuals(name: str, audited: ScoredSet, clean: ScoredSet, settings: VerdictSettings) -> DetectorEvidence:
    """Relative mode with controls: the audited originals' residuals against the clean originals'
    (the same number of controls on both sides)."""
    width = min(audited.width, clean.width)
    original, controls = audited.original(name), stats.first_controls(audited.control_matrix(name), width)
    clean_residual = conformal.original_residuals(clean.original(name), stats.first_controls(clean.control_matrix(name), width))
    residual = conformal.original_residuals(original, controls)
    scale = _scale(controls)
    return DetectorEvidence(original, controls, _scaled(residual, scale), _pvalues(residual, clean_residual, settings),
                            int((~np.isnan(clean_residual)).sum()), scale, stats.left_out(original, controls, conformal.MIN_CONTROLS),
                            "the clean set's residuals")


def _against_clean_scores(name: str, audited: ScoredSet, clean: ScoredSet, settings: VerdictSettings) -> DetectorEvidence:
    """Relative mode without controls (LaRA, reward gain): each score against the clean set's scores."""
    from ..robust import robust_scale

    original, null = audited.original(name), clean.original(name)
    fitted = robust_scale(null[:, None])
    center, scale = float(fitted.center[0]), float(fitted.scale[0])
    return DetectorEvidence(original, None, _scaled(original - center, scale), _pvalues(original, null, settings),
                            int((~np.isnan(null)).sum()), scale, stats.left_out(original), "the clean set's scores")


def _scaled(residual: np.ndarray, scale: float) -> np.ndarray:
    """Residuals in units of the pooled scale (SPEC §8.10; ranks, hence p-values, unchanged)."""
    return residual / scale if math.isfinite(scale) and scale > 0 else residual


def _scale(controls: np.ndarray) -> float:
    """SPEC §8.2's pooled σ̂ of the controls (for reading residuals; the p-values are rank-based)."""
    fitted = stats.pooled_control_scale(controls)
    return float(fitted.scale[0]) if fitted is not None else math.nan
