"""Label permutations that respect a matched design (SPEC §4.5 item 5, §8.8).

In a matched design every member sits in a group with non-members of its own kind (a template, a
source, a pair). A null that permutes labels freely breaks that structure and is the wrong
reference for any statistic the design itself biases (a cross-validated classifier, a per-layer
effect size between groups of different composition). Here labels are permuted *within* every
group that holds both labels, and freely among the questions in no such group; every group keeps
its own numbers of members and non-members.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def mixed_groups(labels: np.ndarray, groups: np.ndarray) -> list[np.ndarray]:
    """Index arrays of the groups holding both labels, then one of every other question (if any)."""
    y = np.asarray(labels)
    order = np.argsort(groups, kind="stable")
    starts = np.flatnonzero(np.r_[True, groups[order][1:] != groups[order][:-1]])
    blocks = np.split(order, starts[1:])
    mixed = [b for b in blocks if len(np.unique(y[b])) > 1]
    rest = np.setdiff1d(np.arange(len(y)), np.concatenate(mixed) if mixed else np.array([], dtype=int))
    return mixed + ([rest] if len(rest) else [])


def swap_labels(
    labels: np.ndarray, groups: np.ndarray, rng: np.random.Generator, blocks: Sequence[np.ndarray] | None = None
) -> np.ndarray:
    """``labels`` permuted within every group holding both labels, and freely among the rest
    (``blocks``: :func:`mixed_groups`' output, to skip recomputing it)."""
    y = np.asarray(labels).copy()
    for idx in blocks if blocks is not None else mixed_groups(y, np.asarray(groups)):
        y[idx] = y[rng.permutation(idx)]
    return y


def permuted_labels(
    labels: np.ndarray, groups: np.ndarray | None, n_permutations: int, seed: int, stream: int = 45
) -> np.ndarray:
    """``[n_permutations, n]`` label vectors: within-group swaps when ``groups`` is given (``[n]``),
    free permutations otherwise; ``stream`` keeps two users of one seed on different draws."""
    y = np.asarray(labels)
    groups = np.zeros(len(y), dtype=int) if groups is None else np.asarray(groups)
    blocks = mixed_groups(y, groups)
    rng = np.random.default_rng([seed, stream])
    return (
        np.stack([swap_labels(y, groups, rng, blocks) for _ in range(n_permutations)])
        if n_permutations
        else np.empty((0, len(y)), dtype=y.dtype)
    )
