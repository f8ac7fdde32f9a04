"""Output-level detector statistics against naive references (pure Python, DP edit distance),
including the edge cases: k·n < 1, empty inputs, identical completions, zero entropy, unequal
lengths."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from probes.detectors import (
    cdd_peak,
    entropy_from_logprobs,
    logprober_safe_score,
    min_k_plus_plus,
    min_k_prob,
    min_knn_statistic,
    penalized_cosine,
    perplexity,
    recall_ratio,
)


def levenshtein(a, b):
    """Textbook dynamic programme."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def naive_min_knn(seqs, k):
    n = len(seqs)
    nearest = []
    for i in range(n):
        best = math.inf
        for j in range(n):
            if i != j:
                longest = max(len(seqs[i]), len(seqs[j]))
                best = min(best, levenshtein(seqs[i], seqs[j]) / longest if longest else 0.0)
        nearest.append(best)
    nearest.sort()
    take = nearest[: min(k, n)]
    return sum(take) / len(take)


def naive_cdd(greedy, samples, alpha, max_tokens):
    g = greedy[:max_tokens]
    s = [x[:max_tokens] for x in samples]
    l_max = max([len(g)] + [len(x) for x in s])
    return sum(1 for x in s if levenshtein(g, x) <= alpha * l_max) / len(s)


def random_tokens(rng, n, vocab=6):
    return [rng.randrange(vocab) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_min_knn_matches_naive(seed):
    rng = random.Random(seed)
    base = random_tokens(rng, 30)
    seqs = [base[: rng.randrange(10, 30)] + random_tokens(rng, rng.randrange(0, 8)) for _ in range(12)]
    for k in (1, 3, 10, 50):
        assert min_knn_statistic(seqs, k) == pytest.approx(naive_min_knn(seqs, k), abs=1e-12)
    texts = ["".join(chr(97 + t) for t in s) for s in seqs]  # characters as the unit
    assert min_knn_statistic(texts, 4) == pytest.approx(naive_min_knn(texts, 4), abs=1e-12)


def test_min_knn_edge_cases():
    assert min_knn_statistic([[1, 2, 3]] * 5, k=3) == 0.0  # identical completions: member-like
    assert min_knn_statistic([[], [], [4]], k=2) == 0.0  # two empty completions are identical
    assert min_knn_statistic([[1, 2], [3, 4]], k=10) == 1.0
    assert math.isnan(min_knn_statistic([[1, 2]], k=1))
    with pytest.raises(ValueError):
        min_knn_statistic([[1], [2]], k=0)


@pytest.mark.parametrize("seed", range(5))
def test_cdd_matches_naive(seed):
    rng = random.Random(100 + seed)
    greedy = random_tokens(rng, 120)
    samples = [
        greedy[: rng.randrange(90, 120)] if rng.random() < 0.5 else random_tokens(rng, rng.randrange(50, 130))
        for _ in range(20)
    ]
    for alpha in (0.0, 0.05, 0.3):
        assert cdd_peak(greedy, samples, alpha) == pytest.approx(naive_cdd(greedy, samples, alpha, 100))


def test_cdd_edge_cases():
    assert cdd_peak([1, 2, 3], [[1, 2, 3]] * 4) == 1.0
    assert cdd_peak([], [[], []]) == 1.0  # ℓ_max = 0 and every distance is 0
    assert math.isnan(cdd_peak([1], []))
    # truncation to 100 tokens: differences after token 100 do not count
    assert cdd_peak(list(range(150)), [list(range(100)) + [7] * 50]) == 1.0


def test_min_k_prob_by_hand():
    lp = [-0.1, -3.0, -0.5, -2.0, -0.2, -1.0, -0.3, -0.4, -0.6, -0.7]
    assert min_k_prob(lp, 0.2) == pytest.approx((-3.0 - 2.0) / 2)  # ⌊0.2·10⌋ = 2 lowest
    assert min_k_prob(lp[:3], 0.2) == -3.0  # k·n = 0.6 < 1: at least one token
    assert math.isnan(min_k_prob([], 0.2))
    with pytest.raises(ValueError):
        min_k_prob(lp, 0.0)


def test_min_k_plus_plus_against_a_full_distribution():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(15, 40))
    logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    tokens = rng.integers(0, 40, size=15)
    chosen = logp[np.arange(15), tokens]
    p = np.exp(logp)
    mu = (p * logp).sum(axis=1)
    sigma = np.sqrt((p * logp**2).sum(axis=1) - mu**2)
    z = sorted(((c - m) / s for c, m, s in zip(chosen, mu, sigma)))
    assert min_k_plus_plus(chosen, mu, sigma, 0.2) == pytest.approx(sum(z[:3]) / 3)
    assert min_k_plus_plus([0.0, -1.0], [0.0, -0.5], [0.0, 0.5], 0.5) == -1.0  # σ = 0 position: z = 0
    assert math.isnan(min_k_plus_plus([], [], [], 0.2))


def test_perplexity_and_recall_by_hand():
    assert perplexity([-1.0, -3.0]) == pytest.approx(math.exp(2.0))
    assert math.isnan(perplexity([]))
    assert recall_ratio([-3.0, -1.0], [-1.0, -1.0]) == pytest.approx(2.0)


def test_penalized_cosine_by_hand():
    assert penalized_cosine([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)
    # cos([1,2,0,0],[1,2,3,4]) = 5 / (√5·√30), times the length ratio 2/4
    assert penalized_cosine([1.0, 2.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(5 / (math.sqrt(5) * math.sqrt(30)) * 0.5)
    assert penalized_cosine([0.0, 0.0], [1.0, 2.0]) == 0.0  # a zero-entropy sequence
    assert penalized_cosine([], [1.0]) == 0.0  # an empty response
    assert penalized_cosine([], []) == 0.0


def test_logprober_by_hand_and_memorised_vs_unseen():
    lp = [-1.0, -3.0, -2.0]
    # sorted descending: -1, -2, -3; /3; cumulative -1/3, -1, -2; integral -10/3
    assert logprober_safe_score(lp) == pytest.approx(math.log(10 / 3))
    memorised = [-0.01] * 30 + [-0.05] * 5
    unseen = list(np.random.default_rng(1).uniform(-6.0, -1.0, size=35))
    assert logprober_safe_score(memorised) < 1.0 < logprober_safe_score(unseen)  # the seed's decision rule
    assert logprober_safe_score(unseen) - logprober_safe_score(memorised) > 4.0
    assert logprober_safe_score([0.0, 0.0]) == -math.inf
    assert math.isnan(logprober_safe_score([]))


def test_entropy_from_logprobs():
    with np.errstate(divide="ignore"):
        full = np.log(np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]]))  # log 0 = -inf: p = 0 entries
    np.testing.assert_allclose(entropy_from_logprobs(full), [1.5 * math.log(2), 0.0])
    top2 = np.log(np.array([0.5, 0.25]))
    assert entropy_from_logprobs(top2) == pytest.approx(
        0.5 * math.log(2) + 0.25 * math.log(4)
    )  # the tail term is missing
    assert entropy_from_logprobs(top2) < entropy_from_logprobs(full[0])
