"""A null for layer-wise claims (SPEC §4.5 item 5, after "Excess Separability", arXiv 2608.12652).

The level of a per-(metric, layer) effect size says nothing alone: with a few hundred questions,
twelve or eighty-four cells and heavy-tailed metrics, some cell always reads |d| ≈ 0.2–0.3 under a
true null. Each layer map is therefore read against the **max-|d| permutation null** (single-step
maxT, Westfall & Young 1993): the labels are permuted B times (within matched groups where the
design is matched, :mod:`.permutation`), Cohen's d is recomputed in every cell, and a cell's
family-wise-adjusted p-value is p = (1 + #{b: max_cells |d_b| ≥ |d|}) / (1 + B). A layer survives
when one of its cells has p < α; the family-wise error over the whole map is then ≤ α whatever the
dependence between metrics and layers, and whatever the two groups' sizes.

The same machinery gives the **placebos**: a random split of the non-members (a map that must read
null) and, with a reference checkpoint, the **depth-profile contrast** — the map of the
per-question differences audited − reference, which asks whether RL moved members' metrics
differently from non-members'.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .effect import cohens_d
from .permutation import permuted_labels

N_PERMUTATIONS = 1000
ALPHA = 0.05
PLACEBO_SPLITS = 20  # random halves of the non-members a placebo map is drawn on


def cohens_d_rows(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Cohen's d (label 1 − label 0) of every column of ``values`` ``[n, C]`` for every row of
    ``labels`` ``[B, n]`` (each with the same numbers of 1s and 0s): ``[B, C]``. Finite values only."""
    v = np.asarray(values, dtype=np.float64)
    v = v - v.mean(axis=0)  # centred: sums of squares without cancellation
    y = np.asarray(labels, dtype=np.float64)
    n1 = y[0].sum()
    n0 = len(v) - n1
    s1, q1 = y @ v, y @ (v * v)
    s0, q0 = v.sum(axis=0) - s1, (v * v).sum(axis=0) - q1
    m1, m0 = s1 / n1, s0 / n0
    pooled = ((q1 - n1 * m1**2) + (q0 - n0 * m0**2)) / (n1 + n0 - 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (m1 - m0) / np.sqrt(np.maximum(pooled, 0.0))
    return np.where(pooled > 0, d, np.nan)


def layer_null(
    values: np.ndarray,
    labels: np.ndarray,
    groups: Sequence[Any] | None = None,
    n_permutations: int = N_PERMUTATIONS,
    seed: int = 0,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """Cohen's d per (metric, layer) with family-wise-adjusted permutation p-values.

    Args:
        values: ``[n, M, L]`` finite per-question values (the compressed metrics m̃, or the
            differences audited − reference).
        labels: ``[n]`` 1 = member, 0 = non-member (each at least 2).
        groups: ``[n]`` matched group of each question (labels permuted within groups holding both);
            None permutes freely.

    Returns:
        ``d`` and ``p_adjusted`` ``[M, L]``, ``p_layer`` ``[L]`` (the smallest adjusted p of the
        layer), ``null_max`` (the 95th percentile of max |d| under the null), ``p_global`` (of the
        observed max |d|), ``significant_layers`` (column indices with p_layer < ``alpha``).
    """
    v = np.asarray(values, dtype=np.float64)
    y = np.asarray(labels).astype(int)
    n, n_metrics, n_layers = v.shape
    if min(y.sum(), n - y.sum()) < 2:
        raise ValueError("a layer null needs at least 2 members and 2 non-members")
    flat = v.reshape(n, -1)
    observed = cohens_d(flat, y.astype(bool))
    group_ids = None if groups is None else np.unique([str(g) for g in groups], return_inverse=True)[1]
    perms = permuted_labels(y, group_ids, n_permutations, seed)
    maxima = np.nanmax(np.abs(cohens_d_rows(flat, perms)), axis=1)  # [B]
    with np.errstate(invalid="ignore"):
        p = (1 + (maxima[:, None] >= np.abs(observed)[None, :]).sum(axis=0)) / (1 + n_permutations)
    p = np.where(np.isfinite(observed), p, np.nan).reshape(n_metrics, n_layers)
    p_layer = np.where(np.isnan(p), np.inf, p).min(axis=0)  # inf: a layer with no finite d
    observed_max = float(np.nanmax(np.abs(observed))) if np.isfinite(observed).any() else float("nan")
    return {
        "d": observed.reshape(n_metrics, n_layers),
        "p_adjusted": p,
        "p_layer": p_layer,
        "null_max": float(np.quantile(maxima, 1 - alpha)),
        "observed_max": observed_max,
        "p_global": float((1 + (maxima >= observed_max).sum()) / (1 + n_permutations)),
        "significant_layers": [int(j) for j in np.flatnonzero(p_layer < alpha)],
        "n_permutations": n_permutations,
        "alpha": alpha,
        "permutation": "within matched groups" if groups is not None else "free",
    }


def non_member_split(labels: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The placebo: ``(rows, fake_labels)`` — the non-members' row indices and a random half of them
    labelled 1 (seeded)."""
    rows = np.flatnonzero(np.asarray(labels) == 0)
    fake = np.zeros(len(rows), dtype=int)
    fake[np.random.default_rng([seed, 4_5]).permutation(len(rows))[: len(rows) // 2]] = 1
    return rows, fake


def placebo_splits(
    values: np.ndarray, labels: np.ndarray, n_permutations: int, seed: int, n_splits: int = PLACEBO_SPLITS
) -> list[dict[str, Any]]:
    """:func:`layer_null` of ``values`` ``[n, M, L]`` on ``n_splits`` random halves of the
    non-members (:func:`non_member_split`): maps that must read null."""
    runs = []
    for k in range(n_splits):
        rows, fake = non_member_split(np.asarray(labels).astype(int), seed + k)
        runs.append(layer_null(values[rows], fake, None, n_permutations, seed + k))
    return runs


def placebo_summary(runs: list[dict[str, Any]], n_non_members: int) -> dict[str, Any]:
    """What a reader needs of :func:`placebo_splits`' maps: how many splits of how many non-members,
    the share with any significant layer (≈ α under the null) and the median largest |d|."""
    return {
        "n_splits": len(runs),
        "n": n_non_members,
        "any_significant_rate": float(np.mean([bool(r["significant_layers"]) for r in runs])),
        "observed_max_median": float(np.median([r["observed_max"] for r in runs])),
    }
