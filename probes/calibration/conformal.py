"""The statistics of per-question decisions (SPEC §8.10), as pure functions: residuals of originals
and of controls, conformal p-values against a pooled null, and Benjamini–Hochberg decisions.

Shapes: ``original [N]`` and ``controls [N, C]`` (NaN where a question has fewer valid controls)
hold one detector's decisive-mode scores d(t) (higher = member). A question needs at least
:data:`MIN_CONTROLS` scored controls (a control's residual is taken against the median of the
*other* controls, never the original) — otherwise it is left out (NaN) and counted.

Conformal p-values (Bates, Candès, Lei, Romano & Sesia 2023): with n null residuals drawn like an
original's under H0, p = (1 + #{null ≥ e}) / (1 + n) is super-uniform for that original, and
Benjamini–Hochberg over such p-values controls the false-discovery rate (they are positively
dependent, PRDS, through the shared null pool).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

MIN_CONTROLS = 3
FDR_METHODS = {"bh": "fdr_bh", "two-stage": "fdr_tsbh"}  # names → statsmodels.stats.multitest methods


def _usable(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    original = np.asarray(original, dtype=np.float64)
    controls = np.asarray(controls, dtype=np.float64).reshape(len(original), -1)
    return original, controls, (~np.isnan(controls)).sum(axis=1) >= MIN_CONTROLS


def original_residuals(original: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """e_j = d(q_0,j) − median of its scored controls. ``[N]``, NaN where the original is NaN or
    fewer than :data:`MIN_CONTROLS` controls are scored; ±inf stays ±inf."""
    original, controls, usable = _usable(original, controls)
    out = np.full(len(original), np.nan)
    for j in np.flatnonzero(usable):
        scored = controls[j][~np.isnan(controls[j])]
        with np.errstate(invalid="ignore"):
            out[j] = original[j] - np.median(scored)
    return out


def control_residuals(original: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """e_{j,k} = d(q_k,j) − median of the *other* scored controls of j (the original never enters,
    so a contaminated original cannot shift the null). ``[N, C]``, NaN where absent or unusable."""
    original, controls, usable = _usable(original, controls)
    out = np.full(controls.shape, np.nan)
    for j in np.flatnonzero(usable):
        scored = np.flatnonzero(~np.isnan(controls[j]))
        for k in scored:
            others = controls[j, scored[scored != k]]
            with np.errstate(invalid="ignore"):
                out[j, k] = controls[j, k] - np.median(others)
    return out


def conformal_pvalues(residuals: np.ndarray, null: np.ndarray) -> np.ndarray:
    """p = (1 + #{null ≥ e}) / (1 + n_null) for each residual e (NaN stays NaN; NaN null
    residuals are not part of the pool). ``[N]``."""
    e = np.asarray(residuals, dtype=np.float64)
    pool = np.sort(np.asarray(null, dtype=np.float64).ravel())
    pool = pool[~np.isnan(pool)]
    at_least = len(pool) - np.searchsorted(pool, e, side="left")  # #{null ≥ e}
    p = (1.0 + at_least) / (1.0 + len(pool))
    return np.where(np.isnan(e), np.nan, p)


def benjamini_hochberg(pvalues: np.ndarray, fdr: float, method: Literal["bh", "two-stage"] = "bh") -> tuple[np.ndarray, np.ndarray]:
    """Decisions and q-values of BH (or Benjamini–Krieger–Yekutieli's two-stage adaptive BH) at
    level ``fdr`` over the non-NaN ``pvalues``, through ``statsmodels.stats.multitest``.
    Returns ``(flagged [N] bool, q_values [N], NaN where p is NaN)``."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=np.float64)
    flagged, q = np.zeros(len(p), dtype=bool), np.full(len(p), np.nan)
    tested = ~np.isnan(p)
    if tested.any():
        reject, corrected, _, _ = multipletests(p[tested], alpha=fdr, method=FDR_METHODS[method])
        flagged[tested], q[tested] = reject, corrected
    return flagged, q


def combine_per_question(pvalues: dict[str, np.ndarray]) -> np.ndarray:
    """Per question, the Cauchy combination of its detectors' p-values (NaN ones left out;
    NaN when none is finite). ``{detector: [N]}`` → ``[N]``."""
    from .stats import cauchy_combination

    if not pvalues:
        return np.zeros(0)
    matrix = np.column_stack(list(pvalues.values()))
    return np.array([cauchy_combination(row) if np.isfinite(row).any() else math.nan for row in matrix])
