"""ReCaLL with its shared prefix encoded once per batch against the whole sequences, side by side in
one run (not a test; issue 55, item 4): the seconds of the conditioned scoring pass and the largest
difference between the two ratios.

ReCaLL scores each text after a prefix of known non-member questions that is the same for every
text; a scoring batch whose rows share it runs it once and reuses its KV cache for every row.

    python benchmarks/bench_recall_prefix.py [--questions 200] [--n-prefix 5] [--device cpu] [--model gpt2-small]

On the shipped testbed's RL checkpoint (0.9 M parameters: the forward passes cost next to nothing)
or a GPT-2-small-shaped model with random weights (124 M parameters: what the forward passes cost).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TESTBED = Path(__file__).resolve().parents[1] / "probes" / "testbed" / "checkpoints" / "cpu-seed0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--n-prefix", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", choices=["testbed", "gpt2-small"], default="gpt2-small")
    args = parser.parse_args()
    import numpy as np
    import torch

    from cache.config import ModelConfig
    from cache.loading import load_model
    from probes.detectors import get_detector, stats
    from probes.detectors.likelihood import same_tokens
    from probes.responders import forward_scoring
    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()]
    clean = [r["question"] for r in rows if r.get("split") == "clean_ref"]
    audited = [r["question"] for r in rows if r.get("split") != "clean_ref"][: args.questions]
    from bench_engines import gpt2_small

    tmp = tempfile.TemporaryDirectory()
    source = TESTBED / "rl" if args.model == "testbed" else gpt2_small(Path(tmp.name) / "gpt2-small")
    loaded = load_model(ModelConfig(source=str(source), device=args.device, dtype="float32"))
    responder = LocalResponder(loaded, PromptFormat(mode="raw", template="Q: {prompt}\nA:"), batch_size=args.batch_size)
    detector = get_detector("recall", max_new_tokens=64, n_prefix=args.n_prefix).fit(clean)
    with torch.inference_mode():
        answers = [g[0].text for g in responder.generate(audited, GenerationParams(max_new_tokens=64))]
        plain = responder.score([responder.format(q) for q in audited], answers)
        contexts = [responder.format(detector.prefix_for(q) + "\n\n" + q) for q in audited]
        responder.score(contexts[:8], answers[:8])  # warm-up
        results, seconds = {}, {}
        for label, shared in (("whole sequences", 10**9), ("prefix reused", forward_scoring.MIN_SHARED_TOKENS)):
            forward_scoring.MIN_SHARED_TOKENS = shared
            start = time.perf_counter()
            conditioned = responder.score(contexts, answers)  # ReCaLL's conditioned pass, as it calls it
            seconds[label] = time.perf_counter() - start
            pairs = [same_tokens(c, p) for c, p in zip(conditioned, plain)]
            results[label] = np.array([stats.recall_ratio(*x) if x else np.nan for x in pairs], dtype=float)
    whole, reused = results["whole sequences"], results["prefix reused"]
    prefix_tokens = len(responder.tokenizer(detector.prefix_for(audited[0]))["input_ids"])
    print(
        f"ReCaLL on {len(audited)} testbed questions, {args.model} (greedy answers of up to 64 tokens), prefix of "
        f"{args.n_prefix} clean questions ({prefix_tokens} tokens), {args.batch_size} texts a batch, on {args.device}:"
    )
    for label, s in seconds.items():
        print(f"    {label:<16} {s:7.2f} s")
    print(
        f"    speed-up {seconds['whole sequences'] / seconds['prefix reused']:.2f}x; "
        f"largest ratio difference {float(np.nanmax(np.abs(whole - reused) / np.abs(whole))):.1e} relative "
        f"(float32 rounding: the ratios reach {float(np.nanmax(np.abs(whole))):.3g}; target: <= 1e-6)"
    )


if __name__ == "__main__":
    main()
