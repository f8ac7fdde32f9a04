"""What an engine sends back is checked before it becomes a score (issue 33, item 1): each fault
a real server was seen to show, reproduced by the loopback server (the real ``openai`` client over
HTTP), is refused in one line before anything is stored — where before it became a silently
wrong number (CDD 1.0 from empty token lists, LogProber read off a continuation) or a traceback."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from probes.cli import main
from probes.responders.base import GenerationParams
from probes.responders.checks import EngineOutputError, SamplingWitness, greedy_log_bound
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.openai_api import OpenAIResponder, ServedModelError
from probes.responders.store import CachedResponder, ResponseStore

from .fake_openai_lm import FakeOpenAIModelServer

PROMPTS = [
    "What is 2 + 3?",
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "Solve for $x$: $3x - 4 = -10$.",
    "Ann has 4 pens and buys 5 more. How many pens does she have?",
]


@pytest.fixture()
def served(loaded_models):
    loaded = loaded_models["qwen2"]
    with FakeOpenAIModelServer(loaded.model, loaded.tokenizer) as server:
        yield server, loaded


def _questions(tmp_path, prompts=PROMPTS):
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": p}) + "\n" for i, p in enumerate(prompts)))
    return path


def _detect(server, tmp_path, names, *extra, prompts=PROMPTS):
    return main(
        [
            "detect",
            names,
            str(_questions(tmp_path, prompts)),
            "--endpoint",
            server.base_url,
            "--api-model",
            "toy",
            "--top-logprobs",
            "5",
            "--store",
            str(tmp_path / "store.sqlite"),
            "-o",
            str(tmp_path / "scores.csv"),
            "--no-progress",
            *extra,
        ]
    )


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_server_that_ignores_logprobs_and_n_is_refused_before_any_score(served, tmp_path, capsys):
    """Before: ``transformers serve`` answered without log-probs, one greedy choice per request;
    the stored completions had no tokens, and CDD read 1.0 ("contaminated") for every question."""
    server, _ = served
    server.fault = "no_logprobs"
    assert (
        _detect(
            server,
            tmp_path,
            "cdd,ppl",
            "--param",
            "cdd.n=4",
            "--param",
            "cdd.max_tokens=8",
            "--param",
            "ppl.max_new_tokens=8",
        )
        == 2
    )
    err = _one_error_line(capsys)
    assert (
        f"the server at {server.base_url} (model toy) sent a completion" in err
        and "without its tokens and log-probs" in err
    )
    assert not (tmp_path / "scores.csv").exists()
    assert len(ResponseStore(tmp_path / "store.sqlite")) == 0  # nothing it failed to send was stored


def test_a_server_that_ignores_sampling_is_refused(served):
    """Log-probs sent, but temperature, seed and n ignored: n copies of the greedy answer (CDD's
    samples all equal its greedy answer) — refused as soon as the chance of that under sampling
    falls below 1e-6."""
    server, _ = served
    server.fault = "greedy"
    store = ResponseStore(None)
    responder = CachedResponder(OpenAIResponder(server.base_url, "toy", top_logprobs=5), store)
    with pytest.raises(EngineOutputError, match="ignores the sampling parameters"):
        responder.generate(PROMPTS, GenerationParams(max_new_tokens=16, temperature=0.8, n=4, seed=1))
    assert len(store) == 0
    server.fault = None  # the same request to a server that samples is accepted
    fresh = CachedResponder(OpenAIResponder(server.base_url, "toy", top_logprobs=5), ResponseStore(None))
    out = fresh.generate(PROMPTS, GenerationParams(max_new_tokens=16, temperature=0.8, n=4, seed=1))
    assert fresh.responder.witness.sampled and len({tuple(g.token_ids) for row in out for g in row}) > len(PROMPTS)


def test_greedy_answers_are_not_tested_for_sampling(served):
    server, _ = served
    server.fault = "greedy"
    responder = OpenAIResponder(server.base_url, "toy", top_logprobs=5)
    responder.generate(PROMPTS * 4, GenerationParams(max_new_tokens=16))  # temperature 0: nothing to witness
    assert responder.witness.log_bound == 0.0


def naive_all_top_bound(tops: list[list[float]], temperature: float, top_p: float) -> float:
    """The module's bound by a plain loop over steps and tokens."""
    total = 0.0
    for row in tops:
        best = max(row)
        rest = sorted((v for v in row if v != best or row.count(best) > 1), reverse=True)[: len(row) - 1]
        ratios = [math.exp((v - best) / temperature) if v > -math.inf else 0.0 for v in rest]
        if top_p >= 1:
            total += -math.log(1 + sum(ratios))
        elif 1 / (1 + sum(ratios)) < top_p:
            total += -math.log(1 + ratios[0])
    return total


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (0.7, 0.95), (1.0, 0.5)])
def test_the_greedy_bound_equals_a_naive_loop_and_bounds_the_simulated_chance(temperature, top_p):
    """The bound by hand, and by simulation: sampling a known distribution at T (top-p), the
    fraction of runs whose every token is the top-1 never exceeds exp(bound), with the top-K
    sent being 3 of 6 tokens."""
    rng = np.random.default_rng(0)
    steps = 3
    logits = rng.normal(0, 1.5, size=(steps, 6))
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    tops = np.sort(logp, axis=1)[:, ::-1][:, :3]
    bound = greedy_log_bound(tops[:, 0].copy(), tops, temperature, top_p)
    assert bound == pytest.approx(naive_all_top_bound(tops.tolist(), temperature, top_p), abs=1e-12)
    assert greedy_log_bound(tops[:, 1].copy(), tops, temperature, top_p) is None  # a non-top-1 token: it sampled
    draws = 20000
    all_top = np.ones(draws, dtype=bool)
    for t in range(steps):
        p = np.exp(logp[t] / temperature)
        p /= p.sum()
        order = np.argsort(-p)
        keep = np.cumsum(p[order]) - p[order] < top_p
        q = np.zeros_like(p)
        q[order[keep]] = p[order[keep]]
        q /= q.sum()
        all_top &= rng.choice(6, size=draws, p=q) == order[0]
    se = math.sqrt(math.exp(bound) * (1 - math.exp(bound)) / draws)
    assert all_top.mean() <= math.exp(bound) + 4 * se


