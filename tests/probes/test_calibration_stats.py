"""SPEC §8's statistics against independent computations: ranks with ties by hand, the permutation
p-value against exact enumeration, the Cauchy combination against its formula, Storey's bound by
hand, Mann–Whitney against a pairwise count and scipy, calibrated scores by a naive loop, and the
size of the tests by simulation."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from probes.verdicts.stats import (
    bonferroni,
    calibrated_scores,
    cauchy_combination,
    empirical_pvalues,
    mann_whitney_greater,
    permutation_test,
    question_pvalues,
    storey_pi1,
    within_ranks,
)

NAN = math.nan


def naive_rank(original: float, controls: list[float]) -> float:
    valid = [c for c in controls if not math.isnan(c)]
    if math.isnan(original) or len(valid) < 2:
        return NAN
    return sum(1.0 if c < original else 0.5 if c == original else 0.0 for c in valid) / len(valid)


def test_within_ranks_with_ties_by_hand():
    original = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    controls = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 2.0], [2.0, 2.0, NAN], [1.0, NAN, NAN], [NAN, 9.0, 0.0]])
    # 3 vs (1, 2, 3): 2 below + ½ tie = 2.5/3; 1 vs (1, 1, 2): two ties = 1/3; 2 vs (2, 2): 1/2;
    # one valid control: NaN; 4 vs (9, 0): 1/2
    expected = [2.5 / 3, 1 / 3, 0.5, NAN, 0.5]
    np.testing.assert_allclose(within_ranks(original, controls), expected)
    rng = np.random.default_rng(0)
    o, c = rng.integers(0, 4, 40).astype(float), rng.integers(0, 4, (40, 3)).astype(float)
    c[rng.random((40, 3)) < 0.2] = NAN
    np.testing.assert_allclose(within_ranks(o, c), [naive_rank(a, list(b)) for a, b in zip(o, c)])


def exact_pvalue(original: np.ndarray, controls: np.ndarray) -> tuple[float, float]:
    """Enumerate every reassignment of each question's 'original' among its texts."""
    texts = [[o] + [x for x in c if not math.isnan(x)] for o, c in zip(original, controls)]
    observed = statistics.fmean(naive_rank(t[0], t[1:]) for t in texts)
    stats = []
    for pick in itertools.product(*[range(len(t)) for t in texts]):
        stats.append(statistics.fmean(naive_rank(t[k], t[:k] + t[k + 1 :]) for t, k in zip(texts, pick)))
    return observed, sum(s >= observed - 1e-12 for s in stats) / len(stats)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_permutation_pvalue_against_exact_enumeration(seed):
    rng = np.random.default_rng(seed)
    original = rng.integers(0, 5, 5).astype(float) + (seed == 0) * 2.0  # seed 0 shifted: a small p
    controls = rng.integers(0, 5, (5, 3)).astype(float)
    controls[0, 2] = NAN
    t, p = permutation_test(original, controls, n_permutations=100_000, seed=seed)
    t_exact, p_exact = exact_pvalue(original, controls)
    assert t == pytest.approx(t_exact, abs=1e-12)
    assert p == pytest.approx(p_exact, abs=0.005)  # Monte-Carlo error of 1e5 permutations ≈ 0.0016


def test_permutation_test_has_its_size_under_h0():
    """Originals drawn like their controls, with question-level differences: reject at 5 % about 5 % of the time."""
    rng = np.random.default_rng(3)
    rejections = []
    for _ in range(400):
        level = rng.normal(size=(30, 1)) * 3.0
        texts = level + rng.normal(size=(30, 4))
        rejections.append(
            permutation_test(texts[:, 0], texts[:, 1:], n_permutations=400, seed=int(rng.integers(1 << 30)))[1] < 0.05
        )
    assert 0.02 <= np.mean(rejections) <= 0.08


def test_question_pvalues_by_hand_and_uniform_under_h0():
    p = question_pvalues(np.array([5.0, 1.0]), np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 7.0]]), seed=4)
    u = np.random.default_rng(4).random(2)
    assert p[0] == pytest.approx(u[0] / 4) and p[1] == pytest.approx((1 + 3 * u[1]) / 4)  # 1 above, 2 ties
    rng = np.random.default_rng(5)
    texts = rng.integers(0, 3, size=(20_000, 4)).astype(float)  # heavy ties
    values = question_pvalues(texts[:, 0], texts[:, 1:], seed=6)
    assert abs(values.mean() - 0.5) < 0.01 and abs((values < 0.1).mean() - 0.1) < 0.01


def test_storey_by_hand():
    p = np.array([0.01, 0.02, 0.2, 0.6, 0.7, 0.9, 0.4, 0.03, NAN, 0.55])
    # m = 9, #{p > 0.5} = 4 -> 1 − 4 / (9 · 0.5) = 1/9
    assert storey_pi1(p) == pytest.approx(1 / 9)
    assert storey_pi1(np.array([0.9, 0.8, 0.7])) == 0.0  # floored at 0


