"""Fusion of several detectors' scores into one (SPEC §6); every input and output is oriented
higher = member.

* ``robust_z``: each detector standardised by a clean reference's median and 1.4826·MAD, then a
  (weighted) mean. A sample in the reference is standardised by a reference without its fold,
  as in the LaRA protocol. A zero MAD falls back to √(π/2)·mean |x − median| and a column
  constant on the reference is left out (SPEC §6, :mod:`probes.robust`); both are recorded.
* ``rank_mix``: Σ w_j · pct-rank(score_j), ranks over the scored samples (β·A + (1−β)·B for two).
* ``stacking``: logistic regression on the detectors' scores, cross-validated so no sample is
  scored by a model that saw its label.

A sample with a non-finite score in any fused column gets NaN.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from .errors import ConfigError, InputError
from .lara.protocol import fold_assignment
from .robust import ZeroScaleRecord, robust_scale
from .scores import CLEAN_SPLIT, ScoreTable, align_labels

METHODS = ("robust-z", "rank-mix", "stacking")


@dataclass(frozen=True)
class FusionSpec:
    """One fused score column (``lara fuse``)."""

    detectors: tuple[str, ...]
    name: str | None = None
    method: Literal["robust-z", "rank-mix", "stacking"] = "robust-z"
    weights: tuple[float, ...] = ()
    clean_ref: Literal["split", "crossfit", "all"] | None = None
    folds: int = 5
    seed: int = 0

    def column(self) -> str:
        return self.name or "+".join(self.detectors)


def robust_z_fusion(
    scores: np.ndarray,
    reference: np.ndarray,
    keys: list[str] | None = None,
    weights: np.ndarray | None = None,
    n_folds: int = 5,
    seed: int = 0,
    eps: float = 1e-8,
    names: Sequence[str] | None = None,
) -> tuple[np.ndarray, ZeroScaleRecord]:
    """Weighted mean over detectors of (s − median) / (scale + ε), with SPEC §6's zero-scale rule.

    Args:
        scores: ``[N, D]`` scores of N samples under D detectors.
        reference: ``[N]`` bool, the clean samples whose medians and scales standardise.
        keys: ``[N]`` sample identities for the fold assignment (default: row numbers).
        weights: ``[D]`` non-negative weights (default: equal).
        n_folds: reference samples are standardised by the reference without their fold.
        names: ``[D]`` column names for the record (default: ``"0"``, ``"1"``…).

    Returns:
        ``[N]`` fused scores and the record of fallback scales and constant (left-out) columns.
        scale = 1.4826·MAD, or √(π/2)·mean |x − median| where the MAD is 0; a column constant
        on a sample's reference is left out of that sample's mean (weights renormalised).
    """
    scores = np.asarray(scores, dtype=np.float64)
    reference = np.asarray(reference, dtype=bool)
    n, d = scores.shape
    w = _weights(weights, d)
    names = list(names) if names is not None else [str(j) for j in range(d)]
    pool = np.flatnonzero(reference & np.isfinite(scores).all(axis=1))
    if len(pool) < 3:
        raise InputError(
            f"robust-z fusion needs at least 3 clean reference samples with finite scores; have {len(pool)}"
        )
    keys = keys if keys is not None else [str(i) for i in range(n)]
    folds = fold_assignment([keys[i] for i in pool], n_folds, seed)
    z = np.empty_like(scores)
    used = np.empty(scores.shape, dtype=bool)
    record = ZeroScaleRecord()
    fold_of = np.array([folds.get(keys[i], -1) if reference[i] else -1 for i in range(n)])
    pool_fold = np.array([folds[keys[i]] for i in pool])
    for fold in np.unique(fold_of):
        rows = fold_of == fold
        fitted = robust_scale(scores[pool if fold < 0 else pool[pool_fold != fold]], tol=eps)
        record.add(names, fitted)
        z[rows] = (scores[rows] - fitted.center) / (fitted.scale + eps)
        used[rows] = ~fitted.constant
    total = used @ w
    if not (total > 0).all():
        raise InputError(
            f"robust-z fusion: every column is constant on the clean reference ({', '.join(names)}); "
            "nothing is left to fuse"
        )
    return (np.where(used, z, 0.0) * w).sum(axis=1) / total, record


def robust_z_mean(*args: Any, **kwargs: Any) -> np.ndarray:
    """The fused ``[N]`` scores of :func:`robust_z_fusion` (same arguments), without the record."""
    return robust_z_fusion(*args, **kwargs)[0]


def rank_mix(scores: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ w_j · pct-rank(score_j) with w summing to 1; pct-rank = average rank / n among the
    samples with finite scores in every column (ties share their mean rank)."""
    from scipy.stats import rankdata

    scores = np.asarray(scores, dtype=np.float64)
    w = _weights(weights, scores.shape[1])
    ok = np.isfinite(scores).all(axis=1)
    out = np.full(len(scores), np.nan)
    if ok.any():
        ranks = np.column_stack([rankdata(scores[ok, j]) / ok.sum() for j in range(scores.shape[1])])
        out[ok] = ranks @ w
    return out


