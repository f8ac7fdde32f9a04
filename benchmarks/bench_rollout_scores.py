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
  the run's combination, with ``gold_shift`` added, and with the three scores in it;
* the decisions on the whole audited set (flagged, members among them, "at least k") and the share
  of members named in all-member subsets of ``--fdr-size``: the run's combination, with
  ``gold_shift`` added, with the three scores, and each score alone (shares of the run's own).

Writes ``bench/rollout_scores.json`` in the run directory.

``--questions-only [--per-label N]`` needs no run (the real-model testbed's is a working day on 2
CPU cores): reward gain and the three on the labelled questions alone (the first N members and N
non-members), through ``probes.detect`` with the config's models and detect settings, the
samples kept in ``bench/rollout-responses.sqlite`` in the run directory (resumable). Without
controls there is no verdict: it prints the AUCs only.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import numpy as np
from bench_ceiling import decisions, print_table, run_params, save, score_on_run
from bench_verdict import ensure_run, rates, scored, verdict_view
from subset_decisions import reference_case

from generation.records import read_questions
from probes.detectors import get_detector
from probes.evaluation import evaluate
from probes.pipeline import load_run_config
from probes.report.verdict_text import left_out_text
from probes.verdicts.modes import compute_verdict

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


RUN, WITH_GOLD, WITH_THREE = (
    "the run's combination",
    "the run's combination + gold_shift",
    "the run's combination + the three",
)


def combinations(by_run: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The run's combination alone, with ``gold_shift`` added (the one of the three that held its
    size on the real-model testbed), and with the three."""
    return {RUN: by_run, WITH_GOLD: (*by_run, "gold_shift"), WITH_THREE: (*by_run, *SCORES)}


def print_rates(found: dict, config, args: argparse.Namespace) -> None:
    """The reference mode's rejection rates on non-member (size) and member (power) subsets."""
    mc = 1.96 * math.sqrt(0.05 * 0.95 / args.subsets)
    print(
        f"\n  reference mode, rejection rate at alpha {config.verdict.alpha} on {args.subsets} subsets of {args.size} "
        f"(size on non-members; Monte-Carlo error ±{mc:.3f} at 0.05):"
    )
    for group in ("non-members", "members"):
        alone = found[f"{group}, {WITH_THREE}"]
        print(
            f"    {group:<12} the run's combination {found[f'{group}, {RUN}']['reference/combined']:.3f}; "
            f"with gold_shift {found[f'{group}, {WITH_GOLD}']['reference/combined']:.3f}; "
            f"with the three {alone['reference/combined']:.3f}; "
            + ", ".join(f"{n} alone {alone.get(f'reference/{n}', math.nan):.3f}" for n in SCORES)
        )


def questions_only(config, args: argparse.Namespace) -> dict:
    """AUC of reward gain and the three on the labelled questions alone, without a run (no controls)."""
    import probes

    labelled = [q for q in read_questions(config.questions) if q.label in (0, 1)]
    if args.per_label:
        labelled = [q for q in labelled if q.label == 1][: args.per_label] + [q for q in labelled if q.label == 0][
            : args.per_label
        ]
    models, d = dict(config.models()), config.detect
    gain = run_params(config, "reward_gain")
    sampling = {k: v for k, v in gain.items() if k in SAMPLING}
    out = Path(config.run_dir) / "bench"
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    detection = probes.detect(
        probes.load_model(models[config.name].source, device=config.model.device, dtype=config.model.dtype),
        labelled,
        ["reward_gain", *SCORES],
        reference=probes.load_model(
            models[config.reference_name()].source, device=config.model.device, dtype=config.model.dtype
        ),
        params={"reward_gain": gain, **{n: sampling for n in SCORES}},
        store=out / "rollout-responses.sqlite",
        prompt_format=d.prompt_format,
        template=d.template,
        system_prompt=d.system_prompt,
        batch_size=d.batch_size,
        sampling_temperature=d.sampling_temperature,
    )
    seconds = time.perf_counter() - start
    labels = np.array([q.label for q in labelled])
    found: dict = {"sampling": sampling, "n": len(labelled), "seconds": seconds, "auc": {}}
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}), questions only: "
        f"{int(labels.sum())} members, {int((1 - labels).sum())} non-members, reward gain's samples "
        f"({', '.join(f'{k} {v}' for k, v in sampling.items())}); {seconds:.0f} s"
    )
    for name in ("reward_gain", *SCORES):
        figures = evaluate(
            labels, detection.scores[name].reindex([q.id for q in labelled]).to_numpy(float), seed=args.seed
        )
        found["auc"][name] = {**figures["auc"], "n_nonfinite": figures["n_nonfinite"]}
        print(f"  {name:<14} AUC on RL {cell(figures['auc'])}  ({figures['n_nonfinite']} left out: no score)")
    save(config, "rollout_scores_questions", found)
    return found


