"""Synthetic audited sets with a known answer, for measuring the per-question decisions (SPEC §8.10)
by simulation: their size at level, their power beside an oracle's, the "at least" bound's
coverage, and a planted broken null that the validity checks must catch.

A world has ``n`` questions with ``c`` matched controls each; question j has its own level (its
texts' scores vary around it) and every text of it is scored alike under H0. Contaminated
originals are raised by ``shift`` (in units of a text's noise). Scores:

* ``gaussian``: level + N(0, 1);
* ``t3``: level + Student-t with 3 degrees of freedom (heavy tails);
* ``binomial``: the share of 8 draws that succeed, at a per-question rate (coarse: 9 values, ties).

With ``detectors`` > 1 each detector reads the same text with its own noise on top of a shared
one (correlated, near-duplicate detectors such as PPL, Min-K% and zlib).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..scorefiles import ControlTable, ScoredSet
from ..scores import ScoreTable

KINDS = ("gaussian", "t3", "binomial")


@dataclass
class World:
    """A simulated audited set: its scores, which questions are contaminated, and (``broken``)
    whether its null is broken on purpose (originals shifted above their own similars)."""

    audited: ScoredSet
    contaminated: np.ndarray
    names: list[str]


def _noise(kind: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "gaussian":
        return rng.normal(size=shape)
    if kind == "t3":
        return rng.standard_t(3, size=shape)
    raise ValueError(f"unknown score kind {kind!r}; choose one of {', '.join(KINDS)}")


def texts(kind: str, n: int, c: int, rng: np.random.Generator, detectors: int = 1) -> np.ndarray:
    """``[n, 1 + c, detectors]`` scores of each question's original (index 0) and controls under H0."""
    if kind == "binomial":
        rate = rng.uniform(0.1, 0.9, size=(n, 1, 1))
        return rng.binomial(8, np.broadcast_to(rate, (n, 1 + c, detectors))) / 8.0
    level = rng.normal(size=(n, 1, 1)) * 2.0
    shared = _noise(kind, rng, (n, 1 + c, 1))
    own = _noise(kind, rng, (n, 1 + c, detectors)) * (0.5 if detectors > 1 else 0.0)
    return level + shared + own


def world(
    n: int,
    c: int,
    kind: str = "gaussian",
    share: float = 0.0,
    shift: float = 0.0,
    detectors: int = 1,
    broken: float = 0.0,
    seed: int = 0,
) -> World:
    """An audited set of ``n`` questions, the first ⌊share·n⌋ contaminated (their originals raised
    by ``shift``); ``broken``: every original raised by that much too (a generator whose similars
    sit below real questions: H0 fails for every question, though none is contaminated)."""
    rng = np.random.default_rng(seed)
    scores = texts(kind, n, c, rng, detectors)
    contaminated = np.arange(n) < int(round(share * n))
    scores[:, 0, :] += shift * contaminated[:, None] + broken
    names = [f"d{k}" for k in range(detectors)] if detectors > 1 else ["ppl"]
    ids = [f"q{i}" for i in range(n)]
    table = ScoreTable(ids, {name: scores[:, 0, k] for k, name in enumerate(names)})
    controls = ControlTable(
        [i for i in ids for _ in range(c)],
        np.tile(np.arange(1, c + 1), n),
        {name: scores[:, 1:, k].reshape(-1) for k, name in enumerate(names)},
    )
    return World(ScoredSet(table, controls), contaminated, names)


def within_auc_of_shift(shift: float, kind: str = "gaussian") -> float:
    """P(a contaminated original's text beats a control's of its question) for Gaussian noise
    (one detector): Φ(shift / √2)."""
    from scipy.stats import norm

    if kind != "gaussian":
        raise ValueError("the closed form holds for Gaussian scores only")
    return float(norm.cdf(shift / np.sqrt(2.0)))
