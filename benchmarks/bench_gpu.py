"""GPU figures of a 7B-shaped model, side by side in one run (not a test; issue 16, part 5).

Model: Qwen2.5-Math-7B's Qwen2 shape — 28 blocks, d = 3584, 28 heads (4 KV heads), MLP 18,944,
vocab 152,064 — with random weights in bf16, built directly on the device (no download, no
checkpoint on disk); its tokenizer is the toolkit's small BPE tokenizer (ids < 2,000, which a
152,064-row embedding takes as it takes any id). Random weights cost exactly what trained ones
cost per token.

(a) Extraction of the mean-pooled residual stream of all 28 blocks from ``--texts`` texts of
    16..``--max-tokens`` tokens (uniform, seeded), in the toolkit's length-sorted batches:
      floor   the base model's forward on the same batches, no hooks (the least any method pays)
      hf      the toolkit's ``hf`` backend (hooks, masked mean inside the hook)
      naive   the research code's path: the full LM with ``output_hidden_states=True``, one text
              at a time, mean over tokens, rows moved to the CPU
    Targets: ``hf`` within 10 % of ``floor``; ``hf`` ≥ 5× ``naive``.
(b) Sampling as Min-kNN / CDD do: ``--n`` completions (32) of ``--new-tokens`` tokens (256) of
    each of ``--prompts`` prompts through the local responder (T = 1.0, top-p 1, the
    counter-based sampler), with each decoding loop — dynamic (a growing cache, finished rows
    leave) and static (a pre-allocated cache, the step compiled with CUDA graphs on a GPU) — with
    tokens/s, the time per decoding step against the floor of reading every weight once (the
    weights' bytes over the GPU's memory bandwidth, where the GPU is known) and the peak of
    allocated GPU memory; the same through Hugging Face ``model.generate`` (hf-generate); with
    vLLM installed, the same through engine vllm (the random weights saved to a temporary
    checkpoint for it to load; ``--no-vllm`` skips it). Target (issue 55): the builtin sampler
    at >= 1.5x hf-generate's tokens/s at the 7B shape with 128 rows (goal >= 3x).

    python benchmarks/bench_gpu.py                          # on a GPU: the 7B shape in bf16
    python benchmarks/bench_gpu.py --shape tiny --device cpu  # a smoke run of the same code on a CPU
"""

from __future__ import annotations

import argparse
import time
from typing import Any

SHAPES = {  # Qwen2.5-Math-7B's config.json, and a small one for smoke runs
    "qwen2-7b": dict(
        num_hidden_layers=28,
        hidden_size=3584,
        num_attention_heads=28,
        num_key_value_heads=4,
        intermediate_size=18944,
        vocab_size=152064,
        max_position_embeddings=4096,
        rope_theta=10000.0,
    ),
    "tiny": dict(
        num_hidden_layers=4,
        hidden_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=512,
        vocab_size=152064,
        max_position_embeddings=4096,
        rope_theta=10000.0,
    ),
}


