"""The detectors that compare with the checkpoint before RL (SPEC §5): policy drift against a naive
per-position KL over the full vocabulary (exactly 0 against itself), reward gain against rewards
computed by hand on the shipped testbed, and the verifier's rules."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from generation.records import Question
from probes.accuracy.verifier import RULES, gold_readable, judge
from probes.detectors import get_detector
from probes.detectors.on_controls import ControlPlan
from probes.detectors.run import run_detectors
from probes.errors import ConfigError
from probes.responders.base import GenerationParams, Rollout
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore

TESTBED = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints" / "cpu-seed0"
QUESTIONS = ["What is 2 + 3?", "A train travels 60 km in 1.5 hours. What is its average speed?", "Hi"]
RAW = PromptFormat(mode="raw", template="Q: {prompt}\nA:")


@pytest.fixture(scope="module")
def pair(loaded_models, other_gpt2_dir):
    from cache.config import ModelConfig
    from cache.loading import load_model

    audited = LocalResponder(loaded_models["gpt2"], RAW, batch_size=4)
    reference = LocalResponder(load_model(ModelConfig(source=str(other_gpt2_dir), device="cpu")), RAW, batch_size=4)
    return audited, reference


def naive_kl(audited, reference, prompt: str, completion: list[int], stopped: bool) -> float:
    """Mean over the completion's positions (and the end-of-sequence one when it stopped) of
    Σ_v p_a(v) (log p_a(v) − log p_r(v)), one sequence at a time, in float64, summed over the
    vocabulary by a plain loop."""
    ids = audited.encode_prompt(prompt) + completion
    with torch.inference_mode():
        la = torch.log_softmax(audited.model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
        lr = torch.log_softmax(reference.model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    start = len(ids) - len(completion)
    per_position = []
    for t in range(start, len(ids) + stopped):  # the distribution at t − 1 predicts position t
        a, r = la[t - 1].tolist(), lr[t - 1].tolist()
        per_position.append(sum(math.exp(x) * (x - y) for x, y in zip(a, r)))
    return float(np.mean(per_position))


def test_policy_drift_against_a_naive_full_vocabulary_kl_and_zero_against_itself(pair):
    audited, reference = pair
    detector = get_detector("policy_drift", n=3, max_new_tokens=10, temperature=1.0).fit(reference=reference)
    result = detector.score(QUESTIONS, audited)
    samples = audited.generate(QUESTIONS, GenerationParams(max_new_tokens=10, temperature=1.0, top_p=0.95, n=3))
    for i, (question, row) in enumerate(zip(QUESTIONS, samples)):
        per_answer = [
            naive_kl(audited, reference, question, s.token_ids, s.finish_reason == "stop")
            for s in row
            if s.token_ids or s.finish_reason == "stop"
        ]
        assert result.raw[i] == pytest.approx(np.mean(per_answer), rel=1e-4, abs=1e-6)
    assert (result.raw > 0).all() and result.n_responses.tolist() == [3, 3, 3]
    itself = get_detector("policy_drift", n=3, max_new_tokens=10, temperature=1.0).fit(reference=audited)
    assert (itself.score(QUESTIONS, audited).raw == 0.0).all()  # a model is its own reference: exactly 0


def test_policy_drift_of_a_model_against_itself_is_zero_at_every_position_without_a_forward_pass(pair):
    """The reference's own detect stage compares it with itself: the positions are those a real
    comparison has, each exactly 0, and the model is never run for them."""
    audited, reference = pair
    five = tuple(audited.tokenizer.encode(" 5"))
    rollouts = [Rollout(QUESTIONS[0], five, True), Rollout(QUESTIONS[1], (), True), Rollout(QUESTIONS[2], five, False)]
    lengths = [len(x) for x in audited.divergence(rollouts, reference)]
    calls: list[int] = []
    hook = audited.model.register_forward_hook(lambda *_: calls.append(1))
    try:
        itself = audited.divergence(rollouts, audited)
    finally:
        hook.remove()
    assert calls == [] and [len(x) for x in itself] == lengths == [len(five) + 1, 1, len(five)]
    assert all((x == 0.0).all() for x in itself)


def test_policy_drift_counts_the_end_of_sequence_position_of_a_stopped_answer(pair):
    audited, reference = pair
    completions = [audited.tokenizer.encode(" 5"), []]  # the second stopped at once: only its EOS position
    kl = audited.divergence([Rollout(q, tuple(c), True) for q, c in zip(QUESTIONS[:2], completions)], reference)
    assert [len(x) for x in kl] == [len(completions[0]) + 1, 1]
    for question, completion, row in zip(QUESTIONS, completions, kl):
        assert row.mean() == pytest.approx(naive_kl(audited, reference, question, completion, True), rel=1e-5)
    cut = audited.divergence([Rollout(QUESTIONS[0], tuple(completions[0]), False)], reference)[0]
    np.testing.assert_allclose(cut, kl[0][:-1], rtol=1e-5)  # a capped answer has no end position


def test_policy_drift_of_float64_models_is_taken_in_float64(pair):
    """Two float64 checkpoints compare in float64 (cast to float32, the KL of each position is off
    by about 4e-8 here): against the naive float64 KL within 1e-12."""
    import copy
    import dataclasses

    doubled = [
        LocalResponder(dataclasses.replace(r.loaded, model=copy.deepcopy(r.model).double()), RAW, batch_size=4)
        for r in pair
    ]
    audited, reference = doubled
    completions = [audited.tokenizer.encode(" 5 km"), audited.tokenizer.encode(" 40 km per hour")]
    rollouts = [Rollout(q, tuple(c), True) for q, c in zip(QUESTIONS[:2], completions)]
    for question, completion, row in zip(QUESTIONS, completions, audited.divergence(rollouts, reference)):
        assert row.mean() == pytest.approx(naive_kl(audited, reference, question, completion, True), rel=0, abs=1e-12)


def test_policy_drift_through_the_store_reuses_min_knn_samples_and_refuses_a_served_model(pair, tmp_path):
    audited, reference = pair
    store = ResponseStore(tmp_path / "s.sqlite")
    cached, cached_ref = CachedResponder(audited, store), CachedResponder(reference, store)
    params = {"min_knn": {"n": 4, "k": 2, "max_new_tokens": 8}, "policy_drift": {"n": 4, "max_new_tokens": 8}}
    summary = run_detectors(
        ["min_knn", "policy_drift"],
        [Question(i, q) for i, q in zip("abc", QUESTIONS)],
        cached,
        params=params,
        reference=cached_ref,
    )
    assert summary.info["counts"]["generated"] == 12  # policy drift read Min-kNN's 12 samples from the store
    direct = get_detector("policy_drift", n=4, max_new_tokens=8).fit(reference=reference).score(QUESTIONS, audited)
    np.testing.assert_allclose(summary.table.columns["policy_drift"], direct.scores, rtol=1e-6)

    class Served:
        access = frozenset(a for a in audited.access if a.value != "full_distribution")
        identity = {"kind": "openai"}

    with pytest.raises(ConfigError, match="needs full_distribution"):
        run_detectors(["policy_drift"], [Question("a", QUESTIONS[0])], Served(), reference=cached_ref)


def test_the_verifier_rules_by_hand():
    assert tuple(vars(judge("6 * 2 = 12. 12 + 16 = 28. The answer is 28.", 28)).values()) == (1.0, "math-verify")
    assert judge("The answer is 27.", 28).reward == 0.0
    assert (
        judge(r"So the answer is $\boxed{\frac{1}{2}}$", "0.5").reward == 1.0
        and judge(r"\boxed{2}", "0.5").reward == 0.0
    )
    assert tuple(vars(judge("so 4 + 6 = 10\n#### 1,000", "1000")).values()) == (1.0, "####")
    assert judge("#### 12", 13).reward == 0.0 and judge("work\n#### -7.", -7).reward == 1.0
    assert tuple(vars(judge("work\n#### \\frac{3}{4}", 0.75)).values()) == (1.0, "####")  # #### read by value
    assert tuple(vars(judge("#### Step 3: add them\nso \\boxed{42}", 42)).values()) == (1.0, "math-verify")  # a heading
    assert tuple(vars(judge("The capital is\nParis.", "Paris")).values()) == (1.0, "exact")
    assert tuple(vars(judge("The answer is B.", "B")).values()) == (1.0, "exact")
    assert judge("I think the answer is C", "B").reward == 0.0 and judge("", 28).reward == 0.0


def test_reward_gain_against_rewards_computed_by_hand_on_the_testbed(tmp_path):
    from cache.config import ModelConfig
    from cache.loading import load_model

    rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()[:12]]
    questions, answers = [r["question"] for r in rows], [r["answer"] for r in rows]
    rl = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "rl"), device="cpu")), RAW, batch_size=64)
    sft = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "sft"), device="cpu")), RAW, batch_size=64)
    result = (
        get_detector("reward_gain", n=6, max_new_tokens=48, temperature=1.0)
        .fit(reference=sft, answers=answers)
        .score(questions, rl)
    )
    params = GenerationParams(max_new_tokens=48, temperature=1.0, top_p=0.95, n=6)

    def by_hand(responder):  # the testbed's own reward: the first "The answer is N" equals the answer
        rewards = []
        for row, answer in zip(responder.generate(questions, params), answers):
            found = [re.search(r"The answer is (-?\d+)", g.text) for g in row]
            rewards.append(np.mean([bool(m) and int(m.group(1)) == answer for m in found]))
        return np.array(rewards)

    np.testing.assert_allclose(result.extra["reward_audited"], by_hand(rl))
    np.testing.assert_allclose(result.extra["reward_reference"], by_hand(sft))
    np.testing.assert_allclose(result.raw, by_hand(rl) - by_hand(sft))
    assert any("answers judged by math-verify 144" in n for n in result.notes)
    itself = get_detector("reward_gain", n=6, max_new_tokens=48, temperature=1.0).fit(reference=rl, answers=answers)
    assert (itself.score(questions, rl).raw == 0.0).all()


def test_reward_gain_without_answers_is_refused_in_one_line_and_never_calibrated(pair):
    audited, reference = pair
    with pytest.raises(ConfigError, match="no question has one"):
        run_detectors(["reward_gain"], [Question(i, q) for i, q in zip("ab", QUESTIONS)], audited, reference=reference)
    summary = run_detectors(
        ["reward_gain"],
        [Question("a", QUESTIONS[0], answer="5"), Question("b", QUESTIONS[1])],
        audited,
        params={"reward_gain": {"n": 2, "max_new_tokens": 6}},
        reference=reference,
        controls=ControlPlan({"a": ["What is 3 + 4?", "What is 1 + 9?"]}),
    )
    assert "reward_gain@cal" not in summary.table.columns and math.isnan(summary.table.columns["reward_gain"][1])
    assert any("not scored on the controls" in n for n in summary.info["notes"])
    # the reference's sampling is counted where the summary is shown, as the audited model's is
    drawn = reference.counter.generated
    assert drawn >= 2 and f"reference model: {drawn} completions generated, " in summary.describe()
    # controls whose re-solved answers the verifier cannot read are no answers: not calibrated, said so
    unreadable = run_detectors(
        ["reward_gain"],
        [Question("a", QUESTIONS[0], answer="5")],
        audited,
        params={"reward_gain": {"n": 2, "max_new_tokens": 6}},
        reference=reference,
        controls=ControlPlan({"a": ["What is 3 + 4?", "What is 1 + 9?"]}, {"a": ["a=\\", "b=\\"]}),
    )
    assert "reward_gain@cal" not in unreadable.table.columns
    assert any("not scored on the controls (no control has an answer it can use" in n for n in unreadable.info["notes"])


def test_reward_gain_leaves_out_and_counts_a_question_whose_answer_the_verifier_cannot_read(pair):
    """A known answer math-verify cannot parse would mark every sample wrong on both models (a gain
    of 0 that measures nothing): NaN, counted apart from the questions without an answer."""
    audited, reference = pair
    before = audited.counter.generated, reference.counter.generated
    result = (
        get_detector("reward_gain", n=2, max_new_tokens=6, seed=11)
        .fit(reference=reference, answers=["5", "a=\\", None])
        .score(QUESTIONS, audited)
    )
    assert not math.isnan(result.raw[0]) and math.isnan(result.raw[1]) and math.isnan(result.raw[2])
    # only the question it can judge is sampled (2 samples a model), and its samples are the ones
    # it draws asked alone or with the others
    assert (audited.counter.generated, reference.counter.generated) == (before[0] + 2, before[1] + 2)
    assert result.n_responses.tolist() == [4, 0, 0]
    alone = get_detector("reward_gain", n=2, max_new_tokens=6, seed=11).fit(reference=reference, answers=["5"])
    assert alone.score(QUESTIONS[:1], audited).raw[0] == result.raw[0]
    assert any("1 question(s) whose answer the verifier cannot read" in n for n in result.notes)
    assert any("1 question(s) without an answer" in n for n in result.notes)
    assert gold_readable("5") and gold_readable("\\frac{1}{2}") and gold_readable("(B)") and gold_readable("x^2+1")
    assert not gold_readable("a=\\")


def test_reward_gain_whose_answers_the_verifier_cannot_read_is_refused_before_any_sampling(pair):
    audited, reference = pair
    before = audited.counter.generated, reference.counter.generated
    questions = [Question("a", QUESTIONS[0], answer="a=\\"), Question("b", QUESTIONS[1])]
    with pytest.raises(ConfigError, match="no answer given is one the verifier can read: give each as a number"):
        run_detectors(["reward_gain"], questions, audited, reference=reference)
    assert (audited.counter.generated, reference.counter.generated) == before


def test_reward_gain_on_the_controls_judges_each_against_its_own_reanswered_answer(tmp_path):
    """Controls with a re-solved answer (generation.answers) are scored by reward gain, each judged
    against its own answer: the control column equals the detector run on those texts as questions;
    a control without an answer stays NaN and is counted."""
    from cache.config import ModelConfig
    from cache.loading import load_model

    rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()[:4]]
    ids, questions, answers = [r["id"] for r in rows], [r["question"] for r in rows], [r["answer"] for r in rows]
    similar = {
        r["id"]: [r["question"].replace(f" {r['extra']['numbers']['b']} ", f" {r['extra']['numbers']['b'] + 1} ", 1)]
        for r in rows
    }
    given = {qid: [None if k == 0 else 7] for k, qid in enumerate(ids)}  # the first question's control has no answer
    rl = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "rl"), device="cpu")), RAW, batch_size=64)
    sft = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "sft"), device="cpu")), RAW, batch_size=64)
    params = {"reward_gain": {"n": 4, "max_new_tokens": 48, "temperature": 1.0}}
    summary = run_detectors(
        ["reward_gain"],
        [Question(i, q, answer=a) for i, q, a in zip(ids, questions, answers)],
        rl,
        params=params,
        reference=sft,
        controls=ControlPlan(similar, given),
    )
    column = summary.controls.columns["reward_gain"]
    assert math.isnan(column[0]) and "reward_gain@cal" in summary.table.columns
    alone = get_detector("reward_gain", **params["reward_gain"]).fit(reference=sft, answers=[7, 7, 7])
    np.testing.assert_allclose(column[1:], alone.score([similar[i][0] for i in ids[1:]], rl).scores)
    assert any("scored on the 3 of 4 controls with a re-solved answer it can use" in n for n in summary.info["notes"])


def test_the_accuracy_stage_leaves_an_answer_the_verifier_cannot_read_unjudged(pair):
    """The greedy answer of a question whose known answer math-verify cannot parse is not judged
    (empty ``correct``, the reason written), as a question without an answer is not."""
    from probes.operations.accuracy import judge_answers

    audited, _ = pair
    questions = [
        Question("a", QUESTIONS[0], answer="5"),
        Question("b", QUESTIONS[1], answer="a=\\"),
        Question("c", "Hi"),
    ]
    rows = {row[0]: row for row in judge_answers(questions, audited, max_new_tokens=4)}
    assert rows["a"][1] in (0, 1) and rows["a"][2] in RULES
    assert rows["b"][1] == "" and rows["b"][2] == "an answer the verifier cannot read" and rows["b"][3]
    assert rows["c"][1:] == ["", "no answer to judge against", ""]


def test_reward_gain_takes_a_questions_first_controls_that_have_an_answer(tmp_path):
    """With one sampling control a question, reward gain scores its first control that has a re-solved
    answer — the second where the first has none — not the first whatever it holds (before: the
    question was left without a calibrated control)."""
    from cache.config import ModelConfig
    from cache.loading import load_model

    rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()[:2]]
    ids, questions, answers = [r["id"] for r in rows], [r["question"] for r in rows], [r["answer"] for r in rows]

    def bumped(r: dict, by: int) -> str:
        b = r["extra"]["numbers"]["b"]
        return r["question"].replace(f" {b} ", f" {b + by} ", 1)

    similar = {r["id"]: [bumped(r, 1), bumped(r, 2)] for r in rows}
    given = {ids[0]: [None, 9], ids[1]: [5, 6]}
    rl = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "rl"), device="cpu")), RAW, batch_size=64)
    sft = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "sft"), device="cpu")), RAW, batch_size=64)
    params = {"reward_gain": {"n": 4, "max_new_tokens": 48, "temperature": 1.0}}
    summary = run_detectors(
        ["reward_gain"],
        [Question(i, q, answer=a) for i, q, a in zip(ids, questions, answers)],
        rl,
        params=params,
        reference=sft,
        controls=ControlPlan(similar, given, sampling=1),
    )
    column = summary.controls.columns["reward_gain"]
    scored = [not math.isnan(v) for v in column]
    assert scored == [False, True, True, False]  # question 0: its second control; question 1: its first
    alone = get_detector("reward_gain", **params["reward_gain"]).fit(reference=sft, answers=[9, 5])
    np.testing.assert_allclose(column[[1, 2]], alone.score([similar[ids[0]][1], similar[ids[1]][0]], rl).scores)
