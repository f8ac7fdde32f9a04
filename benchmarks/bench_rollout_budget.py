"""The rollout budget that pays (issue 56, item 4): the decisions against the samples reward gain
draws per question.

    python benchmarks/bench_rollout_budget.py [--config configs/demo.yaml] [--budgets 4,8,16,32,64]
                                              [--per-label N] [--subsets 100] [--size 60] [--seed 0]

For each budget n, reward gain is scored with n samples a model on the audited questions and their
sampling controls (the verdict's first ``calibration.controls``) through the run's models and
response stores — sample j of a prompt never depends on n, so a larger budget only adds samples
and ``bench_ceiling.py``'s 64 serve every smaller one — and the run's decisions are made again
with it: reward gain alone, and the run's combination with its reward gain drawn at n. Printed per
budget: flagged (members among them) and "at least k" on the whole audited set, members named in
all-member subsets of ``--size``, any flag in all-non-member subsets, and the cost per question —
samples a model (n × (1 + controls)) and the seconds they take here (the audited model's rate,
timed once on 20 questions × 16 samples of the audited model with a throwaway store; both models
are taken to cost the same).

``--per-label N`` decides the first N members and N non-members only (``bench_ceiling.py``'s
subset: its samples serve every budget). Writes ``bench/rollout_budget.json`` in the run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from bench_ceiling import decisions, run_access, run_models, run_params, save, score_on_run
from bench_rollout_scores import joined
from bench_verdict import ensure_run, scored
from subset_decisions import reference_case

from generation.records import read_questions
from probes.detectors import get_detector
from probes.operations.detect import opened_responders
from probes.pipeline import load_run_config
from probes.pipeline.run_state import LazyModel

ROOT = Path(__file__).resolve().parents[1]


def seconds_per_sample(config, models: dict[str, LazyModel], questions, n: int = 16) -> float:
    """Seconds per sampled answer of the audited model at the run's reward-gain settings, through
    the run's engine, timed on ``questions`` with a throwaway store (so nothing comes from the
    run's); the warm-up asks other prompts, so every timed sample is drawn."""
    params = get_detector("reward_gain", **run_params(config, "reward_gain", n=n)).sampling_params()
    access, _, options = run_access(config, models)
    with tempfile.TemporaryDirectory() as tmp:
        throwaway = dataclasses.replace(access, store=Path(tmp) / "timing.sqlite")
        with opened_responders(throwaway, None, options) as (responder, _):
            warm_up = [f"{q}\n" for q in questions[:2]]  # the model loaded, caches warm; not a timed prompt
            responder.generate(warm_up, dataclasses.replace(params, n=2))
            start = time.perf_counter()
            responder.generate(questions, params)
            return (time.perf_counter() - start) / (len(questions) * n)


def run(config, args: argparse.Namespace) -> dict:
    ensure_run(config)
    run_dir = Path(config.run_dir)
    questions = read_questions(config.questions)
    members = [q.id for q in questions if q.label == 1][: args.per_label]
    non_members = [q.id for q in questions if q.label == 0][: args.per_label]
    chosen = set(members + non_members)
    audited = [q for q in questions if q.id in chosen]
    controls = config.calibration.controls
    models = run_models(config)  # each loaded once for every budget and the timing
    per_sample = seconds_per_sample(config, models, [q.question for q in audited[:20]])
    sft = scored(run_dir, config.reference_name())
    fdr_args = argparse.Namespace(subsets=args.subsets, size=args.size, seed=args.seed)
    found: dict = {}
    for n in args.budgets:
        start = time.perf_counter()
        detector = get_detector("reward_gain", **run_params(config, "reward_gain", n=n))
        summary = score_on_run(config, [detector], audited, models)
        seconds = time.perf_counter() - start
        counts = [summary.info["counts"], summary.info.get("reference_counts") or {}]
        # the run's scores with reward gain drawn at n (its combination; the other detectors as the run scored them)
        case = reference_case(
            config, run_dir, questions, joined(scored(run_dir, config.name), summary, ["reward_gain"]), sft
        )
        found[n] = {
            "samples_per_question_per_model": n * (1 + controls),
            "new_samples": sum(c.get("generated", 0) for c in counts),
            "seconds": seconds,
            "cpu_seconds_per_question": 2 * n * (1 + controls) * per_sample,
            "reward gain alone": decisions(
                dataclasses.replace(case, detectors=["reward_gain"]), members, non_members, fdr_args, config.verdict
            ),
            "the run's combination": decisions(case, members, non_members, fdr_args, config.verdict),
        }
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}): reward gain at each budget, "
        f"{len(audited)} questions ({len(members)} members) and {controls} controls each; q = {config.verdict.fdr}, "
        f"{args.subsets} subsets of {args.size}"
    )
    print(
        f"  {'n':>3} {'samples/question/model':>23} {'CPU s/question':>15}  {'decided on':<24} "
        f"{'flagged (members) of tested':>27} {'at least k':>10} {'members named':>14} {'any flag, non-members':>22}"
    )
    for n, r in found.items():
        for title in ("reward gain alone", "the run's combination"):
            d = r[title]
            print(
                f"  {n:>3} {r['samples_per_question_per_model']:>23} {r['cpu_seconds_per_question']:>15.2f}  {title:<24} "
                f"{d['flagged']:>9} ({d['flagged_members']:>4}) of {d['tested']:>4}      {d['at_least']:>10} "
                f"{d['members_named']:>14.3f} {d['any_flag_non_members']:>22.3f}"
            )
    out = {"seconds_per_sample": per_sample, "budgets": found}
    save(config, "rollout_budget", out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=[4, 8, 16, 32, 64])
    parser.add_argument("--per-label", type=int, default=None, help="the first N members and N non-members only")
    parser.add_argument("--subsets", type=int, default=100)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="a config override, KEY=VALUE (as lara run --set)")
    args = parser.parse_args()
    run(load_run_config(args.config, args.set), args)


if __name__ == "__main__":
    main()