def build(shape: str, device: str, dtype: str) -> Any:
    """A LoadedModel of ``shape`` with random weights, made on ``device``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cache.architecture import discover_layout
    from cache.config import ModelConfig
    from cache.loading import LoadedModel, ModelSource
    from cache.toymodels import BOS, EOS, PAD, train_tokenizer

    tokenizer = train_tokenizer(2000, add_bos=False)
    ids = {
        name: tokenizer.convert_tokens_to_ids(tok)
        for name, tok in (("bos_token_id", BOS), ("eos_token_id", EOS), ("pad_token_id", PAD))
    }
    config = Qwen2Config(**SHAPES[shape], tie_word_embeddings=False, **ids)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.eval().requires_grad_(False)
    probe = torch.tensor([tokenizer("Layer probe.")["input_ids"][:8]])
    layout = discover_layout(model, probe)
    source = ModelSource(spec=f"random {shape}", location=f"random {shape}", is_local=True)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        layout=layout,
        source=source,
        config=ModelConfig(source=f"random-{shape}", device=device, dtype=dtype),
    )


TEMPLATE = "Q: {prompt}\nA:"  # the raw prompt every sampling row uses


def sampling_questions(count: int) -> list[str]:
    """The ``count`` questions every sampling row samples."""
    return [
        f"A train travels {60 + 7 * i} km in {2 + i % 3} hours. What is its average speed in km/h?"
        for i in range(count)
    ]


def make_texts(tokenizer: Any, n: int, max_tokens: int) -> list[str]:
    """``n`` corpus texts of 16..``max_tokens`` tokens (seeded)."""
    import numpy as np

    from cache.toymodels import corpus

    rng, sentences, texts = np.random.default_rng(0), corpus(), []
    for target in rng.integers(16, max_tokens + 1, size=n):
        ids: list[int] = []
        while len(ids) < target:
            ids += tokenizer(" " + sentences[int(rng.integers(len(sentences)))])["input_ids"]
        texts.append(tokenizer.decode(ids[:target]).strip())
    return texts


def timed(run: Any, sync: Any, repeats: int) -> float:
    """Best of ``repeats`` timings of ``run()``, after one warm-up call."""
    run()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def bench_extraction(loaded: Any, texts: list[str], batch_size: int, repeats: int) -> dict[str, float]:
    """Seconds of floor, hf and naive on ``texts``."""
    import torch

    from cache.architecture import forward_kwargs, get_submodule
    from cache.backends import create_extractor
    from cache.batching import collate, default_batch_tokens, plan_batches
    from cache.fingerprint import text_hash
    from cache.layers import resolve_layers
    from cache.prompts import PromptEncoder

    tokenizer, sync = loaded.tokenizer, _sync(loaded.device)
    encoded = PromptEncoder(tokenizer).encode(texts)
    plan = plan_batches(
        [len(e) for e in encoded], [text_hash(t) for t in texts], batch_size, default_batch_tokens(loaded.device.type)
    )
    batches = [collate([encoded[i] for i in b], tokenizer.pad_token_id).to(loaded.device) for b in plan]
    selection = resolve_layers(["all"], loaded.layout.n_blocks)
    base = get_submodule(loaded.model, loaded.layout.base_path)

    def floor() -> None:
        with torch.inference_mode():
            for batch in batches:
                base(**forward_kwargs(base, batch.model_inputs()))

    extractor = create_extractor("hf", loaded, own_model=True)

    def hooked() -> None:
        for batch in batches:
            extractor.pool(batch, selection)

    def naive() -> None:
        with torch.inference_mode():
            for text in texts:
                ids = tokenizer(text, return_tensors="pt").to(loaded.device)
                hidden = loaded.model(**ids, output_hidden_states=True).hidden_states
                _ = [h[0].float().mean(0).cpu() for h in hidden]

    return {"floor": timed(floor, sync, repeats), "hf": timed(hooked, sync, repeats), "naive": timed(naive, sync, 1)}


MEMORY_BANDWIDTH = {"H200": 4.8e12, "H100 SXM": 3.35e12, "H100 80GB HBM3": 3.35e12, "H100 PCIe": 2.0e12, "A100": 2.0e12}


def bandwidth(device: Any) -> float | None:
    """The GPU's peak memory bandwidth in bytes/s, where its name is known."""
    import torch

    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((bw for key, bw in MEMORY_BANDWIDTH.items() if key in name), None)


def bench_sampling(
    loaded: Any, prompts: int, n: int, new_tokens: int, batch_size: int, decoding: str = "dynamic"
) -> tuple[float, int, float | None, int]:
    """(seconds, tokens generated, peak allocated GiB or None on a CPU, decoding steps) of ``n``
    samples of each prompt with the ``decoding`` loop (its warm-up call compiles a static step)."""
    import torch

    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    responder = LocalResponder(
        loaded, PromptFormat(mode="raw", template=TEMPLATE), batch_size=batch_size, decoding=decoding
    )
    questions = sampling_questions(prompts)
    warm = GenerationParams(max_new_tokens=new_tokens, temperature=1.0, n=n, seed=1)
    responder.generate(questions, warm)  # warm-up: the same shapes (a static step compiles here)
    cuda = loaded.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    params = GenerationParams(max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, n=n, seed=0)
    start = time.perf_counter()
    gens = responder.generate(questions, params)
    _sync(loaded.device)()
    seconds = time.perf_counter() - start
    rows = [g for row in gens for g in row]
    tokens = sum(len(g.token_ids) for g in rows)
    steps = sum(max(len(g.token_ids) for g in rows[i : i + batch_size]) + 1 for i in range(0, len(rows), batch_size))
    return seconds, tokens, torch.cuda.max_memory_allocated() / 2**30 if cuda else None, steps


