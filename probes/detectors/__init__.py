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
from .base import (
    REGISTRY,
    Detector,
    DetectorResult,
    check_access,
    check_reference,
    get_detector,
    known_detector,
    order_registry,
)
from .completion import PartialCompletion
from .likelihood import PPL, LogProber, MinK, MinKPlusPlus, ReCaLL, Zlib
from .reference import Ref
from .rl import PolicyDrift, RewardGain
from .rollout import AnswerShift, GoldShift, ShiftVote
from .sampling import CDD, EntropyNoise, EntropyTemp, MinKNN, SelfCritique

# every listing's order (the CLI's help, `detect.names: all`, the score files' columns), whatever the
# order of the imports above; a new detector is one module, one import above and one name here
ORDER = (
    "ppl",
    "min_k",
    "min_k_plus_plus",
    "zlib",
    "recall",
    "logprober",
    "ref",
    "cdd",
    "min_knn",
    "self_critique",
    "entropy_temp",
    "entropy_noise",
    "partial_completion",
    "policy_drift",
    "reward_gain",
    "shift_vote",
    "answer_shift",
    "gold_shift",
)
order_registry(ORDER)
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
    "ORDER",
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
    "ShiftVote",
    "AnswerShift",
    "GoldShift",
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
    "known_detector",
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
