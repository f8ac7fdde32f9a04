"""The statistics of the calibrated, label-free audit (SPEC §8), as pure functions of one detector's
scores on the original questions and on their matched controls (higher = member).

Shapes: ``original [N]``, ``controls [N, C]`` with NaN where a question has fewer valid controls.
A question with fewer than 2 valid controls (or a non-finite original score) is left out (NaN).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..evaluate.bootstrap import percentile_interval
from ..robust import ZeroScaleRecord, robust_scale

MIN_CONTROLS = 2


def _valid(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    original = np.asarray(original, dtype=np.float64)
    controls = np.asarray(controls, dtype=np.float64).reshape(len(original), -1)
    ok = np.isfinite(controls)
    usable = np.isfinite(original) & (ok.sum(axis=1) >= MIN_CONTROLS)
    return original, controls, usable


def within_ranks(original: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """r_j = (#{i: s_i < s_0} + ½·#{i: s_i = s_0}) / C_j over question j's valid controls: the
    original's AUC against its own controls. ``[N]``, NaN where unusable."""
    original, controls, usable = _valid(original, controls)
    ok = np.isfinite(controls)
    below = ((controls < original[:, None]) & ok).sum(axis=1)
    ties = ((controls == original[:, None]) & ok).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (below + 0.5 * ties) / ok.sum(axis=1)
    return np.where(usable, r, np.nan)


def calibrated_scores(original: np.ndarray, controls: np.ndarray, tol: float = 1e-8) -> tuple[np.ndarray, ZeroScaleRecord]:
    """``<det>@cal``: δ_j = s(q_0,j) − median_i s(q_i,j), divided by σ̂, the normalised MAD (with
    SPEC §6's zero-scale rule) of every valid control's deviation from its own question's control
    median, pooled over the usable questions. ``[N]`` (NaN where unusable) and the rule's record."""
    original, controls, usable = _valid(original, controls)
    record = ZeroScaleRecord()
    out = np.full(len(original), np.nan)
    if not usable.any():
        return out, record
    medians = np.full(len(original), np.nan)
    medians[usable] = np.nanmedian(controls[usable], axis=1)
    deviations = (controls - medians[:, None])[usable]
    pooled = deviations[np.isfinite(deviations)]
    fitted = robust_scale(pooled[:, None], tol=tol)
    record.add(["controls"], fitted)
    scale = float(fitted.scale[0])
    if scale > tol:
        out[usable] = (original[usable] - medians[usable]) / scale
    return out, record


def permutation_test(original: np.ndarray, controls: np.ndarray, n_permutations: int = 10_000, seed: int = 0,
                     chunk: int = 1000) -> tuple[float, float]:
    """T = mean_j r_j and its one-sided p-value by permutation within questions: under H0 each
    question's original is exchangeable with its controls, so the 'original' is reassigned
    uniformly among its 1 + C_j texts; p = (1 + #{T_b ≥ T}) / (1 + B). Exact in size whatever the
    differences between questions. Returns (T, p); (NaN, NaN) without usable questions."""
    original, controls, usable = _valid(original, controls)
    if not usable.any():
        return math.nan, math.nan
    texts = [np.concatenate([[o], c[np.isfinite(c)]]) for o, c in zip(original[usable], controls[usable])]
    width = max(len(t) for t in texts)
    # rank_as_original[j, k]: question j's within-rank if its text k were the original (NaN padding)
    table = np.full((len(texts), width), np.nan)
    for j, t in enumerate(texts):
        others = t[None, :] - t[:, None]  # [k, i]: s_i − s_k
        np.fill_diagonal(others, np.nan)
        below = (others < 0).sum(axis=1)
        ties = (others == 0).sum(axis=1)
        table[j, : len(t)] = (below + 0.5 * ties) / (len(t) - 1)
    observed = float(table[:, 0].mean())
    sizes = np.array([len(t) for t in texts])
    rng = np.random.default_rng(seed)
    rows = np.arange(len(texts))
    exceed = 0
    for start in range(0, n_permutations, chunk):
        b = min(chunk, n_permutations - start)
        picks = (rng.random((b, len(texts))) * sizes).astype(np.int64)  # uniform over each question's texts
        exceed += int((table[rows, picks].mean(axis=1) >= observed - 1e-12).sum())
    return observed, (1 + exceed) / (1 + n_permutations)


def question_pvalues(original: np.ndarray, controls: np.ndarray, seed: int = 0) -> np.ndarray:
    """p_j = (#{i: s_i > s_0} + U·(1 + #{i: s_i = s_0})) / (1 + C_j), U ~ uniform(0, 1) seeded:
    randomised ties, so p_j is uniform under H0. ``[N]``, NaN where unusable."""
    original, controls, usable = _valid(original, controls)
    ok = np.isfinite(controls)
    above = ((controls > original[:, None]) & ok).sum(axis=1)
    ties = ((controls == original[:, None]) & ok).sum(axis=1)
    u = np.random.default_rng(seed).random(len(original))
    p = (above + u * (1 + ties)) / (1 + ok.sum(axis=1))
    return np.where(usable, p, np.nan)


def storey_pi1(pvalues: np.ndarray, lam: float = 0.5) -> float:
    """Storey's lower bound on the share of non-null questions: max(0, 1 − #{p > λ} / (m(1 − λ)))."""
    p = np.asarray(pvalues, dtype=np.float64)
    p = p[np.isfinite(p)]
    if not len(p):
        return math.nan
    return max(0.0, 1.0 - float((p > lam).sum()) / (len(p) * (1.0 - lam)))


def bootstrap_ci(values: np.ndarray, statistic, n_resamples: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of ``statistic`` over questions resampled with replacement (finite values only)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(v), size=(n_resamples, len(v)))
    draws = np.array([statistic(v[row]) for row in idx])
    lo, hi = percentile_interval(draws, level)
    return float(lo), float(hi)


def cauchy_combination(pvalues: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """Cauchy combination test (Liu & Xie 2020), valid under arbitrary dependence:
    T = Σ w_i tan((0.5 − p_i)π) with Σ w_i = 1, p = 0.5 − arctan(T)/π. Non-finite p-values are
    left out. Very small p-values use tan((0.5 − p)π) ≈ 1/(pπ) to avoid overflow."""
    p = np.asarray(pvalues, dtype=np.float64)
    w = np.ones_like(p) if weights is None else np.asarray(weights, dtype=np.float64)
    keep = np.isfinite(p)
    if not keep.any():
        return math.nan
    p, w = np.clip(p[keep], 0.0, 1.0), w[keep] / w[keep].sum()
    if (p == 0).any():
        return 0.0
    terms = np.where(p < 1e-15, 1.0 / (p * math.pi), np.tan((0.5 - p) * math.pi))
    t = float((w * terms).sum())
    return float(0.5 - math.atan(t) / math.pi) if t < 1e15 else 1.0 / (t * math.pi)


def bonferroni(pvalues: Sequence[float]) -> float:
    """min(1, k · min p) over the k finite p-values."""
    p = np.asarray(pvalues, dtype=np.float64)
    p = p[np.isfinite(p)]
    return math.nan if not len(p) else float(min(1.0, len(p) * p.min()))


def mann_whitney_greater(audited: np.ndarray, clean: np.ndarray) -> tuple[float, float]:
    """One-sided Mann–Whitney: are ``audited`` values stochastically larger than ``clean`` ones?
    Returns (AUC = U / (n₁n₀), p-value); scipy's, with its tie correction."""
    from scipy.stats import mannwhitneyu

    a, c = (np.asarray(x, dtype=np.float64) for x in (audited, clean))
    a, c = a[np.isfinite(a)], c[np.isfinite(c)]
    if not len(a) or not len(c):
        return math.nan, math.nan
    result = mannwhitneyu(a, c, alternative="greater")
    return float(result.statistic) / (len(a) * len(c)), float(result.pvalue)


def empirical_pvalues(audited: np.ndarray, clean: np.ndarray, seed: int = 0) -> np.ndarray:
    """Per audited value, its randomised p-value against the clean values:
    (#{c > a} + U·(1 + #{c = a})) / (1 + n_clean) — uniform under H0 (audited drawn like clean)."""
    a = np.asarray(audited, dtype=np.float64)
    c = np.asarray(clean, dtype=np.float64)
    c = c[np.isfinite(c)]
    above = (c[None, :] > a[:, None]).sum(axis=1)
    ties = (c[None, :] == a[:, None]).sum(axis=1)
    u = np.random.default_rng(seed).random(len(a))
    p = (above + u * (1 + ties)) / (1 + len(c))
    return np.where(np.isfinite(a), p, np.nan)
