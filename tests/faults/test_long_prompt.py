"""SPEC §5 "One completion, one budget": a completion depends only on (model, prompt, decoding
parameters, seed, j), never on its batch-mates. Before the fix, one over-long question in a batch
gave every other row the budget left by the longest prompt (one token: answers ' ', PPL ≈ 1, the
strongest "member" signal); these tests failed on that code."""

from __future__ import annotations

import json

import numpy as np
import pytest

from generation.records import Question
from probes.detectors.run import run_detectors
from probes.responders.base import GenerationParams
from probes.responders.local import LocalResponder, PromptFormat

SHORT = ["What is 2 + 3?", "A train travels 60 km in 1.5 hours. What is its average speed?", "Hi"]


def _long_question(responder: LocalResponder, tokens_over: int = 40) -> str:
    """A question whose prompt is ``tokens_over`` tokens longer than the model's context."""
    limit = responder.loaded.max_positions
    text = "Tom has 3 apples and 4 pears."
    while len(responder.encode_prompt(text)) < limit + tokens_over:
        text += " Tom has 3 apples and 4 pears."
    return text + " How many fruits?"


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def responder(request, loaded_models):
    return LocalResponder(
        loaded_models[request.param], PromptFormat(mode="raw", template="Q: {prompt}\nA:"), batch_size=8
    )


@pytest.mark.parametrize(
    "params",
    [
        GenerationParams(max_new_tokens=24),
        GenerationParams(max_new_tokens=24, temperature=1.0, top_p=0.95, n=3, seed=5),
    ],
    ids=["greedy", "sampled"],
)
def test_an_over_long_batch_mate_changes_no_other_completion(responder, params):
    long = _long_question(responder)
    alone = [responder.generate([q], params)[0] for q in SHORT]
    together = responder.generate([SHORT[0], long, *SHORT[1:]], params)
    for one, batched in zip(alone, [together[0], *together[2:]]):
        assert [g.token_ids for g in batched] == [g.token_ids for g in one]
        assert [g.finish_reason for g in batched] == [g.finish_reason for g in one]
        assert all(g.prompt_cut == 0 for g in batched)
        for a, b in zip(one, batched):
            np.testing.assert_allclose(b.logprobs, a.logprobs, atol=1e-5)
    assert max(len(g.token_ids) for row in alone for g in row) > 1  # the short answers are longer than one token
    cut = together[1]
    assert all(g.prompt_cut > 0 for g in cut)
    assert [g.token_ids for g in cut] == [g.token_ids for g in responder.generate([long], params)[0]]


def test_each_row_has_its_own_budget_and_stops_on_its_own(responder):
    limit = responder.loaded.max_positions
    params = GenerationParams(max_new_tokens=30)
    question = "Sam has 2 cats."
    while len(responder.encode_prompt(question)) < limit - 6:
        question += " Sam has 2 cats."
    room = limit - len(responder.encode_prompt(question))
    (near_full,), (short,) = responder.generate([question, SHORT[0]], params)
    assert len(near_full.token_ids) <= room and (near_full.finish_reason == "stop" or len(near_full.token_ids) == room)
    assert short.token_ids == responder.generate([SHORT[0]], params)[0][0].token_ids


def test_cut_prompts_and_capped_answers_are_recorded_per_question(responder, tmp_path):
    long = _long_question(responder)
    ids = ["q1", "long", "q3"]
    summary = run_detectors(
        ["ppl", "logprober"],
        [Question(i, q) for i, q in zip(ids, [SHORT[0], long, SHORT[2]])],
        responder,
        params={"ppl": {"max_new_tokens": 4}},
    )
    assert summary.raw.columns["ppl_prompt_cut"].tolist() == [0, 1, 0]
    assert summary.raw.columns["logprober_prompt_cut"].tolist() == [0, 1, 0]  # the question scored in its cut context
    answers = [g[0] for g in responder.generate([SHORT[0], long, SHORT[2]], GenerationParams(max_new_tokens=4))]
    assert summary.raw.columns["ppl_capped"].tolist() == [float(g.finish_reason == "length") for g in answers]
    record = summary.info["detectors"]["ppl"]["responses"]
    assert record["prompt_cut_ids"] == ["long"] and record["prompt_cut"] == 1
    assert record["capped_ids"] == [i for i, g in zip(ids, answers) if g.finish_reason == "length"]
    assert any("ppl: 1 prompt(s) of 1 question(s) exceeded the model's context" in n for n in summary.info["notes"])
    summary.write(tmp_path / "s.csv")
    raw = (tmp_path / "s.raw.csv").read_text().splitlines()
    header = raw[0].split(",")
    assert raw[2].split(",")[header.index("ppl_prompt_cut")] == "1.0" and raw[1].split(",")[0] == "q1"
    meta = json.loads((tmp_path / "s.meta.json").read_text())
    assert meta["detectors"]["logprober"]["responses"]["prompt_cut_ids"] == ["long"]


@pytest.mark.slow
def test_self_critique_second_answers_on_the_testbed_do_not_depend_on_their_batch():
    """The shipped testbed with the demo's settings (raw "Q: {prompt}\\nA:", 64 new tokens, batches of
    64): Self-Critique's second prompts run long on a 256-position model, and before the fix 63 of
    128 second answers differed from generating them one at a time (here: the first 48 questions)."""
    from pathlib import Path

    from cache.config import ModelConfig
    from cache.loading import load_model
    from probes.detectors import get_detector

    testbed = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints" / "cpu-seed0"
    questions = [json.loads(line)["question"] for line in (testbed / "questions.jsonl").read_text().splitlines()[:48]]
    loaded = load_model(ModelConfig(source=str(testbed / "rl"), device="cpu", dtype="float32"))
    responder = LocalResponder(loaded, PromptFormat(mode="raw", template="Q: {prompt}\nA:"), batch_size=64)
    critique = get_detector("self_critique", max_new_tokens=64)
    params = GenerationParams(max_new_tokens=64)
    first = [g[0] for g in responder.generate(questions, params)]
    prompts = [critique.critique_prompt(q, a.text) for q, a in zip(questions, first)]
    batched = [g[0] for g in responder.generate(prompts, params)]
    alone = [responder.generate([p], params)[0][0] for p in prompts]
    assert max(len(responder.encode_prompt(p)) for p in prompts) > 256 - 64  # the long rows that used to cap the others
    assert [g.token_ids for g in batched] == [g.token_ids for g in alone]
