"""Output-level contamination detectors (SPEC §5).

The pure statistics are public, for use on any model's generations::

    from probes.detectors import penalized_cosine, min_knn_statistic, cdd_peak, min_k_prob, \\
        min_k_plus_plus, logprober_safe_score

Each returns the raw statistic in its natural direction (see its docstring).
"""

from __future__ import annotations

from .stats import (
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

__all__ = [
    "cdd_peak",
    "entropy_from_logprobs",
    "logprober_safe_score",
    "min_k_plus_plus",
    "min_k_prob",
    "min_knn_statistic",
    "penalized_cosine",
    "perplexity",
    "recall_ratio",
]
