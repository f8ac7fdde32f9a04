"""Detector classes: the registry, the raw directions (pinned), access checks, and the
orientation of every score (higher = member)."""

from __future__ import annotations

import numpy as np
import pytest

from probes.detectors import REGISTRY, check_access, get_detector
from probes.errors import ConfigError
from probes.responders.base import Access

EXPECTED_DIRECTIONS = {
    "ppl": ("perplexity", "lower = member"),
    "min_k": ("min_k_logprob", "higher = member"),
    "min_k_plus_plus": ("min_k_plus_plus_z", "higher = member"),
    "recall": ("recall_ratio", "higher = member"),
    "logprober": ("logprober_safe_score", "lower = member"),
    "cdd": ("cdd_peak", "higher = member"),
    "min_knn": ("min_knn_distance", "lower = member"),
    "self_critique": ("self_critique_similarity", "higher = member"),
    "entropy_temp": ("entropy_temp_similarity", "higher = member"),
    "entropy_noise": ("entropy_noise_similarity", "higher = member"),
}


def test_registry_pins_every_raw_direction():
    assert set(REGISTRY) == set(EXPECTED_DIRECTIONS)
    for name, (raw_name, direction) in EXPECTED_DIRECTIONS.items():
        cls = REGISTRY[name]
        assert (cls.raw_name, cls.raw_direction) == (raw_name, direction), name
        result = get_detector(name)._result([1.0, -2.0, np.nan])
        sign = 1.0 if direction == "higher = member" else -1.0
        np.testing.assert_array_equal(result.scores, sign * result.raw)
        assert result.raw_name == raw_name


def test_unknown_names_and_parameters_are_explained():
    with pytest.raises(ConfigError, match="Did you mean 'min_knn'"):
        get_detector("min_kn")
    with pytest.raises(ConfigError, match="has no parameter kk; its parameters: n, k, temperature"):
        get_detector("min_knn", kk=3)
    assert get_detector("min_knn", k=3).get_params()["k"] == 3


class _TopKResponder:
    access = frozenset({Access.SAMPLING, Access.TOKEN_IDS, Access.CHOSEN_LOGPROBS, Access.ENTROPY_TOPK})
    identity = {"kind": "openai"}


def test_access_is_checked_and_approximations_recorded():
    responder = _TopKResponder()
    notes = check_access(get_detector("self_critique"), responder)
    assert notes and "top-K" in notes[0]
    assert check_access(get_detector("cdd"), responder) == []
    with pytest.raises(ConfigError, match="needs text_logprobs.*run it on a local model"):
        check_access(get_detector("logprober"), responder)
    with pytest.raises(ConfigError, match="vocab_moments"):
        check_access(get_detector("min_k_plus_plus"), responder)