def stacking(scores: np.ndarray, labels: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Out-of-fold P(member) of a logistic regression on standardised scores (stratified k-fold):
    every sample is scored by a model fitted without it. Unlabelled samples (label −1) are
    scored by the model fitted on all labelled ones."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    ok = np.isfinite(scores).all(axis=1)
    known = ok & (labels >= 0)
    y = labels[known].astype(int)
    if min((y == 1).sum(), (y == 0).sum()) < n_folds:
        raise InputError(
            f"stacking with {n_folds} folds needs at least {n_folds} members and {n_folds} non-members with finite scores"
        )
    out = np.full(len(scores), np.nan)
    x = scores[known]
    oof = np.empty(len(y))
    for train, test in StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(x, y):
        model = make_pipeline(StandardScaler(), LogisticRegression()).fit(x[train], y[train])
        oof[test] = model.predict_proba(x[test])[:, 1]
    out[known] = oof
    unlabelled = ok & (labels < 0)
    if unlabelled.any():
        model = make_pipeline(StandardScaler(), LogisticRegression()).fit(x, y)
        out[unlabelled] = model.predict_proba(scores[unlabelled])[:, 1]
    return out


def _weights(weights: np.ndarray | None, d: int) -> np.ndarray:
    if weights is None:
        return np.full(d, 1.0 / d)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (d,) or (w < 0).any() or w.sum() <= 0:
        raise ConfigError(f"weights must be {d} non-negative numbers, not all 0; got {list(w)}")
    return w / w.sum()


@dataclass
class Fused:
    """A fused column.

    Attributes:
        values: ``[N]`` fused scores (higher = member).
        how: one line saying how they were fused.
        zero_scale: what SPEC §6's zero-scale rule did (robust-z only).
    """

    values: np.ndarray
    how: str
    zero_scale: ZeroScaleRecord = field(default_factory=ZeroScaleRecord)

    def describe(self) -> str:
        """``how``, plus the zero-scale rule's fallbacks and left-out columns when it was needed."""
        return self.how + (f"; {self.zero_scale.describe()}" if self.zero_scale else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "n_finite": int(np.isfinite(self.values).sum()),
            "zero_scale": self.zero_scale.to_dict(),
        }


def fuse(
    table: ScoreTable,
    names: list[str],
    method: str = "robust-z",
    weights: np.ndarray | None = None,
    labels: dict[str, int | None] | None = None,
    splits: dict[str, str | None] | None = None,
    clean_ref: str | None = None,
    n_folds: int = 5,
    seed: int = 0,
) -> "Fused":
    """Fuse the columns ``names`` of ``table`` with ``method`` (robust-z | rank-mix | stacking).

    robust-z standardises by a clean reference: ``clean_ref`` is ``split`` (rows whose split is
    clean_ref), ``crossfit`` (labelled non-members, cross-fitted) or ``all`` (every row, an
    unsupervised audit); by default split if any row has it, else crossfit if labels exist.
    Returns the fused ``[N]`` scores, a one-line description of how, and (robust-z) the record of
    the zero-scale rule.
    """
    missing = [n for n in names if n not in table.columns]
    if missing:
        raise InputError(f"no score column {', '.join(missing)}; columns: {', '.join(table.columns)}")
    x = np.column_stack([table.columns[n] for n in names])
    y = align_labels(table.ids, labels or {})[0]
    if method == "robust-z":
        splits = splits or {}
        mode = clean_ref or ("split" if CLEAN_SPLIT in splits.values() else "crossfit" if (y == 0).any() else None)
        if mode is None:
            raise ConfigError(
                "robust-z needs a clean reference: labels (split clean_ref or label 0), "
                "or clean_ref 'all' to standardise by every row (an unsupervised audit)"
            )
        if mode not in ("split", "crossfit", "all"):
            raise ConfigError(f"fusion clean_ref must be split, crossfit or all, got {mode!r}")
        reference = {
            "split": np.array([splits.get(i) == CLEAN_SPLIT for i in table.ids]),
            "crossfit": y == 0,
            "all": np.ones(len(y), bool),
        }[mode]
        fused, record = robust_z_fusion(x, reference, list(table.ids), weights, n_folds=n_folds, seed=seed, names=names)
        return Fused(fused, f"robust-z over a clean reference of {int(reference.sum())} ({mode})", record)
    if method == "rank-mix":
        return Fused(rank_mix(x, weights), "rank mix")
    if method == "stacking":
        if labels is None or not (y >= 0).any():
            raise ConfigError("stacking learns from labels: give labelled questions")
        return Fused(stacking(x, y, n_folds=n_folds, seed=seed), f"stacking, {n_folds}-fold out-of-fold")
    raise ConfigError(f"unknown fusion method {method!r}; use one of {', '.join(METHODS)}")
