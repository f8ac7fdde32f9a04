"""The OpenAI-compatible responder with the real ``openai`` client against a loopback server whose
log-probs come from the same tiny model: the API path equals the local path (chosen-token
log-probs passed through exactly; entropy within the top-K truncation, recorded), detectors run
on it or are refused, and the key is never stored."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from probes.cli import main
from probes.detectors import check_access, get_detector
from probes.errors import ConfigError
from probes.responders.base import GenerationParams
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.openai_api import OpenAIResponder, topk_moments
from probes.responders.store import CachedResponder, ResponseStore
from probes.scores import ScoreTable

from .fake_openai_lm import FakeOpenAIModelServer

PROMPTS = [
    "What is 2 + 3?",
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "Solve for $x$: $3x - 4 = -10$.",
]
K = 5


@pytest.fixture(scope="module")
def served(loaded_models):
    loaded = loaded_models["qwen2"]
    with FakeOpenAIModelServer(loaded.model, loaded.tokenizer, api_key="sk-test-123") as server:
        yield server, loaded


@pytest.fixture()
def api(served, monkeypatch):
    server, _ = served
    monkeypatch.setenv("LARA_TEST_KEY", "sk-test-123")
    return OpenAIResponder(server.base_url, "toy-qwen2", api_key_env="LARA_TEST_KEY", top_logprobs=K)


def test_greedy_answers_equal_the_local_path(served, api):
    server, loaded = served
    local = LocalResponder(loaded, PromptFormat(mode="chat"))
    params = GenerationParams(max_new_tokens=16)
    remote = api.generate(PROMPTS, params)
    here = local.generate(PROMPTS, params)
    for prompt, (r,), (h,) in zip(PROMPTS, remote, here):
        assert r.text == h.text
        assert r.logprobs.tolist() in server.sent_logprobs  # passed through exactly as the server computed them
        np.testing.assert_allclose(r.logprobs, h.logprobs, atol=1e-5)  # and equal to the local path's
        assert r.entropy_kind == f"top-{K}" and h.entropy_kind == "exact"
        assert (r.entropies <= h.entropies + 1e-6).all()  # the top-K part is a lower bound
        # ... and it is exactly −Σ_{top K} p log p of the model's distribution at each step
        ids = local.encode_prompt(prompt) + h.token_ids
        with torch.inference_mode():
            logp = torch.log_softmax(loaded.model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
        steps = logp[len(ids) - len(h.token_ids) - 1 : len(ids) - 1]
        top = steps.topk(K, dim=-1).values
        np.testing.assert_allclose(r.entropies, (-(top.exp() * top).sum(-1)).numpy(), atol=1e-5)


def test_a_system_turn_is_sent_with_every_chat_request(served, monkeypatch):
    server, _ = served
    monkeypatch.setenv("LARA_TEST_KEY", "sk-test-123")
    system = "Answer with a number only."
    api = OpenAIResponder(server.base_url, "toy-qwen2", api_key_env="LARA_TEST_KEY", top_logprobs=K, system=system)
    before = len(server.requests)
    api.generate(PROMPTS, GenerationParams(max_new_tokens=4))
    sent = sorted((b["messages"] for b in server.requests[before:]), key=lambda m: m[-1]["content"])
    assert sent == sorted(
        ([{"role": "system", "content": system}, {"role": "user", "content": p}] for p in PROMPTS),
        key=lambda m: m[-1]["content"],
    )
    assert api.identity["system"] == system  # part of the response store's key
    plain = OpenAIResponder(server.base_url, "toy-qwen2", api_key_env="LARA_TEST_KEY", top_logprobs=K)
    before = len(server.requests)
    plain.generate(PROMPTS[:1], GenerationParams(max_new_tokens=4))
    assert (
        server.requests[before]["messages"] == [{"role": "user", "content": PROMPTS[0]}]
        and "system" not in plain.identity
    )


def test_sampling_is_seeded_per_completion(api):
    params = GenerationParams(max_new_tokens=10, temperature=0.9, top_p=0.95, n=3, seed=7)
    first = api.generate(PROMPTS[:1], params)[0]
    again = api.generate(PROMPTS[:1], params)[0]
    assert [g.text for g in first] == [g.text for g in again]
    assert len({tuple(g.token_ids) for g in first}) > 1


def responder(server, **kwargs) -> OpenAIResponder:
    return OpenAIResponder(server.base_url, "toy-qwen2", api_key_env="LARA_TEST_KEY", top_logprobs=K, **kwargs)


@pytest.mark.parametrize("method", ["generate", "complete"])
def test_n_completions_in_one_request_reproducible_and_counted(served, monkeypatch, method):
    server, _ = served
    monkeypatch.setenv("LARA_TEST_KEY", "sk-test-123")
    params = GenerationParams(max_new_tokens=6, temperature=1.0, n=4, seed=3)
    api = responder(server)
    before = len(server.requests)
    first = getattr(api, method)(PROMPTS, params)
    assert len(server.requests) - before == len(PROMPTS) == api.counter.requests  # one request per prompt
    assert all(b["n"] == 4 for b in server.requests[before:])
    assert [len(row) for row in first] == [4] * len(PROMPTS) and api.counter.generated == 4 * len(PROMPTS)
    again = getattr(responder(server), method)(PROMPTS, params)
    assert [[g.text for g in row] for row in first] == [[g.text for g in row] for row in again]
    assert len({g.text for g in first[1]}) > 1  # n different samples, not one repeated


@pytest.mark.parametrize("mode", ["ignore", "refuse"])
def test_a_server_without_n_is_asked_once_per_completion(served, monkeypatch, mode, caplog):
    server, _ = served
    monkeypatch.setenv("LARA_TEST_KEY", "sk-test-123")
    params = GenerationParams(max_new_tokens=6, temperature=1.0, n=3, seed=5)
    expected = responder(server, n_per_request=False).generate(PROMPTS, params)  # one request per completion
    server.n_mode = mode
    try:
        api = responder(server, concurrency=1)
        before = len(server.requests)
        got = api.generate(PROMPTS, params)
        sent = len(server.requests) - before
        later = api.generate(PROMPTS[:1], params)
    finally:
        server.n_mode = "native"
    assert sent == 1 + 3 * len(PROMPTS) == api.counter.requests - 3  # one try with n, then per completion, remembered
    assert [[g.text for g in row] for row in got] == [[g.text for g in row] for row in expected]
    assert [g.text for g in later[0]] == [g.text for g in expected[0]]
    assert "asking once per completion from now on" in caplog.text


def test_prompt_logprobs_equal_the_local_path(served, api):
    _, loaded = served
    local = LocalResponder(loaded, PromptFormat(mode="chat"))
    contexts = ["", "Question: "]
    texts = ["What is 2 + 3?", "A train travels 60 km in 1.5 hours."]
    for r, h in zip(api.score(contexts, texts), local.score(contexts, texts)):
        assert len(r.logprobs) == len(h.logprobs)
        np.testing.assert_allclose(r.logprobs, h.logprobs, atol=1e-5)
        assert len(r.mu) == len(r.logprobs)  # top-K moments (tested below), not the full vocabulary's


def test_detectors_run_through_the_api_or_are_refused(api, tmp_path):
    cached = CachedResponder(api, ResponseStore(tmp_path / "store.sqlite"))
    for name, params in (
        ("cdd", {"n": 3, "max_tokens": 8}),
        ("min_knn", {"n": 4, "k": 2, "max_new_tokens": 8}),
        ("ppl", {"max_new_tokens": 8}),
        ("logprober", {}),
        ("self_critique", {"max_new_tokens": 8}),
    ):
        detector = get_detector(name, **params)
        notes = check_access(detector, cached)
        result = detector.score(PROMPTS, cached)
        assert result.scores.shape == (3,)
        if name == "self_critique":
            assert "top-K" in notes[0] and "top-5" in result.notes[0]
    generated = cached.counter.generated
    get_detector("cdd", n=3, max_tokens=8).score(PROMPTS, cached)
    assert cached.counter.generated == generated  # served from the store
    assert b"sk-test-123" not in (tmp_path / "store.sqlite").read_bytes()


def test_missing_key_is_a_clear_error(served, monkeypatch):
    server, _ = served
    monkeypatch.delenv("LARA_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match="LARA_NO_SUCH_KEY is not set"):
        OpenAIResponder(server.base_url, "toy", api_key_env="LARA_NO_SUCH_KEY")


def test_cli_detect_against_an_endpoint(served, tmp_path, monkeypatch, capsys):
    server, _ = served
    monkeypatch.setenv("LARA_TEST_KEY", "sk-test-123")
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": p}) + "\n" for i, p in enumerate(PROMPTS)))
    out = tmp_path / "scores.csv"
    before = len(server.requests)
    assert (
        main(
            [
                "detect",
                "ppl,logprober,self_critique",
                str(questions),
                "--endpoint",
                server.base_url,
                "--api-model",
                "toy",
                "--api-key-env",
                "LARA_TEST_KEY",
                "--top-logprobs",
                "5",
                "--param",
                "ppl.max_new_tokens=8",
                "--param",
                "self_critique.max_new_tokens=8",
                "--store",
                str(tmp_path / "store.sqlite"),
                "-o",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "note: self_critique: entropies from the endpoint's top-K log-probs" in shown
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["responder"] == {
        "kind": "openai",
        "base_url": server.base_url,
        "model": "toy",
        "top_logprobs": 5,
        "n_per_request": True,
    }
    sent = len(server.requests) - before
    assert sent > 0 and meta["counts"]["requests"] == sent and f"; {sent} requests to the served model" in shown
    assert list(ScoreTable.read_csv(out).columns) == ["ppl", "logprober", "self_critique"]
    assert "sk-test-123" not in out.with_suffix(".meta.json").read_text()


def naive_topk_moments(logp_row: torch.Tensor, k: int) -> tuple[float, float]:
    """μ, σ of log p under p renormalised over the k likeliest tokens, by a plain loop."""
    top = sorted((float(v) for v in logp_row), reverse=True)[:k]
    weights = [math.exp(v) for v in top]
    total = sum(weights)
    mu = sum(w / total * v for w, v in zip(weights, top))
    return mu, math.sqrt(max(sum(w / total * v * v for w, v in zip(weights, top)) - mu * mu, 0.0))


def test_topk_moments_by_hand():
    mu, sigma = topk_moments(np.array([[math.log(0.5), math.log(0.25), -np.inf]]))
    assert mu[0] == pytest.approx(-4 / 3 * math.log(2)) and sigma[0] == pytest.approx(math.sqrt(2) / 3 * math.log(2))


def test_min_k_plus_plus_runs_on_the_endpoint_with_top_k_moments_flagged(served, api):
    """SPEC §5 allows Min-K%++'s μ/σ from top-K log-probs on API backends, flagged as an approximation."""
    server, loaded = served
    detector = get_detector("min_k_plus_plus", max_new_tokens=8)
    notes = check_access(detector, api)
    assert any("top-K log-probs renormalised" in n for n in notes)
    ((gen,),) = api.generate(PROMPTS[:1], GenerationParams(max_new_tokens=8))
    local = LocalResponder(loaded, PromptFormat(mode="chat"))
    ids = (
        local.encode_prompt(PROMPTS[0])
        + local.generate(PROMPTS[:1], GenerationParams(max_new_tokens=8))[0][0].token_ids
    )
    with torch.inference_mode():
        logp = torch.log_softmax(loaded.model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    steps = logp[len(ids) - len(gen.token_ids) - 1 : len(ids) - 1]
    for t, row in enumerate(steps):
        mu, sigma = naive_topk_moments(row, K)
        assert gen.mu[t] == pytest.approx(mu, abs=1e-5) and gen.sigma[t] == pytest.approx(sigma, abs=1e-4)
    result = detector.score(PROMPTS, api)
    assert np.isfinite(result.raw).all()
    (scored,) = api.score(["Question: "], [PROMPTS[1]])
    tops = server.sent_tops[-1]
    kept = tops[len(tops) - len(scored.logprobs) :]
    for t, top in enumerate(kept):
        values = sorted(top.values(), reverse=True)
        weights = [math.exp(v) / sum(math.exp(u) for u in values) for v in values]
        mu = sum(w * v for w, v in zip(weights, values))
        assert scored.mu[t] == pytest.approx(mu, abs=1e-9)
    on_question = get_detector("min_k_plus_plus", target="question").score(PROMPTS, api)
    assert np.isfinite(on_question.raw).all()


def test_partial_completion_through_the_endpoint_equals_the_local_path(served, api):
    """Plain-text continuations from /v1/completions and the question's tokens from echo give the
    local path's ROUGE-L and exact match."""
    _, loaded = served
    remote = get_detector("partial_completion").score(PROMPTS, api)
    here = get_detector("partial_completion").score(PROMPTS, LocalResponder(loaded, PromptFormat(mode="chat")))
    assert np.isfinite(remote.raw).all()
    np.testing.assert_allclose(remote.raw, here.raw, atol=1e-12)
    np.testing.assert_array_equal(remote.extra["exact_match"], here.extra["exact_match"])
    assert remote.n_responses.tolist() == here.n_responses.tolist() and here.n_responses.sum() > 0
