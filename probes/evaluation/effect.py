"""Effect sizes between members and non-members per metric and layer (SPEC §7, LaRA seed A.7).

Values are the compressed metrics m̃ = sign(m)·log(1 + |m|) the protocol standardises, so a few
heavy-tailed samples do not dominate the means.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .bootstrap import percentile_interval, stratified_indices


def cohens_d(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Cohen's d of members minus non-members for each column of ``values`` [n, ...].

    d = (mean₁ − mean₀) / s_pooled, s_pooled² = ((n₁−1)s₁² + (n₀−1)s₀²) / (n₁ + n₀ − 2), sample
    variances with ddof 1. Non-finite entries are left out column by column; a column without
    two samples per class, or with zero pooled variance, gives NaN.
    """
    values = np.asarray(values, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    (n1, m1, v1), (n0, m0, v0) = _moments(values[labels]), _moments(values[~labels])
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = np.sqrt(((n1 - 1) * v1 + (n0 - 1) * v0) / (n1 + n0 - 2))
        out = (m1 - m0) / pooled
    bad = (n1 < 2) | (n0 < 2) | ~(pooled > 0)
    return np.where(bad, np.nan, out)


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Count, mean and ddof-1 variance over axis 0, ignoring non-finite entries."""
    ok = np.isfinite(x)
    n = ok.sum(axis=0).astype(np.float64)
    xz = np.where(ok, x, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = xz.sum(axis=0) / n
        var = np.where(ok, (x - mean) ** 2, 0.0).sum(axis=0) / (n - 1)
    return n, mean, var


def cohens_d_ci(
    values: np.ndarray, labels: np.ndarray, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cohen's d ``[...]`` of ``values`` [n, ...] with stratified-bootstrap percentile CIs (lo, hi)."""
    values = np.asarray(values, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    point = cohens_d(values, labels)
    rng = np.random.default_rng(seed)
    draws = np.array([cohens_d(values[idx], labels[idx]) for idx in stratified_indices(labels, n_resamples, rng)])
    lo, hi = percentile_interval(draws, level)
    return point, lo, hi


def group_means_ci(
    values: np.ndarray, labels: np.ndarray, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, dict[str, np.ndarray]]:
    """Per class (``members``, ``non_members``): mean of ``values`` [n, ...] over finite samples and
    a bootstrap percentile CI of that mean (each ``[...]``)."""
    values = np.asarray(values, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, mask in (("members", labels), ("non_members", ~labels)):
        group = values[mask]
        _, mean, _ = _moments(group)
        if len(group):
            idx = rng.integers(0, len(group), size=(n_resamples, len(group)))
            lo, hi = percentile_interval(np.array([_moments(group[row])[1] for row in idx]), level)
        else:
            lo = hi = np.full(mean.shape, np.nan)
        out[name] = {"mean": mean, "ci_low": lo, "ci_high": hi, "n": np.isfinite(group).sum(axis=0)}
    return out


def window_means(values: np.ndarray, layer_sets: Sequence[Sequence[int]]) -> np.ndarray:
    """Per-sample mean of ``values`` [n, 3, L] over each layer set: ``[n, 3, len(layer_sets)]``."""
    return np.stack([values[:, :, list(cols)].mean(axis=2) for cols in layer_sets], axis=2)
