"""Reference scores on the audited model's own rollouts (SPEC §10): the shift vote, the answer
shift and the gold shift against a naive one-sequence-at-a-time computation on the shipped
testbed's RL and SFT checkpoints, exactly 0 against itself, through the store and the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from generation.records import Question
from probes.accuracy.verifier import answer_span
from probes.detectors import REGISTRY, get_detector
from probes.detectors.on_controls import ControlPlan
from probes.detectors.rollout import span_tokens, window_vote
from probes.detectors.run import run_detectors
from probes.errors import ConfigError
from probes.responders.base import GenerationParams
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore

TESTBED = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints" / "cpu-seed0"
RAW = PromptFormat(mode="raw", template="Q: {prompt}\nA:")
SAMPLING = {"n": 3, "max_new_tokens": 48, "temperature": 1.0}
ROLLOUT_DETECTORS = ("shift_vote", "answer_shift", "gold_shift")


@pytest.fixture(scope="module")
def testbed():
    from cache.config import ModelConfig
    from cache.loading import load_model

    rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()[:6]]
    rl = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "rl"), device="cpu")), RAW, batch_size=64)
    sft = LocalResponder(load_model(ModelConfig(source=str(TESTBED / "sft"), device="cpu")), RAW, batch_size=64)
    return rows, rl, sft


def naive_logprobs(responder: LocalResponder, ids: list[int], first: int) -> np.ndarray:
    """log p(ids[t] | ids[:t]) for t ≥ ``first``, one unpadded sequence, float64."""
    with torch.inference_mode():
        logits = responder.model(input_ids=torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits, -1)
    return np.array([float(logp[t - 1, ids[t]]) for t in range(first, len(ids))])


def naive_shift(rl: LocalResponder, sft: LocalResponder, question: str, answer_ids: list[int]) -> np.ndarray:
    prompt = rl.encode_prompt(question)
    ids = prompt + list(answer_ids)
    return naive_logprobs(rl, ids, len(prompt)) - naive_logprobs(sft, ids, len(prompt))


def test_window_vote_and_the_answer_s_tokens_by_hand(testbed):
    assert window_vote(np.array([1.0, -2.0, 3.0, 3.0, -1.0]), 2) == pytest.approx(1 / 3)  # means -0.5, 3, -1
    assert window_vote(np.array([0.5]), 8) == 1.0 and np.isnan(window_vote(np.zeros(0), 8))
    assert window_vote(np.zeros(5), 2) == 0.0  # no shift is no vote
    _, rl, _ = testbed
    text = "6 * 3 = 18. 18 + 3 = 21. The answer is 21."
    ids = rl.tokenizer.encode(text)
    span = answer_span(text)
    assert text[span[0] : span[1]] == "21"
    tokens = span_tokens(rl.tokenizer, ids, span)
    assert rl.tokenizer.decode(ids[tokens.start : tokens.stop]).strip() == "21"  # one digit per token: two tokens
    assert len(tokens) == 2 and tokens.stop == len(ids) - 1  # the final period is not the answer


def test_the_three_rollout_scores_against_a_naive_per_sequence_computation(testbed):
    rows, rl, sft = testbed
    questions, answers = [r["question"] for r in rows], [r["answer"] for r in rows]
    samples = rl.generate(questions, GenerationParams(max_new_tokens=48, temperature=1.0, top_p=0.95, n=3))
    results = {
        name: get_detector(name, **SAMPLING).fit(reference=sft, answers=answers).score(questions, rl)
        for name in ROLLOUT_DETECTORS
    }
    located = 0
    for i, (question, row) in enumerate(zip(questions, samples)):
        votes, spans, golds = [], [], []
        for answer in row:
            delta = naive_shift(rl, sft, question, answer.token_ids)
            means = [np.mean(delta[k : k + 8]) for k in range(0, len(delta), 8)]
            votes.append(np.mean([m > 0 for m in means]))
            span = answer_span(answer.text)
            if span is None:
                continue
            located += 1
            # the answer's tokens found by a plain scan of every prefix's decoded length
            ends = [
                len(rl.tokenizer.decode(answer.token_ids[: k + 1], skip_special_tokens=True))
                for k in range(len(answer.token_ids))
            ]
            inside = [k for k, end in enumerate(ends) if end > span[0] and (ends[k - 1] if k else 0) < span[1]]
            spans.append(delta[inside].mean())
            context = rl.format(question) + answer.text[: span[0]]
            full = rl.tokenizer(context + str(answers[i]))["input_ids"]
            start = len(rl.tokenizer(context)["input_ids"])
            golds.append(naive_logprobs(rl, full, start).sum() - naive_logprobs(sft, full, start).sum())
        assert results["shift_vote"].raw[i] == pytest.approx(np.mean(votes), abs=1e-12)
        assert results["answer_shift"].raw[i] == pytest.approx(
            np.mean(spans) if spans else np.nan, rel=1e-4, abs=1e-6, nan_ok=True
        )
        assert results["gold_shift"].raw[i] == pytest.approx(
            np.mean(golds) if golds else np.nan, rel=1e-4, abs=1e-5, nan_ok=True
        )
    assert located >= 12  # the testbed's answers state "The answer is n."
    for result in results.values():
        assert result.n_responses.tolist() == [3] * len(questions)


def test_a_model_against_itself_scores_zero_and_no_answer_is_nan_counted(testbed):
    rows, rl, _ = testbed
    questions = [r["question"] for r in rows[:3]]
    for name in ROLLOUT_DETECTORS:
        result = (
            get_detector(name, **SAMPLING)
            .fit(reference=rl, answers=[r["answer"] for r in rows[:3]])
            .score(questions, rl)
        )
        assert np.nan_to_num(result.raw, nan=0.0).tolist() == [0.0] * 3, name
    blank = get_detector("gold_shift", **SAMPLING).fit(reference=rl, answers=[rows[0]["answer"], None, None])
    result = blank.score(questions, rl)
    assert np.isnan(result.raw[1:]).all() and any("2 question(s) with none" in n for n in result.notes)


def test_the_rollout_scores_are_reference_differences_and_refuse_a_missing_or_foreign_reference(testbed):
    from probes.verdicts.modes import PLAIN_RELATIVE, REFERENCE_DIFFERENCES

    for name in ROLLOUT_DETECTORS:
        cls = REGISTRY[name]
        assert cls.reference_difference and cls.requires_reference and name in REFERENCE_DIFFERENCES
        assert cls.raw_direction == "higher = member" and cls.samples_at_temperature
    assert "gold_shift" in PLAIN_RELATIVE and REGISTRY["gold_shift"].requires_answers
    rows, rl, _ = testbed
    with pytest.raises(ConfigError, match="needs a reference model"):
        get_detector("shift_vote").fit().score(["x"], rl)
    with pytest.raises(ConfigError, match="needs each question|no question has one"):
        run_detectors(["gold_shift"], [Question("a", "x")], rl, reference=rl)


def test_through_the_store_the_samples_are_reward_gain_s_and_a_second_run_runs_no_model(testbed, tmp_path):
    rows, rl, sft = testbed
    store = ResponseStore(tmp_path / "s.sqlite")
    cached, cached_ref = CachedResponder(rl, store), CachedResponder(sft, store)
    questions = [Question(r["id"], r["question"], answer=r["answer"]) for r in rows[:4]]
    names = ["reward_gain", *ROLLOUT_DETECTORS]
    params = {name: dict(SAMPLING) for name in names}
    first = run_detectors(names, questions, cached, params=params, reference=cached_ref)
    assert first.info["counts"]["generated"] == 12  # the rollout scores read reward gain's 12 samples
    fresh, fresh_ref = CachedResponder(rl, store), CachedResponder(sft, store)  # counters start at 0
    again = run_detectors(names, questions, fresh, params=params, reference=fresh_ref)
    assert again.info["counts"]["generated"] == 0 and again.info["counts"]["scored"] == 0
    for name in ROLLOUT_DETECTORS:
        np.testing.assert_array_equal(first.table.columns[name], again.table.columns[name])
        direct = get_detector(name, **SAMPLING).fit(reference=sft, answers=[q.answer for q in questions])
        np.testing.assert_allclose(
            first.table.columns[name], direct.score([q.question for q in questions], rl).scores, rtol=1e-6
        )


def test_on_matched_controls_the_gold_shift_reads_each_control_s_own_answer(testbed):
    rows, rl, sft = testbed
    questions = [Question(r["id"], r["question"], answer=r["answer"]) for r in rows[:2]]
    plan = ControlPlan(
        texts={q.id: [rows[k]["question"] for k in (2, 3)] for q in questions},
        answers={q.id: [rows[2]["answer"], None] for q in questions},
    )
    names = list(ROLLOUT_DETECTORS)
    summary = run_detectors(
        names, questions, rl, params={n: dict(SAMPLING) for n in names}, reference=sft, controls=plan
    )
    gold = summary.controls.columns["gold_shift"]
    assert (
        np.isfinite(gold[[0, 2]]).all() and np.isnan(gold[[1, 3]]).all()
    )  # the control without an answer is not scored
    direct = (
        get_detector("gold_shift", **SAMPLING)
        .fit(reference=sft, answers=[rows[2]["answer"]])
        .score([rows[2]["question"]], rl)
    )
    assert gold[0] == pytest.approx(direct.scores[0], rel=1e-6)
    assert np.isfinite(summary.controls.columns["shift_vote"]).all()  # the others score every control


def test_a_question_scores_the_same_alone_and_beside_a_long_neighbour(testbed):
    rows, rl, sft = testbed
    question, long = rows[0]["question"], " ".join(r["question"] for r in rows[1:6])
    for name in ROLLOUT_DETECTORS:
        alone = get_detector(name, **SAMPLING).fit(reference=sft, answers=[rows[0]["answer"]]).score([question], rl)
        batched = get_detector(name, **SAMPLING).fit(reference=sft, answers=[rows[1]["answer"], rows[0]["answer"]])
        beside = batched.score([long, question], rl)
        assert beside.raw[1] == pytest.approx(alone.raw[0], rel=1e-5, abs=1e-6), name
