"""Output-level detectors, side by side in one run:

(a) Min-kNN on 32 completions of 1,024 tokens: the compiled edit distance (rapidfuzz on token ids,
    what ``min_knn_statistic`` uses) vs a pure-Python dynamic programme. The Python DP is timed on
    a few pairs and scaled to all 496 pairs (it would take minutes).
(b) Local generation throughput (tokens/s) of 32 sampled completions on a GPT-2-small-shaped model
    (12 blocks, d=768, vocab 50257, random weights): one batch of 32 vs one prompt at a time.

    python benchmarks/bench_detectors.py                 # as above
    python benchmarks/bench_detectors.py --quick         # smaller model and shorter completions
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from probes.detectors import min_knn_statistic  # noqa: E402


def python_levenshtein(a: list[int], b: list[int]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def bench_min_knn(n: int, length: int, python_pairs: int) -> None:
    rng = random.Random(0)
    base = [rng.randrange(50000) for _ in range(length)]
    seqs = []
    for _ in range(n):  # completions that share a prefix and diverge, as samples do
        cut = rng.randrange(length // 4, length)
        seqs.append(base[:cut] + [rng.randrange(50000) for _ in range(length - cut)])
    start = time.perf_counter()
    statistic = min_knn_statistic(seqs, k=10)
    compiled = time.perf_counter() - start
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    start = time.perf_counter()
    for i, j in pairs[:python_pairs]:
        python_levenshtein(seqs[i], seqs[j])
    per_pair = (time.perf_counter() - start) / python_pairs
    python_total = per_pair * len(pairs)
    print(f"(a) Min-kNN, {n} completions x {length} tokens ({len(pairs)} pairs), statistic {statistic:.4f}")
    print(f"    compiled (rapidfuzz cdist)      {compiled * 1000:10.1f} ms")
    print(
        f"    pure-Python DP                  {python_total * 1000:10.1f} ms  (timed on {python_pairs} pairs, scaled)"
    )
    print(f"    ratio                           {python_total / compiled:10.0f}x")


def bench_generation(quick: bool, n: int, new_tokens: int) -> None:
    from cache.config import ModelConfig
    from cache.loading import load_model
    from cache.toymodels import ToyModelSpec, ensure_toy_model
    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    spec = (
        ToyModelSpec(
            arch="gpt2", n_layers=4, d_model=256, n_heads=8, vocab_size=50257, tokenizer_vocab=2000, max_positions=1024
        )
        if quick
        else ToyModelSpec(
            arch="gpt2",
            n_layers=12,
            d_model=768,
            n_heads=12,
            vocab_size=50257,
            tokenizer_vocab=2000,
            max_positions=1024,
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = ensure_toy_model(spec, Path(tmp))
        loaded = load_model(ModelConfig(source=str(model_dir), device="cpu"))
    prompt = "A train travels 120 km in 2 hours. What is its average speed in km/h? Explain step by step."
    params = GenerationParams(max_new_tokens=new_tokens, temperature=0.7, top_p=0.95, n=n, seed=0)
    results = {}
    for label, batch_size in (("batched (32 rows)", n), ("one at a time", 1)):
        responder = LocalResponder(loaded, PromptFormat(mode="raw"), batch_size=batch_size)
        responder.generate(
            [prompt], GenerationParams(max_new_tokens=2, temperature=0.7, n=min(n, batch_size))
        )  # warm-up
        start = time.perf_counter()
        gens = responder.generate([prompt], params)[0]
        seconds = time.perf_counter() - start
        tokens = sum(len(g.token_ids) for g in gens)
        results[label] = (seconds, tokens)
    shape = f"{spec.n_layers} blocks, d={spec.d_model}, vocab {spec.vocab_size}"
    print(
        f"(b) sampling {n} completions of up to {new_tokens} tokens (T=0.7, top-p 0.95) on a GPT-2-shaped model ({shape}), CPU"
    )
    for label, (seconds, tokens) in results.items():
        print(f"    {label:<30}  {seconds:8.1f} s  {tokens / seconds:8.1f} tokens/s  ({tokens} tokens)")
    (b_s, b_t), (o_s, o_t) = results["batched (32 rows)"], results["one at a time"]
    print(f"    ratio                           {(b_t / b_s) / (o_t / o_s):8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import torch

    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, threads {torch.get_num_threads()}\n")
    bench_min_knn(32, 256 if args.quick else 1024, python_pairs=2 if args.quick else 3)
    print()
    bench_generation(args.quick, n=32, new_tokens=32 if args.quick else 128)


if __name__ == "__main__":
    main()
