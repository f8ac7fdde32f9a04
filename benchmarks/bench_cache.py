"""Throughput of activation caching, side by side in one run (not a test).

Model: GPT-2-small shape (12 blocks, d=768, 12 heads, vocab 50257, 1024 positions), random
weights, built locally. Sets: ``short`` = 32 texts of ~64 tokens; ``mixed`` = 256 texts of
8..MAX tokens (uniform). Methods, each in its own process so its peak RSS is its own:

* ``floor``      the base model's forward on the same length-sorted batches, no hooks
* ``hf``         the ``hf`` backend (hooks, masked mean inside the hook), all 12 layers
* ``hf+store``   ``run_cache`` end to end: tokenization, ``hf`` backend, crash-safe HDF5 writes
* ``transformer_lens`` / ``nnsight``   the other backends, all 12 layers
* ``naive``      what the LaRA research code does: the full LM with ``output_hidden_states=True``,
                 one text at a time, mean over tokens

Each timed figure excludes model loading and is the best of ``--repeats`` passes after one
warm-up batch. Ratios are time relative to ``floor`` (1.10 = 10 % slower than the floor).

    python benchmarks/bench_cache.py                 # full run (CPU: ~15 min on 2 cores)
    python benchmarks/bench_cache.py --quick         # smaller model and sets, for a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METHODS = ("floor", "hf", "hf+store", "transformer_lens", "nnsight", "naive")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4 blocks, d=256, and smaller sets")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--sets", default="short,mixed")
    parser.add_argument("--max-mixed-tokens", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "MODEL", "TEXTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, model_dir, texts_file = args.child
        print(json.dumps(run_child(method, Path(model_dir), Path(texts_file), args.repeats, args.batch_size)))
        return

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lara-bench-"))
    model_dir = build_model(workdir, args.quick)
    sets = {
        name: make_texts(workdir, name, model_dir, args.quick, args.max_mixed_tokens) for name in args.sets.split(",")
    }
    methods = args.methods.split(",")
    results: dict[tuple[str, str], dict] = {}
    for set_name, texts_file in sets.items():
        for method in methods:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                method,
                str(model_dir),
                str(texts_file),
                "--repeats",
                str(args.repeats),
                "--batch-size",
                str(args.batch_size),
            ]
            done = subprocess.run(
                cmd, capture_output=True, text=True, env=dict(os.environ, TOKENIZERS_PARALLELISM="false")
            )
            if done.returncode != 0:
                print(f"{method} on {set_name} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            results[set_name, method] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"  {set_name:>5} {method:<16} {results[set_name, method]['seconds']:.2f}s", file=sys.stderr)
    print_table(results, sets, methods, model_dir)


def build_model(workdir: Path, quick: bool) -> Path:
    from cache.toymodels import ToyModelSpec, ensure_toy_model

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
    return ensure_toy_model(spec, workdir / "models")


def make_texts(workdir: Path, name: str, model_dir: Path, quick: bool, max_mixed: int) -> Path:
    """Texts of target token lengths, made of corpus sentences (seeded)."""
    import numpy as np
    from transformers import AutoTokenizer

    from cache.toymodels import corpus

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rng = np.random.default_rng(0)
    sentences = corpus()
    if name == "short":
        targets = [64] * (16 if quick else 32)
    elif name == "mixed":
        targets = rng.integers(8, max_mixed + 1, size=64 if quick else 256).tolist()
    else:
        raise SystemExit(f"unknown set {name!r}: short or mixed")
    texts = []
    for target in targets:
        ids: list[int] = []
        while len(ids) < target:
            ids += tokenizer(" " + sentences[int(rng.integers(len(sentences)))])["input_ids"]
        texts.append(tokenizer.decode(ids[:target]).strip())
    path = workdir / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


class PeakRSS:
    """Samples this process's resident set size every 5 ms while active."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.is_set():
            with open("/proc/self/statm") as f:
                self.peak = max(self.peak, int(f.read().split()[1]) * page)
            time.sleep(0.005)

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class ChildSetup:
    """What every method's runner needs: the loaded model, its texts and their planned batches."""

    loaded: Any
    model_dir: Path
    texts: list[str]
    batches: list[Any]
    selection: Any
    batch_size: int


