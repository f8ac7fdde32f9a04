"""One learned score per text over several detectors' residuals (SPEC §8.10; AdaDetect: Marandon,
Lei, Mary & Roquain, AoS 2024), cross-fitted so that an original and the null residuals it is
compared with stay exchangeable under H0.

Every text — an original or a null text (a control, or a clean question) — has a residual vector
``[D]`` over the detectors (each detector's residual in units of its pooled scale). The questions
are dealt into two folds (by a hash of the run's seed and the question id). Fold k's texts are
scored by a logistic regression fitted on the *other* fold alone, telling its originals (class 1)
from its null texts (class 0): for fold k the score is then a fixed function, so an original of
fold k and fold k's null texts stay exchangeable under H0 and its conformal p-value against them is
valid. (Fitting on fold k's own texts, even symmetrically, is not: a question's control residuals
are taken against each other and sum to about 0, an original's are not, so a classifier leans
towards whatever its originals share, and their p-values come out too small — measured: 7.8 % below
0.05 with three detectors.) Where some originals are contaminated, the other fold's originals
teach the classifier the direction in which they differ from fresh questions — a combination of
detectors weighted by what separates on *this* model, where a p-value combination of
near-duplicate detectors (PPL, Min-K%, zlib) adds nothing.

The null texts are every scored control of the pool's questions (reference and absolute modes;
a control takes its question's fold) or the clean set's originals (relative mode).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

CLIP = 50.0  # residuals beyond ±CLIP scales (±inf among them) are clipped: one transform for every text


@dataclass
class LearnedScores:
    """Cross-fitted scores of the null texts ``[M]`` and of the tested texts ``[N]``, each text's
    fold, and each fold's fitted weights ``[D]`` (per unit of the residuals given)."""

    null: np.ndarray
    tested: np.ndarray
    null_fold: np.ndarray
    tested_fold: np.ndarray
    weights: list[np.ndarray]

    def pvalues(self, u: np.ndarray | None) -> tuple[np.ndarray, int]:
        """Each tested text's conformal p-value against its own fold's null scores
        (:func:`~probes.calibration.conformal.conformal_pvalues`; ``u`` ``[N]`` uniforms, or None
        for the deterministic form) and the smaller fold's pool size."""
        from .conformal import conformal_pvalues

        p, pools = np.full(len(self.tested), np.nan), []
        for k in (0, 1):
            null = self.null[self.null_fold == k]
            rows = np.flatnonzero(self.tested_fold == k)
            pools.append(int((~np.isnan(null)).sum()))
            if len(rows):
                p[rows] = conformal_pvalues(self.tested[rows], null, None if u is None else u[rows])
        used = [size for size in pools if size]
        return p, min(used) if used else 0


def folds(ids: list[str], seed: int) -> np.ndarray:
    """``[N]`` fold (0 or 1) of each question, from a hash of the seed and its id alone."""
    return np.array([hashlib.sha256(f"{seed}\x1ffold\x1f{qid}".encode()).digest()[0] & 1 for qid in ids], dtype=np.int64)


def features(values: np.ndarray) -> np.ndarray:
    """Residual vectors as a classifier takes them: NaN (a detector that did not score this text)
    becomes 0 — the median of its question's controls — and ±inf or far values are clipped to
    ±:data:`CLIP`; the same fixed transform for every text."""
    return np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=CLIP, neginf=-CLIP), -CLIP, CLIP)


def cross_fitted_scores(null: np.ndarray, null_fold: np.ndarray, tested: np.ndarray, tested_fold: np.ndarray,
                        train: np.ndarray | None = None, train_fold: np.ndarray | None = None) -> LearnedScores:
    """Learned scores of the null texts ``null [M, D]`` and the tested texts ``tested [N, D]`` (see
    the module docstring): fold k's texts are scored by a logistic regression fitted on the other
    fold alone — its null texts (class 0) against its originals (class 1: the tested ones, or
    ``train [T, D]`` with ``train_fold`` when given, e.g. every original of a whole benchmark of
    which a subset is tested) — so the score is a fixed function for fold k, and fold k's originals
    and null texts stay exchangeable under H0. A fold whose other fold lacks either class keeps NaN
    scores."""
    from sklearn.linear_model import LogisticRegression

    x_null, x_tested = features(null), features(tested)
    x_train, fold_train = (x_tested, tested_fold) if train is None else (features(train), np.asarray(train_fold))
    out_null, out_tested, weights = np.full(len(x_null), np.nan), np.full(len(x_tested), np.nan), []
    for k in (0, 1):
        negatives, positives = x_null[null_fold != k], x_train[fold_train != k]
        if not len(negatives) or not len(positives):
            weights.append(np.full(x_null.shape[1], np.nan))
            continue
        mean, sd = negatives.mean(axis=0), negatives.std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        model = LogisticRegression(C=1.0, max_iter=1000, class_weight="balanced")
        model.fit((np.concatenate([negatives, positives]) - mean) / sd, np.r_[np.zeros(len(negatives)), np.ones(len(positives))])
        w = model.coef_[0] / sd
        weights.append(w)
        out_null[null_fold == k] = x_null[null_fold == k] @ w
        out_tested[tested_fold == k] = x_tested[tested_fold == k] @ w
    return LearnedScores(out_null, out_tested, null_fold, tested_fold, weights)


def describe_weights(names: list[str], weights: list[np.ndarray]) -> dict[str, list[float]]:
    """``{detector: [weight in fold 0, weight in fold 1]}`` (per unit residual), for the record."""
    return {n: [float(w[d]) if math.isfinite(w[d]) else math.nan for w in weights] for d, n in enumerate(names)}
