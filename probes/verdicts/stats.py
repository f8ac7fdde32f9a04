"""The statistics of the calibrated, label-free audit (SPEC §8), as pure functions of one detector's
scores on the original questions and on their matched controls (higher = member).

Shapes: ``original [N]``, ``controls [N, C]`` with NaN where a question has fewer valid controls.
A question with fewer than 2 scored controls (or an original scored NaN) is left out (NaN) and
counted (:func:`left_out`). ±inf are scores like any other: an original scored +inf (a perfectly
predicted question, the strongest member evidence) ranks above all its controls.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from ..evaluation.bootstrap import percentile_interval
from ..robust import ZeroScaleRecord, robust_scale

MIN_CONTROLS = 2


def _valid(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    original = np.asarray(original, dtype=np.float64)
    controls = np.asarray(controls, dtype=np.float64).reshape(len(original), -1)
    ok = ~np.isnan(controls)
    usable = ~np.isnan(original) & (ok.sum(axis=1) >= MIN_CONTROLS)
    return original, controls, usable


def left_out(
    original: np.ndarray, controls: np.ndarray | None = None, min_controls: int = MIN_CONTROLS
) -> dict[str, int]:
    """Questions a statistic leaves out, by reason: ``nan_score`` (the original scored NaN) and
    ``too_few_controls`` (fewer than ``min_controls`` controls with a score)."""
    original = np.asarray(original, dtype=np.float64)
    out = {"nan_score": int(np.isnan(original).sum())}
    if controls is not None:
        scored = (~np.isnan(np.asarray(controls, dtype=np.float64).reshape(len(original), -1))).sum(axis=1)
        out["too_few_controls"] = int((~np.isnan(original) & (scored < min_controls)).sum())
    return out


def first_controls(controls: np.ndarray, width: int) -> np.ndarray:
    """``[N, width]``: each row's first ``width`` controls with a score, in index order; a row with
    fewer is all NaN. Gives every question the same number of controls (the relative mode's
    statistics must have one null distribution on both sides)."""
    controls = np.asarray(controls, dtype=np.float64)
    out = np.full((len(controls), width), np.nan)
    for j, row in enumerate(controls):
        scored = row[~np.isnan(row)]
        if len(scored) >= width:
            out[j] = scored[:width]
    return out


def all_tied(original: np.ndarray, controls: np.ndarray) -> bool:
    """Whether every usable question's original ties with all its scored controls: then no
    permutation can change anything, the test carries no information (p would be 1), and the
    detector is left out of a combination (a constant detector, e.g. a model's drift from itself)."""
    original, controls, usable = _valid(original, controls)
    return bool(usable.any()) and all(
        bool((row[~np.isnan(row)] == o).all()) for o, row in zip(original[usable], controls[usable])
    )


def within_ranks(original: np.ndarray, controls: np.ndarray) -> np.ndarray:
    """r_j = (#{i: s_i < s_0} + ½·#{i: s_i = s_0}) / C_j over question j's valid controls: the
    original's AUC against its own controls. ``[N]``, NaN where unusable."""
    original, controls, usable = _valid(original, controls)
    ok = ~np.isnan(controls)
    below = ((controls < original[:, None]) & ok).sum(axis=1)
    ties = ((controls == original[:, None]) & ok).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (below + 0.5 * ties) / ok.sum(axis=1)
    return np.where(usable, r, np.nan)


def calibrated_scores(
    original: np.ndarray, controls: np.ndarray, tol: float = 1e-8
) -> tuple[np.ndarray, ZeroScaleRecord]:
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
    fitted = pooled_control_scale(controls[usable], tol)
    if fitted is None:
        return out, record
    record.add(["controls"], fitted)
    scale = float(fitted.scale[0])
    if scale > tol:
        with np.errstate(invalid="ignore"):
            out[usable] = (original[usable] - medians[usable]) / scale  # ±inf stays ±inf (ranked first or last)
    return out, record


def pooled_control_scale(controls: np.ndarray, tol: float = 1e-8) -> Any:
    """SPEC §8.2's σ̂: the normalised MAD (zero-scale rule) of every scored control's deviation from
    its own question's control median, pooled over the questions of ``controls`` ``[N, C]``; None
    without a finite deviation. Returns the fitted :class:`~probes.robust.RobustScale`."""
    controls = np.asarray(controls, dtype=np.float64)
    if not len(controls) or np.isnan(controls).all():
        return None
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row without a scored control
        deviations = controls - np.nanmedian(controls, axis=1)[:, None]
    pooled = deviations[np.isfinite(deviations)]  # an infinite control has no finite deviation to scale by
    return robust_scale(pooled[:, None], tol=tol) if len(pooled) else None


def rank_table(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(usable [N], table [n_usable, 1 + C])``: ``table[j, k]`` is usable question j's within-rank
    if its text k (0 = the original, then its scored controls) were the original — the null
    distribution of r_j (NaN padding). Comparisons, not differences, so ±inf scores rank."""
    original, controls, usable = _valid(original, controls)
    texts = [np.concatenate([[o], c[~np.isnan(c)]]) for o, c in zip(original[usable], controls[usable])]
    table = np.full((len(texts), max((len(t) for t in texts), default=1)), np.nan)
    for j, t in enumerate(texts):
        others = ~np.eye(len(t), dtype=bool)  # [k, i]: text i is another text than k
        below = ((t[None, :] < t[:, None]) & others).sum(axis=1)
        ties = ((t[None, :] == t[:, None]) & others).sum(axis=1)
        table[j, : len(t)] = (below + 0.5 * ties) / (len(t) - 1)
    return usable, table


def permutation_test(
    original: np.ndarray, controls: np.ndarray, n_permutations: int = 10_000, seed: int = 0, chunk: int = 1000
) -> tuple[float, float]:
    """T = mean_j r_j and its one-sided p-value by permutation within questions: under H0 each
    question's original is exchangeable with its controls, so the 'original' is reassigned
    uniformly among its 1 + C_j texts; p = (1 + #{T_b ≥ T}) / (1 + B). Exact in size whatever the
    differences between questions. Returns (T, p); (NaN, NaN) without usable questions."""
    usable, table = rank_table(original, controls)
    if not usable.any():
        return math.nan, math.nan
    observed = float(table[:, 0].mean())
    sizes = (~np.isnan(table)).sum(axis=1)
    rng = np.random.default_rng(seed)
    rows = np.arange(len(table))
    exceed = 0
    for start in range(0, n_permutations, chunk):
        b = min(chunk, n_permutations - start)
        picks = (rng.random((b, len(table))) * sizes).astype(np.int64)  # uniform over each question's texts
        exceed += int((table[rows, picks].mean(axis=1) >= observed - 1e-12).sum())
    return observed, (1 + exceed) / (1 + n_permutations)


def question_pvalues(original: np.ndarray, controls: np.ndarray, seed: int = 0) -> np.ndarray:
    """p_j = (#{i: s_i > s_0} + U·(1 + #{i: s_i = s_0})) / (1 + C_j), U ~ uniform(0, 1) seeded:
    randomised ties, so p_j is uniform under H0. ``[N]``, NaN where unusable."""
    original, controls, usable = _valid(original, controls)
    ok = ~np.isnan(controls)
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


def bootstrap_ci(
    values: np.ndarray, statistic, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile CI of ``statistic`` over questions resampled with replacement (finite values only)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
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


def mann_whitney_greater(
    audited: np.ndarray, clean: np.ndarray, n_permutations: int = 10_000, seed: int = 0, chunk: int = 1000
) -> tuple[float, float]:
    """One-sided Mann–Whitney by permutation: are ``audited`` values stochastically larger than
    ``clean`` ones? The statistic is U (mid-ranks for ties); its p-value is (1 + #{U_b ≥ U}) /
    (1 + B) over B seeded reassignments of the pooled values to the two groups: exact in size under
    H0 (both drawn alike) at any sample size and with any ties, where the normal approximation is
    not (2–3 clean questions, discrete within-ranks). Returns (AUC = U / (n₁n₀), p); NaN values
    are left out (counted by the caller), ±inf rank."""
    from scipy.stats import rankdata

    a, c = (np.asarray(x, dtype=np.float64) for x in (audited, clean))
    a, c = a[~np.isnan(a)], c[~np.isnan(c)]
    if not len(a) or not len(c):
        return math.nan, math.nan
    ranks = rankdata(np.concatenate([a, c]))
    shift = len(a) * (len(a) + 1) / 2
    observed = ranks[: len(a)].sum() - shift
    rng = np.random.default_rng(seed)
    exceed = 0
    for start in range(0, n_permutations, chunk):
        b = min(chunk, n_permutations - start)
        picks = rng.permuted(np.tile(np.arange(len(ranks)), (b, 1)), axis=1)[:, : len(a)]
        exceed += int((ranks[picks].sum(axis=1) - shift >= observed - 1e-9).sum())
    return float(observed) / (len(a) * len(c)), (1 + exceed) / (1 + n_permutations)


def empirical_pvalues(audited: np.ndarray, clean: np.ndarray, seed: int = 0) -> np.ndarray:
    """Per audited value, its randomised p-value against the clean values:
    (#{c > a} + U·(1 + #{c = a})) / (1 + n_clean) — uniform under H0 (audited drawn like clean)."""
    a = np.asarray(audited, dtype=np.float64)
    c = np.asarray(clean, dtype=np.float64)
    c = c[~np.isnan(c)]
    above = (c[None, :] > a[:, None]).sum(axis=1)
    ties = (c[None, :] == a[:, None]).sum(axis=1)
    u = np.random.default_rng(seed).random(len(a))
    p = (above + u * (1 + ties)) / (1 + len(c))
    return np.where(np.isnan(a), np.nan, p)
