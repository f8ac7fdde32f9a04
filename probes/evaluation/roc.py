"""ROC points and the figures read off them, for many score vectors at once (SPEC §7).

Rows of ``[B, n]`` arrays are independent datasets (the observed one, or bootstrap resamples);
everything is vectorised over rows.

Conventions:

* Members (label 1) are positive; a sample is predicted a member when score ≥ threshold.
* ROC points are the (FPR, TPR) pairs of every distinct threshold, plus (0, 0) at +∞; tied
  scores enter and leave together, so ROC-AUC counts a tie as one half (as scikit-learn does).
* TPR@FPR=α is the largest TPR among ROC points with FPR ≤ α (``strict``: FPR < α).
* The Youden point maximises TPR − FPR (compared exactly, in integers); among tied points the
  highest threshold wins. F1 and accuracy are taken at that point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RocPoints:
    """ROC points of B datasets, ``[B, n+1]`` each (column 0 is the +∞ threshold).

    Points inside a group of tied scores repeat the group's end point, so every column is a
    real ROC point and the arrays stay rectangular.
    """

    tp: np.ndarray
    fp: np.ndarray
    threshold: np.ndarray
    n_pos: np.ndarray  # [B]
    n_neg: np.ndarray  # [B]

    @property
    def tpr(self) -> np.ndarray:
        return self.tp / self.n_pos[:, None]

    @property
    def fpr(self) -> np.ndarray:
        return self.fp / self.n_neg[:, None]


def roc_points(labels: np.ndarray, scores: np.ndarray) -> RocPoints:
    """ROC points of each row of ``labels`` [B, n] (bool/0-1) and ``scores`` [B, n] (finite)."""
    labels = np.atleast_2d(np.asarray(labels)).astype(bool)
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    order = np.argsort(-scores, axis=1, kind="stable")
    s = np.take_along_axis(scores, order, axis=1)
    y = np.take_along_axis(labels, order, axis=1)
    tp = np.cumsum(y, axis=1, dtype=np.int64)
    fp = np.cumsum(~y, axis=1, dtype=np.int64)
    group_end = np.ones_like(y)
    group_end[:, :-1] = s[:, :-1] != s[:, 1:]
    tp = _fill_from_group_end(tp, group_end)
    fp = _fill_from_group_end(fp, group_end)
    b = len(s)
    zeros = np.zeros((b, 1), dtype=np.int64)
    return RocPoints(
        tp=np.hstack([zeros, tp]),
        fp=np.hstack([zeros, fp]),
        threshold=np.hstack([np.full((b, 1), np.inf), s]),
        n_pos=tp[:, -1].astype(np.float64),
        n_neg=fp[:, -1].astype(np.float64),
    )


def _fill_from_group_end(counts: np.ndarray, group_end: np.ndarray) -> np.ndarray:
    """Replace each count by the count at the end of its tie group (counts never decrease, so
    that is the smallest count at a group end from here on)."""
    big = np.iinfo(np.int64).max
    marked = np.where(group_end, counts, big)
    return np.minimum.accumulate(marked[:, ::-1], axis=1)[:, ::-1]


def auc(points: RocPoints) -> np.ndarray:
    """ROC-AUC ``[B]`` by the trapezoid rule over the ROC points."""
    fpr, tpr = points.fpr, points.tpr
    return np.sum(np.diff(fpr, axis=1) * (tpr[:, 1:] + tpr[:, :-1]) / 2.0, axis=1)


def tpr_at_fpr(points: RocPoints, fpr: float = 0.05, strict: bool = False) -> np.ndarray:
    """Largest TPR ``[B]`` among ROC points with FPR ≤ ``fpr`` (``strict``: < ``fpr``)."""
    rates = points.fpr
    allowed = rates < fpr if strict else rates <= fpr
    return np.max(np.where(allowed, points.tpr, 0.0), axis=1)


@dataclass(frozen=True)
class YoudenPoint:
    """The Youden operating point of B datasets (each field ``[B]``)."""

    threshold: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray
    f1: np.ndarray
    accuracy: np.ndarray


def youden(points: RocPoints) -> YoudenPoint:
    """Threshold maximising TPR − FPR (highest threshold among ties), and F1/accuracy there."""
    # TPR − FPR compared exactly: tp·n_neg − fp·n_pos (integers)
    j = points.tp * points.n_neg[:, None].astype(np.int64) - points.fp * points.n_pos[:, None].astype(np.int64)
    best = np.argmax(j, axis=1)[:, None]
    tp = np.take_along_axis(points.tp, best, axis=1)[:, 0].astype(np.float64)
    fp = np.take_along_axis(points.fp, best, axis=1)[:, 0].astype(np.float64)
    fn = points.n_pos - tp
    tn = points.n_neg - fp
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    return YoudenPoint(
        threshold=np.take_along_axis(points.threshold, best, axis=1)[:, 0],
        tpr=tp / points.n_pos,
        fpr=fp / points.n_neg,
        f1=f1,
        accuracy=(tp + tn) / (points.n_pos + points.n_neg),
    )
