"""DeLong's test for two correlated ROC-AUCs on the same samples (DeLong, DeLong &
Clarke-Pearson 1988), with the midrank computation of Sun & Xu (2014): O(n log n)."""

from __future__ import annotations

import math

import numpy as np


def midranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x`` [n], ties sharing the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    n = len(x)
    # start/end of each tie run
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], n]
    ranks_sorted = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    out = np.empty(n)
    out[order] = ranks_sorted
    return out


def placements(positives: np.ndarray, negatives: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """AUC and the structural components V10 [m] (per member) and V01 [n] (per non-member)."""
    m, n = len(positives), len(negatives)
    tz = midranks(np.concatenate([positives, negatives]))
    tx, ty = midranks(positives), midranks(negatives)
    v10 = (tz[:m] - tx) / n
    v01 = 1.0 - (tz[m:] - ty) / m
    auc = (tz[:m].sum() - m * (m + 1) / 2.0) / (m * n)
    return float(auc), v10, v01


def delong_test(labels: np.ndarray, scores_a: np.ndarray, scores_b: np.ndarray) -> dict[str, float]:
    """Two-sided DeLong test of AUC(a) = AUC(b).

    Returns:
        ``auc_a``, ``auc_b``, ``delta`` (a − b), ``se`` of the difference, ``z`` and ``p_value``.
    """
    labels = np.asarray(labels).astype(bool)
    a, b = np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, dtype=np.float64)
    auc_a, v10_a, v01_a = placements(a[labels], a[~labels])
    auc_b, v10_b, v01_b = placements(b[labels], b[~labels])
    m, n = int(labels.sum()), int((~labels).sum())
    if m < 2 or n < 2:
        raise ValueError("DeLong's test needs at least 2 members and 2 non-members")
    s10 = np.cov(np.vstack([v10_a, v10_b]))
    s01 = np.cov(np.vstack([v01_a, v01_b]))
    cov = s10 / m + s01 / n
    var = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    delta = auc_a - auc_b
    se = math.sqrt(max(var, 0.0))
    if se == 0.0:
        z = 0.0 if delta == 0.0 else math.copysign(math.inf, delta)
    else:
        z = delta / se
    return {
        "auc_a": auc_a,
        "auc_b": auc_b,
        "delta": delta,
        "se": se,
        "z": z,
        "p_value": math.erfc(abs(z) / math.sqrt(2.0)),
    }