def bench_hf_generate(loaded: Any, prompts: int, n: int, new_tokens: int) -> tuple[float, int]:
    """(seconds, tokens generated) of the same sampling through Hugging Face ``model.generate``
    (do_sample, num_return_sequences = n, all prompts in one left-padded batch)."""
    import torch

    tokenizer = loaded.tokenizer
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    texts = [TEMPLATE.replace("{prompt}", q) for q in sampling_questions(prompts)]
    enc = tokenizer(texts, return_tensors="pt", padding=True).to(loaded.device)
    tokenizer.padding_side = side
    special = {tokenizer.pad_token_id, tokenizer.eos_token_id}

    def sample(count: int, tokens: int) -> int:
        with torch.inference_mode():
            out = loaded.model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                num_return_sequences=count,
                max_new_tokens=tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        return int((~torch.isin(new, torch.tensor(sorted(special), device=new.device))).sum())

    sample(2, 4)  # warm-up
    _sync(loaded.device)()
    start = time.perf_counter()
    made = sample(n, new_tokens)
    _sync(loaded.device)()
    return time.perf_counter() - start, made


def bench_vllm_sampling(loaded: Any, prompts: int, n: int, new_tokens: int, dtype: str) -> tuple[float, int]:
    """(seconds, tokens generated) of the same sampling through engine vllm (issue 33)."""
    import tempfile

    from probes.responders.base import GenerationParams
    from probes.responders.local import PromptFormat
    from probes.responders.vllm_engine import VLLMResponder

    with tempfile.TemporaryDirectory() as tmp:
        loaded.model.save_pretrained(tmp)
        loaded.tokenizer.save_pretrained(tmp)
        loaded.model.to("cpu")  # the GPU's memory for vLLM
        import torch

        torch.cuda.empty_cache()
        responder = VLLMResponder(
            tmp,
            PromptFormat(mode="raw", template=TEMPLATE),
            dtype=dtype,
            engine_args={"gpu_memory_utilization": 0.85, "max_model_len": 4096},
        )
        questions = sampling_questions(prompts)
        responder.generate(questions[:1], GenerationParams(max_new_tokens=4, temperature=1.0, n=2, seed=1))  # warm-up
        start = time.perf_counter()
        gens = responder.generate(questions, GenerationParams(max_new_tokens=new_tokens, temperature=1.0, n=n, seed=0))
        seconds = time.perf_counter() - start
        responder.close()
    return seconds, sum(len(g.token_ids) for row in gens for g in row)


def _sync(device: Any) -> Any:
    import torch

    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=list(SHAPES), default="qwen2-7b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument(
        "--sample-batch-size", type=int, default=0, help="rows per sampling batch (0: all prompts x n, as hf-generate)"
    )
    parser.add_argument("--no-vllm", action="store_true", help="leave out the vLLM row")
    parser.add_argument(
        "--decoding", nargs="+", default=["dynamic", "static"], choices=["dynamic", "static"], help="builtin loops"
    )
    args = parser.parse_args()
    import torch

    loaded = build(args.shape, args.device, args.dtype)
    n_params = sum(p.numel() for p in loaded.model.parameters())
    where = torch.cuda.get_device_name(loaded.device) if loaded.device.type == "cuda" else "CPU"
    print(
        f"model: Qwen2 shape {args.shape} ({n_params / 1e9:.2f} B parameters, {loaded.layout.n_blocks} blocks, "
        f"d={loaded.layout.d_model}), {args.dtype}, random weights, on {where}; torch {torch.__version__}\n"
    )
    report_extraction(loaded, args)
    best_rate = report_sampling(loaded, args)
    report_vllm(loaded, args, best_rate)


