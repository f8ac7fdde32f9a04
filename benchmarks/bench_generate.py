"""Generation throughput: offline sets/s, and LLM wall time at concurrency 1 vs 16.

The LLM side runs the real ``openai`` client against the scripted loopback server of the tests
(``tests/generation/fake_llm.py``) with an artificial latency per request, each run with an
empty response cache, so every request really goes over HTTP.

    python benchmarks/bench_generate.py                      # 200 offline, 100 LLM questions, 200 ms
    python benchmarks/bench_generate.py --llm-questions 20   # quicker
    python benchmarks/bench_generate.py --llm-questions 0    # offline only
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generation.config import GenerationConfig  # noqa: E402
from generation.offline import OfflineGenerator  # noqa: E402
from generation.pipeline import run_generation  # noqa: E402
from generation.question_bank import sample_questions  # noqa: E402
from generation.records import Question  # noqa: E402
from tests.generation.fake_llm import FakeLLMServer  # noqa: E402


def offline(n: int, repeats: int, relations: str = "arithmetic") -> tuple[float, float]:
    questions = sample_questions(n, seed=0)
    config = GenerationConfig.from_dict({"offline": {"relations": relations}})
    generator = OfflineGenerator(config, "bench")
    best_sets = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for q in questions:
            generator.generate(q)
        best_sets = min(best_sets, time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_generation(questions, Path(tmp) / "sets.jsonl", config)
        job = time.perf_counter() - start
    return n / best_sets, n / job


def llm(n: int, latency: float, concurrency: int) -> tuple[float, int]:
    questions = [
        Question(id=f"q{i}", question=f"Shop {i} has {12 + i} apples and sells {3 + i % 5} of them. How many are left?")
        for i in range(n)
    ]
    os.environ["LARA_BENCH_KEY"] = "bench"
    with FakeLLMServer(latency=latency) as server, tempfile.TemporaryDirectory() as tmp:
        config = GenerationConfig.from_dict(
            {
                "backend": "openai",
                "openai": {
                    "base_url": server.base_url,
                    "model": "fake",
                    "api_key_env": "LARA_BENCH_KEY",
                    "cache_dir": str(Path(tmp) / "cache"),
                    "concurrency": concurrency,
                },
            }
        )
        start = time.perf_counter()
        summary = run_generation(questions, Path(tmp) / "sets.jsonl", config)
        wall = time.perf_counter() - start
        assert summary.complete == n, summary.describe()
        return wall, server.requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offline-questions", type=int, default=200)
    parser.add_argument("--llm-questions", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the fake server waits per request")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(
        f"offline, {args.offline_questions} bank questions, K=5 M=5 k=1 (similars keep the original's arithmetic "
        "relations, default / its order only, the previous algorithm):"
    )
    for relations in ("arithmetic", "order"):
        sets_per_s, job_per_s = offline(args.offline_questions, args.repeats, relations)
        print(
            f"  {relations:<10} generator only {sets_per_s:8.1f} sets/s, whole job (JSONL out) {job_per_s:8.1f} sets/s"
        )
    if args.llm_questions <= 0:
        return

    print(
        f"LLM backend, {args.llm_questions} questions, {args.latency * 1000:.0f} ms per request, real openai client over loopback HTTP:"
    )
    results = {}
    for concurrency in (1, 16):
        wall, requests = llm(args.llm_questions, args.latency, concurrency)
        results[concurrency] = wall
        print(
            f"  concurrency {concurrency:>2}        {wall:8.1f} s wall  ({requests} requests, {requests / wall:.1f} req/s)"
        )
    print(f"  speed-up 16 vs 1      {results[1] / results[16]:8.1f}x")


if __name__ == "__main__":
    main()