def test_the_witness_refuses_only_below_its_threshold():
    witness = SamplingWitness({"kind": "vllm", "version": "0"})
    tops = np.log(np.array([[0.5, 0.3, 0.2]] * 5))
    witness.add(tops[:, 0].copy(), tops, 1.0)  # 5 steps: 2^-5 ... not yet
    assert witness.log_bound == pytest.approx(5 * math.log(0.5))
    with pytest.raises(EngineOutputError, match="vLLM 0 was asked to sample"):
        for _ in range(10):
            witness.add(tops[:, 0].copy(), tops, 1.0)


def test_an_echo_that_returns_a_continuation_is_refused(served):
    """Before: LogProber read log-probs of tokens past the prompt (5.65 vs 0.31 locally, Spearman
    −0.38 over a benchmark) with no error."""
    server, _ = served
    server.fault = "echo_continuation"
    responder = CachedResponder(OpenAIResponder(server.base_url, "toy", top_logprobs=5), ResponseStore(None))
    with pytest.raises(EngineOutputError, match="past the end of the prompt"):
        responder.score(["Question: "], [PROMPTS[1]])
    with pytest.raises(EngineOutputError, match="past the end of the prompt"):
        responder.token_spans(PROMPTS[1])


def test_a_500_is_one_error_line_requests_are_bounded_and_work_is_kept(served, tmp_path, capsys):
    """Before: a 70-line ``openai.InternalServerError`` traceback and exit 1, after 110 requests."""
    server, _ = served
    server.fault, server.fail_after = "status_500", 6
    prompts = [
        f"{p} (case {i})" for i in range(3) for p in PROMPTS
    ]  # 12 questions: 3 chunks of 4 (one request in flight)
    args = ("--param", "ppl.max_new_tokens=8", "--concurrency", "1")
    assert _detect(server, tmp_path, "ppl", *args, prompts=prompts) == 2
    err = _one_error_line(capsys)
    assert "failed a chat completions request: HTTP 500 (Internal Server Error)" in err and "run again to resume" in err
    assert len(server.requests) == 6 + 5  # the answered ones, then one request and its 4 retries; the rest never sent
    kept = len(ResponseStore(tmp_path / "store.sqlite"))
    assert kept == 4  # the first chunk was committed; the second failed in its third request
    server.fault, first = None, len(server.requests)
    assert _detect(server, tmp_path, "ppl", *args, prompts=prompts) == 0
    assert len(server.requests) - first == len(prompts) - kept  # the rerun asks only for what was not kept


