"""What per-question decisions could reach, for benchmarks with labels (SPEC §8.10 (b)): the
labelled oracle's power, the residual AUC of a detector or a combination, the residual AUC
that Benjamini–Hochberg needs to flag a given share of the contaminated questions, and the check
of the not-contaminated questions' p-values against the uniform law (SPEC §8.10 (c)).

None of these enter a decision: they need labels, which an audit does not have.
"""

from __future__ import annotations

import math

import numpy as np


def labelled_oracle(pvalues: np.ndarray, member: np.ndarray, fdr: float) -> tuple[float, int]:
    """The most members any threshold on the per-question evidence (``pvalues [N]``, smaller =
    stronger; NaN never flagged) flags while the false-discovery proportion among the flagged,
    counted with the labels ``member [N]``, stays ≤ ``fdr``. Returns (power = members flagged /
    members, members flagged); power is NaN without members. With no non-member in the set every
    threshold has FDP 0 and the oracle flags every tested member: it is 1 by construction."""
    p = np.asarray(pvalues, dtype=np.float64)
    member = np.asarray(member, dtype=bool)
    if not member.any():
        return math.nan, 0
    tested = ~np.isnan(p)
    order = np.argsort(np.where(tested, p, np.inf), kind="stable")
    best = 0
    flagged_members = flagged = 0
    for rank, i in enumerate(order):
        if not tested[i]:
            break
        flagged += 1
        flagged_members += int(member[i])
        last_of_tie = rank + 1 == len(order) or not tested[order[rank + 1]] or p[order[rank + 1]] != p[i]
        if last_of_tie and (flagged - flagged_members) <= fdr * flagged:
            best = max(best, flagged_members)
    return best / member.sum(), best


def residual_auc(members: np.ndarray, null: np.ndarray) -> float:
    """P(a member's original residual exceeds a pooled null residual) + ½ P(tie): the AUC of
    members' original residuals ``[n]`` against the pooled control (or clean) residuals ``[M]``,
    NaN left out. 0.5: no per-question evidence."""
    from scipy.stats import rankdata

    a = np.asarray(members, dtype=np.float64)
    b = np.asarray(null, dtype=np.float64).ravel()
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if not len(a) or not len(b):
        return math.nan
    ranks = rankdata(np.concatenate([a, b]))[: len(a)]
    return float((ranks.sum() - len(a) * (len(a) + 1) / 2) / (len(a) * len(b)))


def auc_needed(share: float, fdr: float = 0.10, power: float = 0.5) -> float:
    """The residual AUC at which Benjamini–Hochberg at ``fdr`` flags a ``power`` share of the
    contaminated questions, when ``share`` of the questions are contaminated, with many questions
    and an exact null (binormal, equal variances: AUC = Φ(μ/√2) for a shift μ). BH's threshold t
    solves t = fdr · (share · power + (1 − share) · t)."""
    from scipy.stats import norm

    t = fdr * share * power / (1 - fdr * (1 - share))
    shift = norm.isf(t) + norm.ppf(power)
    return float(norm.cdf(shift / math.sqrt(2)))


def uniformity_check(pvalues: np.ndarray, level: float = 0.05) -> dict[str, float | int | bool]:
    """The p-values of questions known not to be contaminated against the uniform law: their share
    ≤ 0.05 and ≤ 0.10 and the one-sided Kolmogorov–Smirnov p-value of "too many small p-values"
    (``fails`` below ``level``). On one benchmark this is the validity check that can fail: the
    realised FDR over subsets of it carries the benchmark's own draw (with 150 exactly-null
    questions it spans 0–0.6 over subsets of 60), the p-values' law does not. Questions share
    the null pool, so the KS p-value is approximate. NaN p-values are left out (``n`` counts the rest)."""
    from scipy.stats import kstest

    p = np.asarray(pvalues, dtype=np.float64)
    p = p[~np.isnan(p)]
    if not len(p):
        return {"n": 0, "le_05": math.nan, "le_10": math.nan, "ks_p": math.nan, "fails": False}
    ks = float(kstest(p, "uniform", alternative="greater").pvalue)
    return {
        "n": int(len(p)),
        "le_05": float((p <= 0.05).mean()),
        "le_10": float((p <= 0.10).mean()),
        "ks_p": ks,
        "fails": bool(ks < level),
    }
