"""Statistics of next-token distributions given as log-probabilities, shared by the responders
(which record them) and the detectors (which read them); it sits below both."""

from __future__ import annotations

import numpy as np


def entropy_from_logprobs(logprobs: np.ndarray) -> np.ndarray:
    """−Σ p log p (nats) over each row of log-probabilities ``[..., V]``: the exact entropy when a
    row is the whole vocabulary; for a top-K row, the top-K part of the sum, a lower bound that
    misses only the tail's terms (the approximation API backends record). ``-inf`` entries are
    allowed (p = 0)."""
    lp = np.asarray(logprobs, dtype=np.float64)
    p = np.exp(lp)
    return -(p * np.where(p > 0, lp, 0.0)).sum(axis=-1)


def topk_moments(top: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Min-K%++'s μ and σ of log p at each position from its top-K log-probs ``[T, K]`` (−inf =
    absent): the mean and std of log p under p renormalised over the top K — the approximation
    SPEC §5 allows on API backends (the full vocabulary is not visible). Returns two ``[T]``, or
    None when the server sent no top-K log-probs."""
    top = np.asarray(top, dtype=np.float64)
    if top.shape[0] and not top.shape[-1]:
        return None, None
    p = np.exp(top)
    finite = np.where(p > 0, top, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = p / p.sum(axis=-1, keepdims=True)
    mu = (q * finite).sum(axis=-1)
    sigma = np.sqrt(np.clip((q * finite**2).sum(axis=-1) - mu**2, 0.0, None))
    return mu, sigma


def padded_rows(rows: list[list[float]]) -> np.ndarray:
    """``[T, K]`` log-probs from rows of unequal length, short rows padded with −inf (p = 0)."""
    width = max((len(r) for r in rows), default=0)
    return np.array([r + [-np.inf] * (width - len(r)) for r in rows], dtype=np.float64).reshape(len(rows), width)
