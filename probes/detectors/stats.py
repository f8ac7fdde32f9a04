"""The statistics of the output-level detectors (SPEC §5), as pure functions of token log-probs,
entropy sequences and token sequences, so they can be applied to any model's generations.

Each returns the detector's *raw* statistic in its natural direction (stated per function);
the detector classes orient them to higher = member. Edit distances use rapidfuzz's compiled
Levenshtein on token-id sequences (or strings), never a Python double loop.
"""

from __future__ import annotations

import math
import zlib
from typing import Sequence

import numpy as np

Tokens = Sequence[int] | str


def perplexity(logprobs: Sequence[float]) -> float:
    """exp(−mean token log-prob) — lower = member. NaN for an empty text."""
    lp = np.asarray(logprobs, dtype=np.float64)
    return float(np.exp(-lp.mean())) if lp.size else math.nan


def _lowest_mean(values: np.ndarray, k: float) -> float:
    """Mean of the ⌊k·n⌋ smallest values (at least one); NaN when empty."""
    if not values.size:
        return math.nan
    count = max(1, int(math.floor(k * values.size)))
    return float(np.sort(values)[:count].mean())


def min_k_prob(logprobs: Sequence[float], k: float = 0.2) -> float:
    """Min-K% Prob: mean of the lowest ⌊k·n⌋ token log-probs (at least one) — higher = member."""
    _check_fraction(k)
    return _lowest_mean(np.asarray(logprobs, dtype=np.float64), k)


def min_k_plus_plus(logprobs: Sequence[float], mu: Sequence[float], sigma: Sequence[float], k: float = 0.2) -> float:
    """Min-K%++: z_t = (log p(x_t) − μ_t) / σ_t with μ_t, σ_t the mean and std of log p over the
    vocabulary under p; mean of the lowest ⌊k·n⌋ z_t — higher = member. A position with σ_t = 0
    (a one-hot next-token distribution, where log p(x_t) = μ_t) counts as z_t = 0."""
    _check_fraction(k)
    lp, m, s = (np.asarray(x, dtype=np.float64) for x in (logprobs, mu, sigma))
    if not (lp.shape == m.shape == s.shape):
        raise ValueError(f"logprobs, mu and sigma must have one length; got {lp.shape}, {m.shape}, {s.shape}")
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(s > 0, (lp - m) / np.where(s > 0, s, 1.0), 0.0)
    return _lowest_mean(z, k)


def recall_ratio(conditional_logprobs: Sequence[float], logprobs: Sequence[float]) -> float:
    """ReCaLL: LL(x | P) / LL(x), mean token log-likelihoods of x with and without a non-member
    prefix P — higher = member (a non-member prefix lowers a memorised text's likelihood more)."""
    cond, plain = np.asarray(conditional_logprobs, dtype=np.float64), np.asarray(logprobs, dtype=np.float64)
    if not cond.size or not plain.size:
        return math.nan
    denominator = plain.mean()
    return float(cond.mean() / denominator) if denominator != 0 else math.nan


def penalized_cosine(e1: Sequence[float], e2: Sequence[float]) -> float:
    """cos(pad(e1), pad(e2)) · min(|e1|, |e2|) / max(|e1|, |e2|), the shorter zero-padded; 0 when
    either norm is 0 (so also for an empty sequence). Self-Critique's and the entropy baselines'
    similarity — higher = member."""
    a, b = np.asarray(e1, dtype=np.float64), np.asarray(e2, dtype=np.float64)
    n = max(a.size, b.size)
    if n == 0:
        return 0.0
    a, b = np.pad(a, (0, n - a.size)), np.pad(b, (0, n - b.size))
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norms == 0.0:
        return 0.0
    return float(a @ b / norms) * min(len(e1), len(e2)) / n


