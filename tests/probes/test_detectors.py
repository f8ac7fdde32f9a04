"""Detector classes: unknown names and parameters, access checks, answer budgets, what is counted
(the checks every registered detector passes — its declared direction, order, NaN, parameters,
seeds, access — are tests/detector_checks.py, run by test_detector_checks.py)."""

from __future__ import annotations

import pytest

from probes.detectors import REGISTRY, check_access, get_detector
from probes.errors import ConfigError
from probes.responders.base import Access


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


def test_responses_default_to_1024_new_tokens():
    """SPEC §5 (it was 256): every detector that declares an answer budget."""
    budgets = {
        name: cls.declared["max_new_tokens"].default
        for name, cls in REGISTRY.items()
        if "max_new_tokens" in cls.declared
    }
    assert budgets and set(budgets.values()) == {1024}, budgets


def test_capped_responses_are_counted_and_reported(loaded_models):
    from generation.records import Question
    from probes.detectors.run import run_detectors
    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    responder = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    questions = ["What is 2 + 3?", "Hi", "Solve for $x$: $3x - 4 = -10$."]
    summary = run_detectors(
        ["ppl", "self_critique", "cdd"],
        [Question(i, q) for i, q in zip("abc", questions)],
        responder,
        params={"ppl": {"max_new_tokens": 3}, "self_critique": {"max_new_tokens": 3}, "cdd": {"n": 2, "max_tokens": 3}},
    )
    answers = [g[0] for g in responder.generate(questions, GenerationParams(max_new_tokens=3))]
    capped = sum(len(g.token_ids) == 3 and g.finish_reason == "length" for g in answers)
    assert capped >= 2  # a random toy rarely stops within 3 tokens
    capped_ids = [i for i, g in zip(["a", "b", "c"], answers) if g.finish_reason == "length"]
    assert summary.info["detectors"]["ppl"]["responses"] == {
        "n": 3,
        "capped": capped,
        "prompt_cut": 0,
        "capped_ids": capped_ids,
        "prompt_cut_ids": [],
    }
    assert summary.raw.columns["ppl_capped"].tolist() == [float(g.finish_reason == "length") for g in answers]
    assert summary.info["detectors"]["self_critique"]["responses"]["n"] == 6
    assert summary.info["detectors"]["cdd"]["responses"]["n"] == 9
    notes = "\n".join(summary.info["notes"])
    assert f"ppl: {capped} of 3 responses stopped at the token budget (3); most answers are truncated" in notes
    assert summary.info["detectors"]["cdd"]["responses"]["capped"] > 0
    assert not any(
        n.startswith("cdd: ") for n in summary.info["notes"]
    )  # CDD compares its first max_tokens tokens by design


def test_a_detector_declares_whether_it_samples_at_a_temperature():
    """The run's sampling temperature goes to the detectors that declare ``samples_at_temperature``
    (before, to any whose constructor had a parameter named ``temperature``): the declaration and
    the constructor agree for every registered detector."""

    from probes.detectors import REGISTRY
    from probes.detectors.selection import with_sampling_temperature

    for name, cls in REGISTRY.items():
        assert cls.samples_at_temperature == ("temperature" in cls.parameters), name
    from probes.detectors import get_detector

    assert (
        repr(get_detector("min_knn", n=4, k=2))
        == "min_knn(n=4, k=2, temperature=0.7, top_p=0.95, max_new_tokens=1024, unit='tokens', seed=0)"
    )
    params = with_sampling_temperature({"cdd": {"temperature": 0.3}}, ["cdd", "min_knn", "ppl"], 1.0)
    assert params == {"cdd": {"temperature": 0.3}, "min_knn": {"temperature": 1.0}, "ppl": {}}