def run(config, args: argparse.Namespace) -> dict:
    if args.questions_only:
        return questions_only(config, args)
    ensure_run(config)
    run_dir = Path(config.run_dir)
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    audited = [q for q in questions if q.split != "clean_ref"]
    sampling = {k: v for k, v in run_params(config, "reward_gain").items() if k in SAMPLING}
    summary = score_on_run(config, [get_detector(name, **sampling) for name in SCORES], audited)
    rl, sft = joined(scored(run_dir, config.name), summary, SCORES), scored(run_dir, config.reference_name())
    case = reference_case(config, run_dir, questions, rl, sft)  # the run's combination, the three joined in
    combined = combinations(tuple(case.detectors))
    rl_view, sft_view = verdict_view(rl, config), verdict_view(sft, config)
    settings = dataclasses.replace(config.verdict, detectors=combined[WITH_THREE])
    whole = compute_verdict(rl_view.subset(case.audited.ids), sft_view, None, settings)
    truth = set(members)
    labels = np.array([1 if i in truth else 0 for i in case.audited.ids])
    found: dict = {"sampling": sampling, "auc": {}, "verdict": {}, "rates": {}}
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}), the rollouts of reward gain "
        f"({', '.join(f'{k} {v}' for k, v in sampling.items())}); {len(members)} members, {len(non_members)} non-members"
    )
    print(
        f"  {'score':<14} {'AUC on RL [95% CI]':<22} {'left out':>8}  {'AUC on the reference':<24} "
        f"{'within-AUC (reference mode)':<28} {'p':>6}  left out"
    )
    for name in SCORES:
        figures = evaluate(labels, case.audited.original(name), seed=args.seed)
        record = whole["modes"]["reference"]["detectors"][name]
        found["auc"][name] = {**figures["auc"], "n_nonfinite": figures["n_nonfinite"]}
        found["verdict"][name] = {k: record[k] for k in ("within_auc", "p_value", "left_out")}
        print(
            f"  {name:<14} {cell(figures['auc']):<22} {figures['n_nonfinite']:>8}  {'n/a (its own reference)':<24} "
            f"{cell(record['within_auc']):<28} {record['p_value']:>6.4f}  {left_out_text(record)}"
        )
    for group, ids in (("non-members", non_members), ("members", members)):
        for title, names in combined.items():
            s = dataclasses.replace(settings, detectors=names, permutations=2000, bootstrap=1)
            r = rates(rl_view, {group: ids}, args.subsets, args.size, s, reference=sft_view, seed=args.seed)
            found["rates"][f"{group}, {title}"] = r[group]
    print_rates(found["rates"], config, args)
    candidates = {title: dataclasses.replace(case, detectors=list(names)) for title, names in combined.items()}
    candidates.update({f"{n} alone": dataclasses.replace(case, detectors=[n]) for n in SCORES})
    fdr_args = argparse.Namespace(subsets=args.fdr_subsets, size=args.fdr_size, seed=args.seed)
    found["decisions"] = {
        t: decisions(c, members, non_members, fdr_args, config.verdict) for t, c in candidates.items()
    }
    print(f"\n  decisions at q = {config.verdict.fdr} (shares of the first row's):")
    print_table(found["decisions"], next(iter(found["decisions"].values())), fdr_args)
    save(config, "rollout_scores", found)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--fdr-subsets", type=int, default=100)
    parser.add_argument("--fdr-size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="a config override, KEY=VALUE (as lara run --set)")
    parser.add_argument("--questions-only", action="store_true", help="the labelled questions alone, no run (AUCs)")
    parser.add_argument("--per-label", type=int, default=None, help="with --questions-only: the first N of each label")
    args = parser.parse_args()
    run(load_run_config(args.config, args.set), args)


if __name__ == "__main__":
    main()
