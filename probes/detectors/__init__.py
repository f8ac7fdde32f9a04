"""Output-level contamination detectors (SPEC §5).

The pure statistics are public, for use on any model's generations::

    from probes.detectors import penalized_cosine, min_knn_statistic, cdd_peak, min_k_prob, \\
        min_k_plus_plus, logprober_safe_score, zlib_ratio, rouge_l_f1

Each returns the raw statistic in its natural direction (see its docstring). The detector
classes (``REGISTRY``, :func:`get_detector`) run them through a responder and orient every score
higher = member.
"""

from __future__ import annotations

from ..token_distributions import entropy_from_logprobs
from .base import REGISTRY, Detector, DetectorResult, check_access, check_declared, check_reference, get_detector

# isort: off
# importing registers them, in this order: the registry's order is every listing's (the CLI's help,
# `detect.names: all`, the score files' columns), so it is kept, not sorted
from .likelihood import PPL, LogProber, MinK, MinKPlusPlus, ReCaLL, Zlib
from .reference import Ref
from .sampling import CDD, EntropyNoise, EntropyTemp, MinKNN, SelfCritique
from .completion import PartialCompletion
from .rl import PolicyDrift, RewardGain

# isort: on
from .stats import (
    cdd_peak,
    cut_point,
    logprober_safe_score,
    min_k_plus_plus,
    min_k_prob,
    min_knn_statistic,
    penalized_cosine,
    perplexity,
    recall_ratio,
    rouge_l_f1,
    zlib_ratio,
)

__all__ = [
    "CDD",
    "PPL",
    "REGISTRY",
    "EntropyNoise",
    "EntropyTemp",
    "LogProber",
    "MinK",
    "MinKNN",
    "MinKPlusPlus",
    "PartialCompletion",
    "PolicyDrift",
    "ReCaLL",
    "Ref",
    "RewardGain",
    "SelfCritique",
    "Zlib",
    "Detector",
    "DetectorResult",
    "cdd_peak",
    "check_access",
    "check_reference",
    "cut_point",
    "entropy_from_logprobs",
    "get_detector",
    "check_declared",
    "logprober_safe_score",
    "min_k_plus_plus",
    "min_k_prob",
    "min_knn_statistic",
    "penalized_cosine",
    "perplexity",
    "recall_ratio",
    "rouge_l_f1",
    "zlib_ratio",
]