def test_a_raw_prompt_format_is_sent_to_completions_with_its_template(served):
    """Before: with --endpoint, --prompt-format raw --template … were silently ignored (chat always)."""
    server, loaded = served
    raw = PromptFormat(mode="raw", template="Q: {prompt}\nA:")
    api = OpenAIResponder(server.base_url, "toy", top_logprobs=5, prompt_format=raw)
    remote = api.generate(PROMPTS[:2], GenerationParams(max_new_tokens=12))
    here = LocalResponder(loaded, raw).generate(PROMPTS[:2], GenerationParams(max_new_tokens=12))
    assert [r[0].text for r in remote] == [h[0].text for h in here]
    sent = server.requests[-2:]
    assert all("messages" not in body for body in sent) and {b["prompt"] for b in sent} == {
        f"Q: {p}\nA:" for p in PROMPTS[:2]
    }
    assert api.question_context("Hint. ") == "Q: Hint. " and api.identity["raw_template"] == raw.template
    chat = OpenAIResponder(server.base_url, "toy", top_logprobs=5)
    assert "raw_template" not in chat.identity  # the two formats never share a store key


def test_server_errors_stop_further_requests(served):
    server, _ = served
    server.fault, server.fail_after = "status_500", 0
    api = OpenAIResponder(server.base_url, "toy", top_logprobs=5, max_retries=0, concurrency=1)
    with pytest.raises(ServedModelError, match="HTTP 500"):
        api.generate(PROMPTS, GenerationParams(max_new_tokens=4))
    assert len(server.requests) == 1  # the first failure ends the call: the other prompts are never sent


def test_the_engine_choice(monkeypatch):
    """``auto`` is hf on a machine without CUDA (and under a launcher); vLLM under torchrun is
    refused in one line that says what to run instead; an unknown engine is named."""
    from probes.errors import ConfigError
    from probes.responders.engines import engine_key, resolve_engine
    from probes.responders.model_settings import ModelSettings as ModelConfig

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert resolve_engine("auto") == "hf" and engine_key(ModelConfig(source="m")) is None
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert resolve_engine("auto") == "hf"
    with pytest.raises(ConfigError, match=r"under torchrun: .*tensor_parallel_size.*detect\.endpoint"):
        engine_key(ModelConfig(source="m", engine="vllm"))
    with pytest.raises(ConfigError, match="model.engine 'vlm': choose auto, hf, vllm"):
        resolve_engine("vlm")


def test_auto_takes_vllm_where_it_was_measured_faster(monkeypatch, tmp_path):
    """With vLLM installed: on CUDA always; on a CPU for checkpoints of GPT-2-small's size and up
    (weight files ≥ 256 MiB), not for the 2 MB testbed model (bench_engines.py's figures)."""
    import importlib.util

    from probes.responders import engines

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    large, small = tmp_path / "large", tmp_path / "small"
    large.mkdir(), small.mkdir()
    with (large / "model.safetensors").open("wb") as handle:
        handle.truncate(engines.engine_entry("vllm").cpu_from_bytes)  # sparse: no disk used
    (small / "model.safetensors").write_bytes(b"0" * 2_000_000)
    assert engines.resolve_engine("auto", str(large)) == "vllm"
    assert engines.resolve_engine("auto", str(small)) == "hf"
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert engines.resolve_engine("auto", str(small)) == "vllm"


