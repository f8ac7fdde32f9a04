"""The rollout budget that pays (issue 56, item 4): the decisions against the samples reward gain
draws per question.

    python benchmarks/bench_rollout_budget.py [--config configs/demo.yaml] [--budgets 4,8,16,32,64]
                                              [--subsets 100] [--size 60] [--seed 0]

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

Writes ``bench/rollout_budget.json`` in the run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from bench_ceiling import decisions, run_params, score_on_run
from bench_fdr import cases
from bench_rollout_scores import joined
from bench_verdict import ensure_run, scored

from generation.records import read_questions
from probes.detectors import get_detector
from probes.pipeline import load_run_config
from probes.pipeline.run_state import LazyModel
from probes.pipeline.stages import _prompt_format
from probes.responders.open import open_responder

ROOT = Path(__file__).resolve().parents[1]


def seconds_per_sample(config, questions, n: int = 16) -> float:
    """CPU seconds per sampled answer of the audited model at the run's reward-gain settings, timed
    on ``questions`` with a throwaway store (so nothing comes from the run's)."""
    d = config.detect
    params = get_detector("reward_gain", **run_params(config, "reward_gain", n=n)).sampling_params()
    with tempfile.TemporaryDirectory() as tmp:
        responder = open_responder(
            LazyModel(dict(config.models())[config.name]).get, _prompt_format(config), Path(tmp) / "timing.sqlite",
            batch_size=d.batch_size,
        )  # fmt: skip
        responder.generate(questions[:2], dataclasses.replace(params, n=2))  # the model loaded, caches warm
        start = time.perf_counter()
        responder.generate(questions, params)
        return (time.perf_counter() - start) / (len(questions) * n)


def run(config, args: argparse.Namespace) -> dict:
    ensure_run(config)
    run_dir = Path(config.run_dir)
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    audited = [q for q in questions if q.split != "clean_ref"]
    default = cases(config, run_dir, questions, None)[0]
    controls = config.calibration.controls
    found: dict = {}
    per_sample = seconds_per_sample(config, [q.question for q in audited[:20]])
    for n in args.budgets:
        start = time.perf_counter()
        summary = score_on_run(config, [get_detector("reward_gain", **run_params(config, "reward_gain", n=n))], audited)
        seconds = time.perf_counter() - start
        generated = summary.info["counts"]["generated"] + (summary.info.get("reference_counts") or {}).get(
            "generated", 0
        )
        rl = joined(scored(run_dir, config.name), summary, ["reward_gain"])
        base = dataclasses.replace(default, audited=rl.subset(default.audited.ids))
        fdr_args = argparse.Namespace(subsets=args.subsets, size=args.size, seed=args.seed)
        found[n] = {
            "samples_per_question_per_model": n * (1 + controls),
            "new_samples": generated,
            "seconds": seconds,
            "reward gain alone": decisions(
                dataclasses.replace(base, detectors=["reward_gain"]), members, non_members, fdr_args, config.verdict
            ),
            "the run's combination": decisions(base, members, non_members, fdr_args, config.verdict),
        }
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}): reward gain at each budget, "
        f"{len(audited)} questions and {controls} controls each; q = {config.verdict.fdr}, {args.subsets} subsets of {args.size}"
    )
    print(
        f"  {'n':>3} {'samples/question/model':>23} {'CPU s/question':>15}  {'decided on':<24} {'flagged (members)':>18} "
        f"{'at least k':>10} {'members named':>14} {'any flag, non-members':>22}"
    )
    for n, r in found.items():
        r["cpu_seconds_per_question"] = 2 * r["samples_per_question_per_model"] * per_sample
        for title in ("reward gain alone", "the run's combination"):
            d = r[title]
            print(
                f"  {n:>3} {r['samples_per_question_per_model']:>23} {r['cpu_seconds_per_question']:>15.2f}  {title:<24} "
                f"{d['flagged']:>9} ({d['flagged_members']:>4}) {d['at_least']:>10} {d['members_named']:>14.3f} "
                f"{d['any_flag_non_members']:>22.3f}"
            )
    (run_dir / "bench").mkdir(exist_ok=True)
    out = {"seconds_per_sample": per_sample, "budgets": found}
    (run_dir / "bench" / "rollout_budget.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=[4, 8, 16, 32, 64])
    parser.add_argument("--subsets", type=int, default=100)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(load_run_config(args.config), args)


if __name__ == "__main__":
    main()