def test_cauchy_combination_against_its_formula():
    p = [0.01, 0.5, 0.2]
    t = sum(math.tan((0.5 - x) * math.pi) for x in p) / 3
    assert cauchy_combination(p) == pytest.approx(0.5 - math.atan(t) / math.pi, rel=1e-12)
    w = [2.0, 1.0, 1.0]
    tw = sum(wi / 4 * math.tan((0.5 - x) * math.pi) for wi, x in zip(w, p))
    assert cauchy_combination(p, w) == pytest.approx(0.5 - math.atan(tw) / math.pi, rel=1e-12)
    assert cauchy_combination([0.03]) == pytest.approx(0.03, rel=1e-9)  # one p-value is itself
    assert 0 < cauchy_combination([1e-30, 0.9]) < 1e-29  # no overflow; dominated by the smallest
    assert math.isnan(cauchy_combination([NAN])) and bonferroni([0.01, 0.2, NAN]) == pytest.approx(0.02)


def test_mann_whitney_against_a_pairwise_count_and_scipy():
    rng = np.random.default_rng(7)
    a, c = rng.integers(0, 6, 25).astype(float), rng.integers(0, 5, 30).astype(float)
    auc, p = mann_whitney_greater(np.r_[a, NAN], c, n_permutations=50_000)
    pairs = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in c)
    assert auc == pytest.approx(pairs / (25 * 30))
    # the permutation p-value agrees with the normal approximation where that one is good (25 vs 30)
    assert p == pytest.approx(mannwhitneyu(a, c, alternative="greater").pvalue, abs=0.01)
    emp = empirical_pvalues(np.array([10.0, 2.0]), np.array([1.0, 2.0, 3.0]), seed=8)
    u = np.random.default_rng(8).random(2)
    assert emp[0] == pytest.approx(u[0] / 4) and emp[1] == pytest.approx((1 + 2 * u[1]) / 4)


def _exact_mann_whitney(a: list[float], c: list[float]) -> float:
    """P(U_b >= U) over every assignment of the pooled values to the two groups (a naive enumeration)."""
    pooled = a + c

    def u(group: tuple[int, ...]) -> float:
        rest = [pooled[k] for k in range(len(pooled)) if k not in group]
        return sum(1.0 if pooled[i] > y else 0.5 if pooled[i] == y else 0.0 for i in group for y in rest)

    observed = u(tuple(range(len(a))))
    splits = list(itertools.combinations(range(len(pooled)), len(a)))
    return sum(u(g) >= observed - 1e-12 for g in splits) / len(splits)


@pytest.mark.parametrize(
    "a,c",
    [
        ([1.0, 2 / 3, 1.0, 1 / 3, 1.0, 2 / 3], [0.0, 1 / 3]),  # 2 clean questions, ties
        ([0.5, 1.0, 1.0, 0.5, 0.0], [0.0, 0.5, 0.0]),
        ([3.0, np.inf, 2.0, 5.0], [1.0, 2.0, -np.inf, 0.0]),
    ],
)  # ±inf rank
def test_mann_whitney_permutation_pvalue_against_exact_enumeration(a, c):
    _, p = mann_whitney_greater(np.array(a), np.array(c), n_permutations=100_000, seed=1)
    assert p == pytest.approx(_exact_mann_whitney(a, c), abs=0.005)


def test_calibrated_scores_by_a_naive_loop():
    rng = np.random.default_rng(9)
    original = rng.normal(size=12)
    controls = rng.normal(size=(12, 3))
    controls[2, 1] = NAN
    controls[5, :2] = NAN  # one valid control: unusable
    got, record = calibrated_scores(original, controls)
    deviations, medians = [], {}
    for j in range(12):
        valid = [x for x in controls[j] if not math.isnan(x)]
        if len(valid) < 2:
            continue
        medians[j] = statistics.median(valid)
        deviations += [x - medians[j] for x in valid]
    center = statistics.median(deviations)
    scale = statistics.median([abs(d - center) for d in deviations]) / statistics.NormalDist().inv_cdf(0.75)
    for j in range(12):
        if j in medians:
            assert got[j] == pytest.approx((original[j] - medians[j]) / scale, rel=1e-12)
        else:
            assert math.isnan(got[j])
    assert not record
    discrete = np.zeros((20, 3))
    discrete[:3, 0] = 1.0  # 0 on most controls: MAD 0, the zero-scale rule's fallback
    cal, rec = calibrated_scores(np.ones(20), discrete)
    assert np.isfinite(cal).all() and np.abs(cal).max() < 100 and "controls" in rec.fallback