def run_child(method: str, model_dir: Path, texts_file: Path, repeats: int, batch_size: int) -> dict:
    import resource

    import torch

    from cache.batching import collate, default_batch_tokens, plan_batches
    from cache.config import ModelConfig
    from cache.fingerprint import text_hash
    from cache.layers import resolve_layers
    from cache.loading import load_model
    from cache.prompts import PromptEncoder
    from cache.texts import read_texts

    texts = read_texts(texts_file)
    loaded = load_model(ModelConfig(source=str(model_dir), device="cpu"))
    tokenizer = loaded.tokenizer
    encoded = PromptEncoder(tokenizer).encode(texts)
    keys = [text_hash(t) for t in texts]
    plan = plan_batches([len(e) for e in encoded], keys, batch_size, default_batch_tokens(loaded.device.type))
    batches = [collate([encoded[i] for i in b], tokenizer.pad_token_id) for b in plan]
    selection = resolve_layers(["all"], loaded.layout.n_blocks)
    run_all, warm = method_runner(method, ChildSetup(loaded, model_dir, texts, batches, selection, batch_size))

    warm()
    best = float("inf")
    with PeakRSS() as rss:
        for _ in range(repeats):
            start = time.perf_counter()
            run_all()
            best = min(best, time.perf_counter() - start)
    return {
        "seconds": best,
        "texts": len(texts),
        "tokens": sum(len(e) for e in encoded),
        "loop_peak_rss_mb": rss.peak / 2**20,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "threads": torch.get_num_threads(),
    }


def method_runner(method: str, setup: ChildSetup) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(run_all, warm)`` for one method: a pass over every batch, and one warm-up batch."""
    import torch

    from cache.architecture import forward_kwargs, get_submodule
    from cache.backends import create_extractor
    from cache.config import CacheConfig, ExtractionConfig, ModelConfig
    from cache.runner import run_cache

    loaded, batches, selection = setup.loaded, setup.batches, setup.selection
    if method == "floor":
        base = get_submodule(loaded.model, loaded.layout.base_path)

        def forward(batch: Any) -> None:
            with torch.inference_mode():
                base(**forward_kwargs(base, batch.model_inputs()))

        return each(forward, batches), lambda: forward(batches[-1])
    if method in ("hf", "transformer_lens", "nnsight"):
        extractor = create_extractor(method, loaded, own_model=True)
        pool = lambda batch: extractor.pool(batch, selection)  # noqa: E731
        return each(pool, batches), lambda: pool(batches[-1])
    if method == "hf+store":
        _ = loaded.weights_fingerprint
        model_config = ModelConfig(source=str(setup.model_dir), device="cpu")
        config = CacheConfig(model=model_config, extraction=ExtractionConfig(batch_size=setup.batch_size))
        extractor = create_extractor("hf", loaded, own_model=True)
        tmp = Path(tempfile.mkdtemp())
        counter = iter(range(10**6))

        def store_all() -> None:
            out = tmp / f"acts-{next(counter)}.h5"
            run_cache(setup.texts, out, config, loaded=loaded, extractor=extractor, progress=False)

        return store_all, lambda: extractor.pool(batches[-1], selection)
    if method == "naive":
        model, tokenizer = loaded.model, loaded.tokenizer

        def one_text(text: str) -> None:
            with torch.inference_mode():
                hidden = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True).hidden_states
                _ = [h[0].mean(0).cpu() for h in hidden]

        return each(one_text, setup.texts), lambda: one_text(setup.texts[0])
    raise SystemExit(f"unknown method {method!r}")


def each(step: Callable[[Any], Any], items: list[Any]) -> Callable[[], None]:
    """A pass that runs ``step`` on every item in order."""

    def run_all() -> None:
        for item in items:
            step(item)

    return run_all


def print_table(results: dict, sets: dict, methods: list[str], model_dir: Path) -> None:
    import platform

    import torch

    spec = json.loads((model_dir / "toy_spec.json").read_text())
    print(
        f"\nmodel: GPT-2 shape, {spec['n_layers']} blocks, d={spec['d_model']}, vocab {spec['vocab_size']} (random weights)"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, CPU"
    )
    for set_name in sets:
        floor = results.get((set_name, "floor"))
        first = next((r for (s, _), r in results.items() if s == set_name), None)
        if first is None:
            continue
        print(f"\nset '{set_name}': {first['texts']} texts, {first['tokens']} tokens")
        print(
            f"{'method':<18}{'seconds':>9}{'texts/s':>10}{'tokens/s':>10}{'x floor':>9}{'naive/this':>12}{'loop peak RSS':>15}{'max RSS':>10}"
        )
        naive = results.get((set_name, "naive"))
        for method in methods:
            r = results.get((set_name, method))
            if r is None:
                continue
            ratio = f"{r['seconds'] / floor['seconds']:.2f}" if floor else "-"
            vs_naive = f"{naive['seconds'] / r['seconds']:.1f}x" if naive else "-"
            print(
                f"{method:<18}{r['seconds']:>9.2f}{r['texts'] / r['seconds']:>10.1f}{r['tokens'] / r['seconds']:>10.0f}"
                f"{ratio:>9}{vs_naive:>12}{r['loop_peak_rss_mb']:>12.0f} MB{r['max_rss_mb']:>7.0f} MB"
            )


if __name__ == "__main__":
    main()
