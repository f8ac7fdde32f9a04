"""Reference scores on the audited model's own rollouts (SPEC §10) on a testbed, against the labels
and inside the verdict and the decisions.

    python benchmarks/bench_rollout_scores.py [--config configs/demo.yaml] [--subsets 200] [--size 50]
                                              [--fdr-subsets 100] [--fdr-size 60] [--seed 0]

Scores ``shift_vote``, ``answer_shift`` and ``gold_shift`` with the run's reward-gain samples (its
n, budget and temperature: the response store serves them, so only forward passes run) on the
audited questions and their sampling controls, through the run's models (``lara run`` first where
it has not run). Prints, per score:

* its AUC with a 95 % bootstrap CI, members against non-members, on the RL checkpoint (and its
  controls-calibrated column); on the reference checkpoint n/a — a model against itself scores 0
  on every text, so there is nothing to separate (the report says "not applicable (self-reference)");
* its within-AUC and p in the reference mode on the whole audited set;
* the reference mode's rejection rate at α on ``--subsets`` random subsets of ``--size``
  non-members (its size: ≤ α + Monte-Carlo error when valid) and members (power): the score alone,
  the run's combination, and the run's combination with the three scores in it;
* the decisions on the whole audited set (flagged, members among them, "at least k") and the share
  of members named in all-member subsets of ``--fdr-size``: the run's combination with the three
  scores, and each score alone.

Writes ``bench/rollout_scores.json`` in the run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
from bench_ceiling import decisions, print_table, run_params, score_on_run
from bench_fdr import cases
from bench_verdict import ensure_run, rates, scored, verdict_view

from generation.records import read_questions
from probes.calibration.verdict import compute_verdict
from probes.detectors import get_detector
from probes.evaluation import evaluate
from probes.pipeline import load_run_config

ROOT = Path(__file__).resolve().parents[1]
SCORES = ("shift_vote", "answer_shift", "gold_shift")
SAMPLING = ("n", "temperature", "top_p", "max_new_tokens", "seed")


def joined(base, summary, names):
    """``base`` (a :class:`ScoredSet`) with ``names``' columns of ``summary`` joined in, on the
    originals by id and on the controls by (id, control index); NaN where not scored."""
    rows = {qid: i for i, qid in enumerate(summary.table.ids)}
    where = {(qid, int(c)): k for k, (qid, c) in enumerate(zip(summary.controls.ids, summary.controls.index))}
    for name in names:
        values = summary.table.columns[name]
        base.scores.columns[name] = np.array([values[rows[i]] if i in rows else np.nan for i in base.scores.ids])
        on_controls = summary.controls.columns[name]
        base.controls.columns[name] = np.array(
            [
                on_controls[where[(qid, int(c))]] if (qid, int(c)) in where else np.nan
                for qid, c in zip(base.controls.ids, base.controls.index)
            ]
        )
    return base


def cell(figure: dict) -> str:
    lo, hi = figure["ci"]
    return f"{figure['value']:.2f} [{lo:.2f}, {hi:.2f}]"


def run(config, args: argparse.Namespace) -> dict:
    ensure_run(config)
    run_dir = Path(config.run_dir)
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    audited = [q for q in questions if q.split != "clean_ref"]
    sampling = {k: v for k, v in run_params(config, "reward_gain").items() if k in SAMPLING}
    summary = score_on_run(config, [get_detector(name, **sampling) for name in SCORES], audited)
    rl = joined(scored(run_dir, config.name), summary, SCORES)
    sft = verdict_view(scored(run_dir, config.reference_name()), config)
    labels = np.array([1 if q.id in set(members) else 0 for q in audited])
    found: dict = {"sampling": sampling, "auc": {}, "verdict": {}, "rates": {}}
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}), the rollouts of reward gain "
        f"({', '.join(f'{k} {v}' for k, v in sampling.items())}); {len(members)} members, {len(non_members)} non-members"
    )
    default = cases(config, run_dir, questions, None)[0]
    settings = dataclasses.replace(config.verdict, detectors=tuple(default.detectors) + SCORES)
    whole = compute_verdict(verdict_view(rl, config).subset([q.id for q in audited]), sft, None, settings)
    print(
        f"  {'score':<14} {'AUC on RL [95% CI]':<22} {'AUC on the reference':<24} {'within-AUC (reference mode)':<28} p"
    )
    for name in SCORES:
        auc = evaluate(labels, rl.subset([q.id for q in audited]).original(name), seed=args.seed)["auc"]
        record = whole["modes"]["reference"]["detectors"][name]
        found["auc"][name] = auc
        found["verdict"][name] = {"within_auc": record["within_auc"], "p_value": record["p_value"]}
        print(
            f"  {name:<14} {cell(auc):<22} {'n/a (its own reference)':<24} {cell(record['within_auc']):<28} "
            f"{record['p_value']:.4f}"
        )
    for group, ids in (("non-members", non_members), ("members", members)):
        for label, names in (("the run's", tuple(default.detectors)), ("with the three", settings.detectors)):
            s = dataclasses.replace(settings, detectors=names, permutations=2000, bootstrap=1)
            r = rates(verdict_view(rl, config), {group: ids}, args.subsets, args.size, s, reference=sft, seed=args.seed)
            found["rates"][f"{group}, {label}"] = r[group]
    mc = 1.96 * math.sqrt(0.05 * 0.95 / args.subsets)
    print(
        f"\n  reference mode, rejection rate at alpha {config.verdict.alpha} on {args.subsets} subsets of {args.size} "
        f"(size on non-members; Monte-Carlo error ±{mc:.3f} at 0.05):"
    )
    for group in ("non-members", "members"):
        alone = found["rates"][f"{group}, with the three"]
        print(
            f"    {group:<12} the run's combination {found['rates'][f'{group}, the run' + chr(39) + 's']['reference/combined']:.3f}; "
            f"with the three {alone['reference/combined']:.3f}; "
            + ", ".join(f"{n} alone {alone.get(f'reference/{n}', math.nan):.3f}" for n in SCORES)
        )
    candidates = {
        "the run's combination + the three": dataclasses.replace(
            default, audited=rl.subset(default.audited.ids), detectors=list(settings.detectors)
        )
    }
    candidates.update(
        {
            f"{n} alone": dataclasses.replace(candidates["the run's combination + the three"], detectors=[n])
            for n in SCORES
        }
    )
    fdr_args = argparse.Namespace(subsets=args.fdr_subsets, size=args.fdr_size, seed=args.seed)
    found["decisions"] = {
        t: decisions(c, members, non_members, fdr_args, config.verdict) for t, c in candidates.items()
    }
    print(f"\n  decisions at q = {config.verdict.fdr} (shares of the first row's):")
    print_table(found["decisions"], next(iter(found["decisions"].values())), fdr_args)
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "rollout_scores.json").write_text(json.dumps(found, indent=1, default=float) + "\n")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--fdr-subsets", type=int, default=100)
    parser.add_argument("--fdr-size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(load_run_config(args.config), args)


if __name__ == "__main__":
    main()
