"""One learned score per text over several detectors' residuals (SPEC §8.10; AdaDetect: Marandon,
Lei, Mary & Roquain, AoS 2024), cross-fitted so that an original and the null residuals it is
compared with stay exchangeable under H0.

Every text — an original or a null text (a control, or a clean question) — has a residual vector
``[D]`` over the detectors (each detector's residual in units of its pooled scale). The questions
are dealt into two folds (by a hash of the run's seed and the question id). Fold k's texts are
scored by a logistic regression fitted on the *other* fold alone, telling its originals (class 1)
from its null texts (class 0), with every weight ≥ 0 (each detector adds evidence only in its own
"higher = member" direction): for fold k the score is then a fixed function, so an original of
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

from .conformal import conformal_pvalues

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
        (:func:`~probes.verdicts.conformal.conformal_pvalues`; ``u`` ``[N]`` uniforms, or None
        for the deterministic form) and the smaller fold's pool size."""

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
    return np.array(
        [hashlib.sha256(f"{seed}\x1ffold\x1f{qid}".encode()).digest()[0] & 1 for qid in ids], dtype=np.int64
    )


def features(values: np.ndarray) -> np.ndarray:
    """Residual vectors as a classifier takes them: NaN (a detector that did not score this text)
    becomes 0 — the median of its question's controls — ±inf or far values are clipped to
    ±:data:`CLIP`, and every value is compressed, sign(x)·log(1 + |x|) (SPEC §4's compression): a
    linear fit on heavy-tailed residuals (ReCaLL's reach ±40 scales) is decided by their outliers
    and underweights the detector whose ranks separate best (measured on the testbed: residual AUC
    0.747 uncompressed, 0.781 compressed, ReCaLL alone 0.782). The same fixed transform for every
    text."""
    x = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=CLIP, neginf=-CLIP), -CLIP, CLIP)
    return np.sign(x) * np.log1p(np.abs(x))


def cross_fitted_scores(
    null: np.ndarray,
    null_fold: np.ndarray,
    tested: np.ndarray,
    tested_fold: np.ndarray,
    train: np.ndarray | None = None,
    train_fold: np.ndarray | None = None,
    screen: float | None = None,
) -> LearnedScores:
    """Learned scores of the null texts ``null [M, D]`` and the tested texts ``tested [N, D]`` (see
    the module docstring): fold k's texts are scored by a logistic regression fitted on the other
    fold alone — its null texts (class 0) against its originals (class 1: the tested ones, or
    ``train [T, D]`` with ``train_fold`` when given, e.g. every original of a whole benchmark of
    which a subset is tested) — so the score is a fixed function for fold k, and fold k's originals
    and null texts stay exchangeable under H0. A fold whose other fold lacks either class keeps NaN
    scores. ``screen``: the one-sided level at which a detector enters the fit (:func:`screened`,
    on the other fold too); None fits every detector."""
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
        kept = screened(negatives, positives, screen) if screen is not None else np.ones(x_null.shape[1], dtype=bool)
        w = np.zeros(x_null.shape[1])
        w[kept] = (
            one_sided_logistic(
                (np.concatenate([negatives[:, kept], positives[:, kept]]) - mean[kept]) / sd[kept],
                np.r_[np.zeros(len(negatives)), np.ones(len(positives))],
            )
            / sd[kept]
        )
        weights.append(w)
        out_null[null_fold == k] = x_null[null_fold == k] @ w
        out_tested[tested_fold == k] = x_tested[tested_fold == k] @ w
    return LearnedScores(out_null, out_tested, null_fold, tested_fold, weights)


def screened(negatives: np.ndarray, positives: np.ndarray, level: float) -> np.ndarray:
    """``[D]`` mask of the detectors that enter a fit: those whose originals ``positives [P, D]``
    rank above the null texts ``negatives [M, D]`` at one-sided ``level`` (Mann–Whitney's normal
    approximation, mid-ranks; an upper bound on the evidence, since a question's null texts are not
    independent: a screen, not a test) — and, where none does, the one that ranks highest. A
    detector with no signal on this model then gets no weight fitted to noise; a weak real one may
    be screened out with it (both measured in docs/verdicts.md, "Many detectors")."""
    from scipy.stats import norm, rankdata

    m, p = len(negatives), len(positives)
    ranks = rankdata(np.concatenate([negatives, positives]), axis=0)
    u = ranks[m:].sum(axis=0) - p * (p + 1) / 2.0
    z = (u - m * p / 2.0) / math.sqrt(m * p * (m + p + 1) / 12.0)
    kept = z > norm.isf(level)
    if not kept.any():
        kept[int(np.argmax(z))] = True
    return kept


def one_sided_logistic(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> np.ndarray:
    """The weights ``[D]`` of an L2-penalised logistic regression of ``y [n]`` (0/1, classes weighed
    alike) on ``x [n, D]`` with every weight ≥ 0 (and a free intercept, not returned): 0.5‖w‖² +
    c Σ weight_i · log(1 + exp(−s_i (x_i·w + b))), s = ±1, by L-BFGS-B. Every detector's score
    means "higher = member" (SPEC §0), so a detector can only add evidence in its own direction:
    a free sign would turn any difference between originals and the null — a clean set that is
    not drawn quite like the audited questions, in either direction — into evidence."""
    from scipy.optimize import minimize

    sign = np.where(y > 0, 1.0, -1.0)
    weight = np.where(y > 0, len(y) / (2.0 * max(int((y > 0).sum()), 1)), len(y) / (2.0 * max(int((y <= 0).sum()), 1)))
    d = x.shape[1]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:d], theta[d]
        margin = sign * (x @ w + b)
        value = 0.5 * w @ w + c * float((weight * np.logaddexp(0.0, -margin)).sum())
        slope = -c * weight * sign * (1.0 / (1.0 + np.exp(np.clip(margin, -500, 500))))  # d loss / d (x·w + b)
        return value, np.r_[w + x.T @ slope, slope.sum()]

    bounds = [(0.0, None)] * d + [(None, None)]
    result = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=bounds)
    return result.x[:d]


def describe_weights(names: list[str], weights: list[np.ndarray]) -> dict[str, list[float]]:
    """``{detector: [weight in fold 0, weight in fold 1]}`` (per unit of the compressed residual), for the record."""
    return {n: [float(w[d]) if math.isfinite(w[d]) else math.nan for w in weights] for d, n in enumerate(names)}
