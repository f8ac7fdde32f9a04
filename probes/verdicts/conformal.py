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

import hashlib
import math
from typing import Literal, Sequence

import numpy as np

from .stats import cauchy_combination

MIN_CONTROLS = 3
FDR_METHODS = {"bh": "fdr_bh", "two-stage": "fdr_tsbky"}  # → statsmodels: BH; Benjamini–Krieger–Yekutieli's two-stage


def _usable(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    original = np.asarray(original, dtype=np.float64)
    controls = np.asarray(controls, dtype=np.float64).reshape(len(original), -1)
    return original, controls, (~np.isnan(controls)).sum(axis=1) >= MIN_CONTROLS


def question_uniforms(ids: Sequence[str], seed: int, purpose: str) -> np.ndarray:
    """``[N]`` uniform(0, 1) draws, one per question id, from the run's ``seed`` and the id alone
    (sha256): a question's draw does not depend on which other questions are decided with it, so
    the same run gives the same list, and a subset of a run draws what the whole run drew."""
    out = np.empty(len(ids))
    for j, qid in enumerate(ids):
        digest = hashlib.sha256(f"{seed}\x1f{purpose}\x1f{qid}".encode()).digest()
        out[j] = int.from_bytes(digest[:7], "big") / 2.0**56
    return out


def original_residuals(original: np.ndarray, controls: np.ndarray, drop: np.ndarray | None = None) -> np.ndarray:
    """e_j = d(q_0,j) − median of its scored controls; with ``drop`` (``[N]`` uniforms, SPEC §8.10's
    matched residual) the median of all but one of them, the one dropped being scored control
    ⌊drop_j · C_j⌋: the same function as a control's residual (:func:`control_residuals`), so under
    H0 an original's residual is distributed exactly like the pool's — which the residual against
    all C controls is not (it is less dispersed, and decisions built on it are 10–100×
    conservative; with discrete scores not even valid). One ``drop`` per question, shared by its
    detectors, drops the same control for each. ``[N]``, NaN where the original is NaN or fewer
    than :data:`MIN_CONTROLS` controls are scored; ±inf stays ±inf."""
    original, controls, usable = _usable(original, controls)
    out = np.full(len(original), np.nan)
    complete = usable & ~np.isnan(controls).any(axis=1)
    if complete.any():  # every control scored: one vectorised pass
        rows, width = controls[complete], controls.shape[1]
        if drop is not None:
            gone = np.minimum((np.asarray(drop)[complete] * width).astype(np.int64), width - 1)
            keep = np.arange(width - 1)[None, :]
            rows = np.take_along_axis(rows, keep + (keep >= gone[:, None]), axis=1)
        with np.errstate(invalid="ignore"):
            out[complete] = original[complete] - np.median(rows, axis=1)
    for j in np.flatnonzero(usable & ~complete):
        scored = controls[j][~np.isnan(controls[j])]
        if drop is not None:
            scored = np.delete(scored, min(int(drop[j] * len(scored)), len(scored) - 1))
        with np.errstate(invalid="ignore"):
            out[j] = original[j] - np.median(scored)
    return out


def control_residuals(original: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """e_{j,k} = d(q_k,j) − median of the *other* scored controls of j (the original never enters,
    so a contaminated original cannot shift the null). ``[N, C]``, NaN where absent or unusable."""
    original, controls, usable = _usable(original, controls)
    out = np.full(controls.shape, np.nan)
    complete = usable & ~np.isnan(controls).any(axis=1)
    if complete.any() and controls.shape[1] > 1:  # every control scored: one vectorised pass
        rows = controls[complete]
        width = rows.shape[1]
        others = np.stack([np.delete(rows, k, axis=1) for k in range(width)], axis=1)  # [n, C, C − 1]
        with np.errstate(invalid="ignore"):
            out[complete] = rows - np.median(others, axis=2)
    for j in np.flatnonzero(usable & ~complete):
        scored = np.flatnonzero(~np.isnan(controls[j]))
        for k in scored:
            with np.errstate(invalid="ignore"):
                out[j, k] = controls[j, k] - np.median(controls[j, scored[scored != k]])
    return out


def conformal_pvalues(residuals: np.ndarray, null: np.ndarray, u: np.ndarray | None = None) -> np.ndarray:
    """Conformal p-values of ``residuals [N]`` against the ``null`` pool (NaN null residuals are not
    part of it; NaN stays NaN). With ``u`` (``[N]`` uniforms; SPEC §8.10's default):
    p = (#{null > e} + u·(1 + #{null = e})) / (1 + n_null) — exactly uniform under H0 and never
    1, so no detector can veto a question in a combination. Without: the deterministic
    (1 + #{null ≥ e}) / (1 + n_null) — valid, conservative with ties, and 1 for a question at the
    bottom of a coarse pool. ``[N]``."""
    e = np.asarray(residuals, dtype=np.float64)
    pool = np.sort(np.asarray(null, dtype=np.float64).ravel())
    pool = pool[~np.isnan(pool)]
    above = len(pool) - np.searchsorted(pool, e, side="right")  # #{null > e}
    ties = np.searchsorted(pool, e, side="right") - np.searchsorted(pool, e, side="left")
    draw = np.ones(len(e)) if u is None else np.asarray(u, dtype=np.float64)
    p = (above + draw * (1.0 + ties)) / (1.0 + len(pool))
    return np.where(np.isnan(e), np.nan, p)


def discrete(null: np.ndarray, share: float = 0.5) -> bool:
    """Whether a pool of residuals is coarse (fewer distinct values than ``share`` of its size):
    then the SPEC's residual of an original is not exchangeable with the pool's (see
    :func:`original_residuals`)."""
    pool = np.asarray(null, dtype=np.float64).ravel()
    pool = pool[~np.isnan(pool)]
    return len(pool) > 10 and len(np.unique(pool)) < share * len(pool)


def benjamini_hochberg(
    pvalues: np.ndarray, fdr: float, method: Literal["bh", "two-stage", "storey"] = "bh", storey_lambda: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """Decisions and q-values at level ``fdr`` over the non-NaN ``pvalues``: Benjamini–Hochberg
    (``bh``), Benjamini–Krieger–Yekutieli's two-stage adaptive BH (``two-stage``; both through
    ``statsmodels.stats.multitest``), or Storey's adaptive BH (``storey``): BH at ``fdr / π̂₀`` with
    π̂₀ = min(1, (1 + #{p > λ}) / (m (1 − λ))), the estimator with the +1 of Storey, Taylor &
    Siegmund (2004) that AdaDetect (Marandon et al. 2024) shows keeps the FDR for conformal
    p-values against one exchangeable calibration pool.
    Returns ``(flagged [N] bool, q_values [N], NaN where p is NaN)``."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=np.float64)
    flagged, q = np.zeros(len(p), dtype=bool), np.full(len(p), np.nan)
    tested = ~np.isnan(p)
    if not tested.any():
        return flagged, q
    if method == "storey":
        pi0 = storey_pi0(p[tested], storey_lambda)
        adjusted = np.minimum(1.0, multipletests(p[tested], alpha=fdr, method="fdr_bh")[1] * pi0)
        flagged[tested], q[tested] = adjusted <= fdr, adjusted
        return flagged, q
    reject, corrected, _, _ = multipletests(p[tested], alpha=fdr, method=FDR_METHODS[method])
    flagged[tested], q[tested] = reject, corrected
    return flagged, q


def storey_pi0(pvalues: np.ndarray, storey_lambda: float = 0.5) -> float:
    """Storey's estimate of the share of true nulls, with the +1 that makes adaptive BH valid:
    min(1, (1 + #{p > λ}) / (m (1 − λ)))."""
    m = len(pvalues)
    return min(1.0, (1.0 + float(np.sum(pvalues > storey_lambda))) / (m * (1.0 - storey_lambda)))


def combine_per_question(pvalues: dict[str, np.ndarray]) -> np.ndarray:
    """Per question, the Cauchy combination of its detectors' p-values (NaN ones left out;
    NaN when none is finite). ``{detector: [N]}`` → ``[N]``."""

    if not pvalues:
        return np.zeros(0)
    matrix = np.column_stack(list(pvalues.values()))
    return np.array([cauchy_combination(row) if np.isfinite(row).any() else math.nan for row in matrix])


def sum_test_pvalue(total: float, size: int, pool: int) -> float:
    """One-sided p-value of "these ``size`` p-values are small" from their sum ``total``, when under
    H0 each is a conformal p-value against one shared pool of ``pool`` nulls: uniform, with the
    pairwise covariance 1/(12(pool + 2)) a shared pool induces (the Wilcoxon–Mann–Whitney
    statistic of the set against the pool, on the p-value scale). The sum's deviation is divided
    by that inflation and read off the Irwin–Hall law (exact for independent uniforms) below 12
    values, a normal law from 12 on."""
    from scipy.stats import norm

    if size == 0:
        return 1.0
    inflation = math.sqrt(1.0 + (size - 1) / (pool + 2.0))
    centred = size / 2.0 + (total - size / 2.0) / inflation
    if size >= 12:
        return float(norm.cdf((centred - size / 2.0) / math.sqrt(size / 12.0)))
    x = min(max(centred, 0.0), float(size))
    return float(
        sum((-1) ** k * math.comb(size, k) * (x - k) ** size for k in range(int(math.floor(x)) + 1))
        / math.factorial(size)
    )


def at_least(pvalues: np.ndarray, pool: int, alpha: float = 0.05) -> int:
    """A lower (1 − ``alpha``) confidence bound on how many of the questions are not null
    (contaminated): conformalized closed testing (after Magnani, Sesia & Solari 2023) with the sum
    test of :func:`sum_test_pvalue` as local test. A set of questions can be all null unless its
    p-values are jointly too small; the largest set the local test keeps is the ``h`` largest
    p-values (the test depends on a set through its sum and size only), so every set of more than
    ``h`` questions holds a contaminated one, and at least ``m − h`` of the ``m`` are. NaN
    p-values are not counted. ``pool``: the smallest null pool behind the p-values."""
    p = np.sort(np.asarray(pvalues, dtype=np.float64))
    p = p[~np.isnan(p)][::-1]  # largest first
    totals = np.cumsum(p)
    kept = [i for i in range(1, len(p) + 1) if sum_test_pvalue(float(totals[i - 1]), i, pool) > alpha]
    return len(p) - (max(kept) if kept else 0)


def bonferroni_per_question(pvalues: np.ndarray) -> np.ndarray:
    """Per question (row of ``[N, K]``), min(1, k · min p) over its k finite p-values (NaN when
    none): valid under any dependence, and a p-value near 1 cannot veto the others."""
    p = np.asarray(pvalues, dtype=np.float64).reshape(len(pvalues), -1)
    finite = np.isfinite(p)
    k = finite.sum(axis=1)
    smallest = np.where(finite, p, 1.0).min(axis=1)
    return np.where(k > 0, np.minimum(1.0, k * smallest), np.nan)
