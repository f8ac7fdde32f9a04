"""The statistics of per-question decisions (SPEC §8.10), as pure functions: residuals of originals
and of controls, conformal p-values against a pooled null, and Benjamini–Hochberg decisions.

Shapes: ``original [N]`` and ``controls [N, C]`` (NaN where a question has fewer valid controls)
hold one detector's decisive-mode scores d(t) (higher = member). A question needs at least
:data:`MIN_CONTROLS` scored controls (a control's residual is taken against the median of the
*other* controls, never the original) — otherwise it is left out (NaN) and counted.

Conformal p-values (Bates, Candès, Lei, Romano & Sesia 2023): with n null residuals drawn like an
original's under H0, the rank of its residual among them gives a p-value that is uniform for that
original (conservative with ties, or exact when randomised over them), and Benjamini–Hochberg over such p-values controls the
false-discovery rate (they are positively dependent, PRDS, through the shared null pool).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

MIN_CONTROLS = 3
FDR_METHODS = {"bh": "fdr_bh", "two-stage": "fdr_tsbky"}  # → statsmodels: BH; Benjamini–Krieger–Yekutieli's two-stage


def _usable(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    original = np.asarray(original, dtype=np.float64)
    controls = np.asarray(controls, dtype=np.float64).reshape(len(original), -1)
    return original, controls, (~np.isnan(controls)).sum(axis=1) >= MIN_CONTROLS


def original_residuals(original: np.ndarray, controls: np.ndarray, matched: bool = False, seed: int = 0) -> np.ndarray:
    """e_j = d(q_0,j) − median of its scored controls (SPEC §8.10). With ``matched``, the median of
    all but one of them (dropped at random, seeded): the same function as a control's residual
    (:func:`control_residuals`), so under H0 an original's residual is distributed exactly like the
    pool's — which the SPEC's form is not for discrete scores (with 3 controls, a text scored 0/1
    at random reaches residual 1 a quarter of the time as an original, an eighth as a control).
    ``[N]``, NaN where the original is NaN or fewer than :data:`MIN_CONTROLS` controls are
    scored; ±inf stays ±inf."""
    original, controls, usable = _usable(original, controls)
    rng = np.random.default_rng(seed)
    out = np.full(len(original), np.nan)
    for j in np.flatnonzero(usable):
        scored = controls[j][~np.isnan(controls[j])]
        if matched:
            scored = np.delete(scored, rng.integers(len(scored)))
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


def conformal_pvalues(residuals: np.ndarray, null: np.ndarray, randomised: bool = False, seed: int = 0) -> np.ndarray:
    """Conformal p-values of ``residuals [N]`` against the ``null`` pool (NaN null residuals are not
    part of it; NaN stays NaN). SPEC §8.10: p = (1 + #{null ≥ e}) / (1 + n_null) — deterministic,
    valid (conservative with ties). ``randomised``: p = (#{null > e} + U·(1 + #{null = e})) /
    (1 + n_null), U uniform(0, 1) seeded — exactly uniform under H0 and never 1 (a p of 1 makes a
    question's Cauchy combination 1 whatever its other detectors say), at the price of decisions
    that depend on the seed. ``[N]``."""
    e = np.asarray(residuals, dtype=np.float64)
    pool = np.sort(np.asarray(null, dtype=np.float64).ravel())
    pool = pool[~np.isnan(pool)]
    above = len(pool) - np.searchsorted(pool, e, side="right")  # #{null > e}
    ties = np.searchsorted(pool, e, side="right") - np.searchsorted(pool, e, side="left")
    u = np.random.default_rng(seed).random(len(e)) if randomised else np.ones(len(e))
    p = (above + u * (1.0 + ties)) / (1.0 + len(pool))
    return np.where(np.isnan(e), np.nan, p)


def discrete(null: np.ndarray, share: float = 0.5) -> bool:
    """Whether a pool of residuals is coarse (fewer distinct values than ``share`` of its size):
    then the SPEC's residual of an original is not exchangeable with the pool's (see
    :func:`original_residuals`)."""
    pool = np.asarray(null, dtype=np.float64).ravel()
    pool = pool[~np.isnan(pool)]
    return len(pool) > 10 and len(np.unique(pool)) < share * len(pool)


def benjamini_hochberg(pvalues: np.ndarray, fdr: float, method: Literal["bh", "two-stage"] = "bh") -> tuple[np.ndarray, np.ndarray]:
    """Decisions and q-values of BH (or Benjamini–Krieger–Yekutieli's two-stage adaptive BH, which
    keeps the FDR guarantee) at level ``fdr`` over the non-NaN ``pvalues``, through
    ``statsmodels.stats.multitest``.
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