def test_auto_sizes_a_gguf_file_as_converted_and_an_adapter_by_its_base(monkeypatch, tmp_path):
    """A GGUF file counts as its float32 conversion (not its quantised file size) and an adapter as
    the base it runs on (not its own few MB): the choice is the one its converted / merged
    checkpoint gets, on the first run as on later ones."""
    import importlib.util

    import cache.sources as sources
    from probes.responders import engines
    from tests.cache.test_sources import write_adapter, write_gguf

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(sources, "require", lambda *a: None)  # resolving needs neither gguf nor peft
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    enough = engines.engine_entry("vllm").cpu_from_bytes // 4  # float32 weights
    large = write_gguf(tmp_path / "large.gguf", {"general.architecture": "llama"}, tensors={"w": (enough, 1)})
    small = write_gguf(tmp_path / "small.gguf", {"general.architecture": "llama"}, tensors={"w": (enough - 1, 1)})
    assert large.stat().st_size < engines.engine_entry("vllm").cpu_from_bytes  # its quantised size would have said hf
    assert engines.weight_bytes(str(large)) == engines.engine_entry("vllm").cpu_from_bytes
    assert engines.resolve_engine("auto", str(large)) == "vllm"
    assert engines.resolve_engine("auto", str(small)) == "hf"
    # a module the base has, at its width: where gguf is installed the base's config is read (a
    # default llama's, 4096 wide) and an adapter that does not fit it is refused, and sized as itself
    adapter = write_adapter(tmp_path / "adapter", str(large), {"model.layers.0.self_attn.q_proj": (4096, 4096)})
    assert engines.resolve_engine("auto", str(adapter)) == "vllm"
    assert engines.resolve_engine("auto", str(adapter), base=str(small)) == "hf"
    assert engines.weight_bytes("org/not-local") == 0


def test_engine_args_are_refused_when_they_could_not_be_what_ran(tmp_path, caplog):
    """Issue 57's review: a value the engine refuses only when it opens is refused when the config
    is read (``top_logprobs: 0``); an argument the toolkit sets itself (the checkpoint, its dtype)
    is refused, since the stage key would no longer say what ran; an older resolved config's
    ``vllm: null`` reads silently; a bad ``--engine-arg`` value is one line."""
    from probes.errors import ConfigError
    from probes.pipeline import load_run_config
    from probes.pipeline.config_paths import parse_set

    path = tmp_path / "audit.yaml"
    path.write_text("questions: q.jsonl\nmodel: {source: m, engine: vllm, vllm: null}\n")
    with caplog.at_level("WARNING"):
        assert load_run_config(path).model.engine_args == {}
    assert "deprecated" not in caplog.text
    for override, message in [
        ("model.engine_args.top_logprobs=0", "model.engine_args.top_logprobs: must be an integer ≥ 1 or -1, got 0"),
        ("model.engine_args.model=/elsewhere", "model.engine_args.model: the toolkit sets it itself"),
        ("model.engine_args.dtype=float16", "model.engine_args.dtype: the toolkit sets it itself"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_run_config(path, [override])
    assert load_run_config(path, ["model.engine_args.top_logprobs=-1"]).model.engine_args == {"top_logprobs": -1}
    with pytest.raises(ConfigError, match=r"--engine-arg 'x=\{a: 1': the value is not valid YAML"):
        parse_set(["x={a: 1"], "--engine-arg")


def test_probes_detect_reads_the_old_vllm_keyword_and_refuses_a_bad_engine_args(caplog):
    from probes.api.audit import _engine_settings
    from probes.errors import ConfigError

    with caplog.at_level("WARNING"):
        settings = _engine_settings("/m", "vllm", None, {"vllm": {"tensor_parallel_size": 2}})
    assert settings.engine_args == {"tensor_parallel_size": 2} and "vllm is deprecated" in caplog.text
    with pytest.raises(ConfigError, match="engine_args must map the engine's argument names to values, got list"):
        _engine_settings("/m", "vllm", ["x"], {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'vllmm'"):
        _engine_settings("/m", "vllm", None, {"vllmm": {}})


def test_arguments_auto_cannot_use_are_said_to_be_unused(tmp_path, monkeypatch, caplog):
    """``auto`` checks its arguments against the engines it may pick; where it runs hf they are
    not used, and the run says so before stage 1 instead of dropping them silently."""
    from probes.pipeline import load_run_config
    from probes.pipeline.validate import _engines

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    path = tmp_path / "audit.yaml"
    path.write_text(
        "questions: q.jsonl\nmodel: {source: m, engine: auto, engine_args: {tensor_parallel_size: 2}}\n"
        "detect: {names: [ppl]}\n"
    )
    with caplog.at_level("WARNING"):
        assert _engines(load_run_config(path)) == []
    assert "model.engine auto runs the hf engine here" in caplog.text and "tensor_parallel_size" in caplog.text