def min_knn_statistic(sequences: Sequence[Tokens], k: int = 10) -> float:
    """Min-kNN Distance: normalised Levenshtein distance (edit distance / length of the longer; 0
    between two empty sequences) between all pairs of completions, each completion's nearest
    neighbour distance, and the mean of the k smallest of those — lower = member. NaN with fewer
    than 2 completions; k is capped at the number of completions."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    seqs = [list(s) if not isinstance(s, str) else s for s in sequences]
    if len(seqs) < 2:
        return math.nan
    dist = process.cdist(seqs, seqs, scorer=Levenshtein.normalized_distance, dtype=np.float64, workers=1)
    np.fill_diagonal(dist, np.inf)
    nearest = dist.min(axis=1)
    return float(np.sort(nearest)[: min(k, len(nearest))].mean())


def cdd_peak(greedy: Tokens, samples: Sequence[Tokens], alpha: float = 0.05, max_tokens: int = 100) -> float:
    """CDD: fraction of samples whose token edit distance to the greedy output is ≤ α·ℓ_max, all
    sequences truncated to ``max_tokens`` and ℓ_max the longest truncated length among the greedy
    output and the samples — higher = member (a peaked output distribution). NaN without samples."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    if not samples:
        return math.nan
    g = _truncate(greedy, max_tokens)
    s = [_truncate(x, max_tokens) for x in samples]
    l_max = max(len(g), *(len(x) for x in s))
    d = process.cdist([g], s, scorer=Levenshtein.distance, dtype=np.int64, workers=1)[0]
    return float(np.mean(d <= alpha * l_max))


def logprober_safe_score(logprobs: Sequence[float]) -> float:
    """LogProber's safe score of a question's token log-probs (first token excluded by the caller):
    log-probs sorted descending (least surprising first), divided by the length, cumulatively
    summed; integral = the sum of that curve (≤ 0); safe score = log(−integral) — lower = more
    familiar (the seed flags contamination below 1). −inf when every log-prob is 0; NaN when empty."""
    lp = np.asarray(logprobs, dtype=np.float64)
    if not lp.size:
        return math.nan
    curve = np.cumsum(np.sort(lp)[::-1] / lp.size)
    integral = float(curve.sum())
    return math.log(-integral) if integral < 0 else -math.inf


def zlib_ratio(logprobs: Sequence[float], text: str) -> float:
    """zlib (Carlini et al. 2021): mean token NLL of a text divided by the length in bytes of its
    zlib-compressed UTF-8 (``zlib.compress``, default level) — lower = member. NaN without tokens."""
    lp = np.asarray(logprobs, dtype=np.float64)
    if not lp.size:
        return math.nan
    return float(-lp.mean() / len(zlib.compress(text.encode("utf-8"))))


def rouge_l_f1(candidate: Sequence[int], reference: Sequence[int]) -> float:
    """ROUGE-L F1 of two token sequences: P = LCS/|candidate|, R = LCS/|reference|, F1 = 2PR/(P+R)
    (0 when either is empty or nothing is shared); the LCS by rapidfuzz's compiled LCSseq —
    higher = member."""
    from rapidfuzz.distance import LCSseq

    if not len(candidate) or not len(reference):
        return 0.0
    lcs = LCSseq.similarity(list(candidate), list(reference))
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(candidate), lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


def cut_point(text: str, spans: Sequence[tuple[int, int, int]], ratio: float = 0.6) -> int | None:
    """Where partial-prompt completion cuts a question: after ⌊ratio·n⌋ of its n tokens (at least
    1, at most n − 1; ``spans`` are (unit, start, end) per token), moved back to a word boundary —
    the start of the whitespace before the word that token ends in. None when no boundary leaves
    text on both sides."""
    if not 0 < ratio < 1:
        raise ValueError(f"ratio must be in (0, 1), got {ratio}")
    n = len(spans)
    if n < 2:
        return None
    p = spans[min(max(int(math.floor(ratio * n)), 1), n - 1) - 1][2]
    while p > 0 and (p >= len(text) or not text[p].isspace()):
        p -= 1
    while p > 0 and text[p - 1].isspace():
        p -= 1
    return p if text[:p].strip() and text[p:].strip() else None


def _truncate(x: Tokens, n: int) -> Tokens:
    return x[:n] if isinstance(x, str) else list(x)[:n]


def _check_fraction(k: float) -> None:
    if not 0 < k <= 1:
        raise ValueError(f"k must be a fraction in (0, 1], got {k}")