def report_extraction(loaded: Any, args: argparse.Namespace) -> None:
    """Part (a): pooled activations of every block, hooks against the floor and the naive path."""
    texts = make_texts(loaded.tokenizer, args.texts, args.max_tokens)
    seconds = bench_extraction(loaded, texts, args.batch_size, args.repeats)
    print(
        f"(a) pooled activations of all {loaded.layout.n_blocks} blocks, {len(texts)} texts of 16..{args.max_tokens} tokens"
    )
    for method, s in seconds.items():
        print(
            f"    {method:<6} {s:9.2f} s  {len(texts) / s:9.1f} texts/s  {s / seconds['floor']:6.2f}x the floor's time"
        )
    print(
        f"    hf against the floor: {seconds['hf'] / seconds['floor'] - 1:+.1%} (target: within 10 %); "
        f"hf against naive: {seconds['naive'] / seconds['hf']:.1f}x faster (target: >= 5x)\n"
    )


def report_sampling(loaded: Any, args: argparse.Namespace) -> float:
    """Part (b): each builtin decoding loop and hf-generate; returns the best builtin tokens/s."""
    rows = args.sample_batch_size or args.prompts * args.n
    weight_bytes = sum(p.numel() * p.element_size() for p in loaded.model.parameters())
    peak_bw = bandwidth(loaded.device)
    floor_ms = weight_bytes / peak_bw * 1e3 if peak_bw else None
    print(
        f"(b) sampling {args.n} completions of up to {args.new_tokens} tokens for each of {args.prompts} prompts "
        f"(T=1.0), {rows} rows per batch; reading the weights once: {weight_bytes / 1e9:.1f} GB"
        + (f", {floor_ms:.2f} ms a step at {peak_bw / 1e12:.2f} TB/s" if floor_ms else " (bandwidth unknown here)")
    )
    rates = {}
    for decoding in args.decoding:
        s, tokens, peak, steps = bench_sampling(loaded, args.prompts, args.n, args.new_tokens, rows, decoding)
        rates[decoding] = tokens / s
        step_ms = s / steps * 1e3
        memory = f", peak allocated {peak:.1f} GiB" if peak is not None else ""
        against = f", {step_ms / floor_ms:.1f}x the floor" if floor_ms else ""
        print(
            f"    builtin {decoding:<8} {s:8.1f} s  {tokens / s:9.1f} tokens/s  ({tokens} tokens; "
            f"{step_ms:.1f} ms a step{against}){memory}"
        )
    gs, gtokens = bench_hf_generate(loaded, args.prompts, args.n, args.new_tokens)
    best = max(rates, key=rates.get)
    print(
        f"    hf-generate      {gs:8.1f} s  {gtokens / gs:9.1f} tokens/s  ({gtokens} tokens); the builtin sampler "
        + ", ".join(f"{d} {r / (gtokens / gs):.2f}x" for d, r in rates.items())
        + f" hf-generate's tokens/s (best: {best}; target >= 1.5x, goal >= 3x)"
    )
    return rates[best]


def report_vllm(loaded: Any, args: argparse.Namespace, builtin_rate: float) -> None:
    """The vLLM row, compared with the best builtin loop's tokens/s; left out without vLLM."""
    import importlib.util

    if args.no_vllm or importlib.util.find_spec("vllm") is None:
        why = "--no-vllm" if args.no_vllm else "vLLM not installed: pip install -e '.[vllm]'"
        print(f"    vllm    left out ({why})")
        return
    vs, vtokens = bench_vllm_sampling(loaded, args.prompts, args.n, args.new_tokens, args.dtype)
    print(
        f"    vllm    {vs:9.1f} s  {vtokens / vs:9.1f} tokens/s  ({vtokens} tokens); "
        f"{(vtokens / vs) / builtin_rate:.2f}x the builtin sampler's tokens/s"
    )


if __name__ == "__main__":
    main()
