"""The absolute mode's size on *your* questions (SPEC §8.6, issue 34 item 5).

The absolute mode's within-question test is exact only if the generator's similar questions are
exchangeable with real ones. Its size is known where the generator was validated (our two
testbeds: 0.045–0.050 of clean subsets of 50 rejected); on a third testbed of 45 templates of its
own a clean SFT checkpoint read within-AUC 0.63–0.65 and was rejected at p = 0.0002. With a
handful of known-clean questions of the audited kind (a few dozen published after the model,
split ``clean_ref``) the generator's bias can be measured where it matters:

* the absolute test on the clean questions themselves — within-AUC, p (they are clean: a
  rejection there is the generator's bias, not contamination);
* the size at the audited set's size: questions are resampled with replacement from the clean
  set to the audited count (all detectors of a question together), each detector's within-AUC
  is referred to its exact null mean and variance (each question's original uniform among its
  1 + C texts) by a normal approximation, the detectors are combined as the verdict combines
  them, and the share of resamples rejected at α is the estimated size.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import norm

from . import stats

SIZE_RESAMPLES = 500


def null_moments(original: np.ndarray, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``([N] r_j, [N] null mean, [N] null variance)`` of each question's within-rank, the null
    being its original uniform among its 1 + C_j valid texts (ties count ½, as in r_j); NaN where
    the question is unusable."""
    usable, table = stats.rank_table(original, controls)
    r, mean, var = (np.full(len(usable), np.nan) for _ in range(3))
    if usable.any():
        r[usable], mean[usable], var[usable] = table[:, 0], np.nanmean(table, axis=1), np.nanvar(table, axis=1)
    return r, mean, var


def absolute_size(
    original: dict[str, np.ndarray],
    controls: dict[str, np.ndarray],
    n_audited: int,
    alpha: float,
    combine: str = "cauchy",
    seed: int = 0,
    n_resamples: int = SIZE_RESAMPLES,
) -> dict[str, Any]:
    """The absolute mode's estimated size on a clean set like ``original`` / ``controls`` (per
    detector ``[N]`` and ``[N, C]``) at ``n_audited`` questions; see the module docstring."""
    moments = {name: null_moments(original[name], controls[name]) for name in original}
    usable = np.all([~np.isnan(m[0]) for m in moments.values()], axis=0) if moments else np.zeros(0, bool)
    rows = np.flatnonzero(usable)
    if len(rows) < 2 or n_audited < 1:
        return {"error": "too few clean questions with every detector's controls scored", "n_clean": int(len(rows))}
    rng = np.random.default_rng([seed, 86])
    rejected = 0
    for _ in range(n_resamples):
        pick = rng.choice(rows, size=n_audited, replace=True)
        pvalues = [_normal_p(r[pick], mu[pick], var[pick]) for r, mu, var in moments.values()]
        p = stats.cauchy_combination(pvalues) if combine == "cauchy" else stats.bonferroni(pvalues)
        rejected += bool(p < alpha)
    return {
        "n_clean": int(len(rows)),
        "n_audited": int(n_audited),
        "size": rejected / n_resamples,
        "n_resamples": n_resamples,
        "alpha": alpha,
        "detectors": list(original),
        "within_auc": {name: float(np.nanmean(m[0][rows])) for name, m in moments.items()},
        "size_range": {name: _size_range(*(x[rows] for x in m), n_audited, alpha) for name, m in moments.items()},
    }


def _size_range(r: np.ndarray, mean: np.ndarray, var: np.ndarray, n_audited: int, alpha: float) -> list[float]:
    """One detector's size at ``n_audited`` over the 95 % CI of the clean set's bias δ = mean(r − μ):
    P(Z > z_{1−α} − δ·√(n / v̄)) at δ's normal-interval ends (a few dozen clean questions pin the
    bias only roughly: the range says how roughly)."""
    gap = r - mean
    if len(gap) < 2 or float(var.mean()) == 0:
        return [math.nan, math.nan]
    half = 1.96 * float(gap.std(ddof=1)) / math.sqrt(len(gap))
    scale = math.sqrt(n_audited / float(var.mean()))
    z = norm.isf(alpha)
    return [float(norm.sf(z - (float(gap.mean()) + d) * scale)) for d in (-half, half)]


def _normal_p(r: np.ndarray, mean: np.ndarray, var: np.ndarray) -> float:
    spread = math.sqrt(float(var.sum()))
    if spread == 0:
        return math.nan
    return float(norm.sf((float(r.sum()) - float(mean.sum())) / spread))


def _finite(x: float | None) -> bool:
    """A number that is neither missing (None in JSON) nor NaN."""
    return x is not None and math.isfinite(x)
