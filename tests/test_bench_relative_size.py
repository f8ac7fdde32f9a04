"""``benchmarks/bench_relative_size.py`` (issue 56, item 5): the pooled set it re-deals holds each
question's own scores, and its rows can fail — on exchangeable questions the fresh-draw and re-dealt
rates hold α, a planted bias on the audited originals does not."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_relative_size as bench  # noqa: E402

from probes.scorefiles import ControlTable, ScoredSet  # noqa: E402
from probes.scores import ScoreTable  # noqa: E402
from probes.verdicts.modes import VerdictSettings  # noqa: E402

NAMES = ["ppl", "zlib"]


def exchangeable(prefix: str, n: int, rng: np.random.Generator, width: int = 3) -> ScoredSet:
    """``n`` questions whose originals and ``width`` controls are drawn from one law (no member)."""
    ids = [f"{prefix}{i}" for i in range(n)]
    scores = ScoreTable(ids, {name: rng.normal(size=n) for name in NAMES})
    controls = ControlTable(
        [i for i in ids for _ in range(width)],
        np.tile(np.arange(1, width + 1), n),
        {name: rng.normal(size=n * width) for name in NAMES},
    )
    return ScoredSet(scores, controls)


def test_pooled_keeps_every_questions_scores():
    rng = np.random.default_rng(0)
    first, second = exchangeable("a", 7, rng), exchangeable("b", 5, rng)
    pool = bench.pooled(first, second, NAMES, 3)
    assert pool.ids == first.ids + second.ids
    for source in (first, second):
        for qid in source.ids:  # a naive lookup, question by question
            row = source.scores.ids.index(qid)
            for name in NAMES:
                assert pool.subset([qid]).original(name)[0] == source.scores.columns[name][row]
                expected = [
                    v
                    for q, c, v in sorted(
                        zip(source.controls.ids, source.controls.index, source.controls.columns[name])
                    )
                    if q == qid
                ]
                assert pool.subset([qid]).control_matrix(name, 3)[0].tolist() == expected


def settings() -> VerdictSettings:
    return VerdictSettings(permutations=200, bootstrap=1, detectors=tuple(NAMES))


@pytest.mark.slow  # ~30 s of simulation
def test_the_placebo_holds_alpha_and_a_planted_bias_fails_it():
    """Clean subsets against clean questions drawn anew for each: exchangeable, so at most α plus
    3 binomial standard errors; +0.5 sd on every audited original (a generator's bias) fails it."""
    rng = np.random.default_rng(1)
    clean = exchangeable("c", 600, rng)
    args = argparse.Namespace(seed=0, subsets=60, size=50)
    placebo = bench.Scheme(pool=clean.ids, fresh=150)
    held = bench.rejection_rates(clean, clean, clean.ids, placebo, settings(), args)
    assert held["combined"] <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / args.subsets)
    failed = bench.rejection_rates(bench.planted(clean, NAMES, 0.5), clean, clean.ids, placebo, settings(), args)
    assert failed["combined"] >= 0.5


@pytest.mark.slow  # ~50 s of simulation
def test_redealt_rates_average_to_the_size_though_one_dealing_can_sit_far_above_it():
    """The rate given one audited pool and one clean set varies from dealing to dealing (every
    subset shares both); over dealings it averages to the test's size, within 3 standard errors of
    that mean (from the dealings' own spread)."""
    rng = np.random.default_rng(2)
    pool = bench.pooled(exchangeable("n", 150, rng), exchangeable("c", 450, rng), NAMES, 3)
    args = argparse.Namespace(seed=0, redeal=30, subsets_redeal=6, size=50)
    dealt = np.asarray(bench.redealt(pool, 150, 150, settings(), args))
    assert len(dealt) == args.redeal
    assert dealt.mean() <= 0.05 + 3 * dealt.std(ddof=1) / np.sqrt(len(dealt))
