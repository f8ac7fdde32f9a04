"""Stratified bootstrap: resample members and non-members separately, so every resample keeps
the observed class counts (and both classes)."""

from __future__ import annotations

import warnings

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
MAX_CELLS = 4_000_000  # resamples × samples per block: bounds the int64 work arrays to ~32 MB each


def stratified_indices(labels: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``[n_resamples, n]`` row indices; members first, then non-members, each drawn with replacement
    from its own class."""
    labels = np.asarray(labels).astype(bool)
    pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
    return np.hstack(
        [
            pos[rng.integers(0, len(pos), size=(n_resamples, len(pos)))],
            neg[rng.integers(0, len(neg), size=(n_resamples, len(neg)))],
        ]
    )


def blocks(n_resamples: int, n: int) -> list[int]:
    """Resample counts per block so a block holds at most :data:`MAX_CELLS` cells."""
    per = max(1, MAX_CELLS // max(n, 1))
    return [min(per, n_resamples - start) for start in range(0, n_resamples, per)]


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 of bootstrap draws ``[B, ...]``; non-finite draws are
    ignored, and a cell without finite draws gets NaN bounds."""
    tail = 100.0 * (1.0 - level) / 2.0
    draws = np.where(np.isfinite(draws), draws, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells
        return np.nanpercentile(draws, tail, axis=0), np.nanpercentile(draws, 100.0 - tail, axis=0)


def percentile_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of one figure's bootstrap values ``[B]``."""
    lo, hi = percentile_interval(np.asarray(values, dtype=np.float64), level)
    return (float(lo), float(hi))
