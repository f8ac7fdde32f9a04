"""Real signal on a real model: a tiny GPT-2 trained (CPU, seconds, seeded) to memorise 24 short
Q→A texts with arbitrary answers, scored against 24 unseen texts of the same form. Every detector
runs with its defaults through the local responder and the response store."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from cache.config import ModelConfig
from cache.loading import load_model
from probes.detectors import REGISTRY, get_detector
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore
from probes.testbed.memorised import TEMPLATE, build_memorised_model

pytestmark = pytest.mark.slow
# the two detectors that sample the reference model too: 8 of Min-kNN's 32 samples (the first 8 come
# from the store), to keep the suite's time; benchmarks/bench_memorised.py runs them with their defaults
FEWER = {"policy_drift": {"n": 8}, "reward_gain": {"n": 8}}


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    root = tmp_path_factory.mktemp("memorised")
    model = build_memorised_model(root / "model", seed=0)
    loaded = load_model(ModelConfig(source=str(model.path), device="cpu"))
    responder = CachedResponder(
        LocalResponder(loaded, PromptFormat(mode="raw", template=TEMPLATE), batch_size=64),
        ResponseStore(root / "responses.sqlite"),
    )
    before = load_model(ModelConfig(source=str(model.reference), device="cpu"))
    reference = CachedResponder(
        LocalResponder(before, PromptFormat(mode="raw", template=TEMPLATE), batch_size=64),
        ResponseStore(root / "responses.sqlite"),
    )
    questions = [q for q, _ in model.members] + [q for q, _ in model.non_members]
    answers = [a for _, a in model.members] + [a for _, a in model.non_members]
    labels = [1] * len(model.members) + [0] * len(model.non_members)
    results = {
        name: get_detector(name, **FEWER.get(name, {}))
        .fit(reference=reference, answers=answers)
        .score(questions, responder)
        for name in REGISTRY
    }
    results["min_k_plus_plus@question"] = get_detector("min_k_plus_plus", target="question").score(questions, responder)
    results["ref@self"] = get_detector("ref").fit(reference=responder).score(questions, responder)
    return responder, reference, questions, labels, results, answers


@pytest.mark.parametrize(
    "name",
    [
        "ppl",
        "min_k",
        "min_k_plus_plus@question",
        "recall",
        "logprober",
        "min_knn",
        "cdd",
        "zlib",
        "ref",
        "partial_completion",
        "policy_drift",
        "reward_gain",
    ],
)
def test_detector_separates_memorised_from_unseen(audit, name):
    _, _, _, labels, results, _ = audit
    assert roc_auc_score(labels, results[name].scores) >= 0.9


def test_ref_against_the_model_itself_is_exactly_at_chance(audit):
    _, _, _, labels, results, _ = audit
    assert (results["ref@self"].raw == 0.0).all() and roc_auc_score(labels, results["ref@self"].scores) == 0.5


def test_partial_completion_reproduces_member_questions(audit):
    """Trained on the whole text, the model completes a member's question from its first 60 %."""
    _, _, _, _, results, _ = audit
    exact = results["partial_completion"].extra["exact_match"]
    assert exact[:24].mean() > exact[24:].mean()


def test_logprober_decision_rule_flags_members(audit):
    _, _, _, _, results, _ = audit
    flagged = results["logprober"].extra["contaminated"]
    np.testing.assert_array_equal(flagged, results["logprober"].raw < 1.0)  # the seed's rule: safe score < 1
    assert flagged[:24].mean() > 0.9 > flagged[24:].mean()


def test_min_k_plus_plus_on_greedy_responses_points_the_other_way(audit):
    """Pinned finding: on the model's own greedy answer every token is the argmax, so
    (log p − μ)/σ is largest where the distribution is flat, i.e. for non-members (the LaRA
    seed's Table 1 shows Min-K++ at AUC 0.20–0.29 on RL checkpoints for the same reason)."""
    _, _, _, labels, results, _ = audit
    assert roc_auc_score(labels, results["min_k_plus_plus"].scores) < 0.5


@pytest.mark.xfail(
    strict=True,
    reason="a memorising 2-layer model does not follow the 'solve it differently' "
    "instruction and has no RL policy collapse, which is what Self-Critique measures",
)
def test_self_critique_separates_memorised_from_unseen(audit):
    _, _, _, labels, results, _ = audit
    assert roc_auc_score(labels, results["self_critique"].scores) >= 0.9


def test_a_rerun_generates_nothing(audit):
    responder, reference, questions, _, results, answers = audit
    generated, scored = responder.counter.generated, responder.counter.scored
    for name in REGISTRY:
        again = (
            get_detector(name, **FEWER.get(name, {}))
            .fit(reference=reference, answers=answers)
            .score(questions, responder)
        )
        np.testing.assert_array_equal(again.raw, results[name].raw)
    assert responder.counter.generated == generated and responder.counter.scored == scored
    assert responder.counter.cache_hits > 0
