"""The ceiling of evidence drawn from how RL changed the answers (SPEC §10), beside every decision.

    python benchmarks/bench_ceiling.py [--config configs/demo.yaml] [--n-oracle 64] [--per-label N]
                                       [--subsets 100] [--size 60] [--seed 0] [--oracle-only]

The oracle score of a question is its exact reward gain: the audited model's pass rate minus the
reference's, each from ``--n-oracle`` samples at the run's sampling temperature, its matched
controls (the verdict's first ``calibration.controls``, those with a re-solved answer) scored the
same way. It goes through the run's own p-values, FDR procedure and closed test (reference mode,
its own difference); labels only report. Printed beside it, decided the same way on the same
questions: the run's default decisions (every detector its verdict combined), and each of those
detectors alone (reward gain with the run's samples; a reference score on rollouts, SPEC §10,
where the run has it) — each as a share of the ceiling's

* flagged at q (of them members) and "at least k" on the whole audited set, decided at once;
* members named in all-member subsets of ``--size`` (power) and the share of all-non-member
  subsets with any flag (should be ≤ q), ``--subsets`` random subsets each;
* the oracle's own per-question evidence: the AUC of the exact gain, members against non-members
  (Mann–Whitney, bootstrap CI), and the pass rates before and after RL.

The run's response store serves the first samples (sample j of a prompt never depends on how many
are drawn), so the oracle adds the rest. ``--per-label N`` scores the first N members and N
non-members only (a CPU subset: on a real model 64 samples of 300 questions and 900 controls are
GPU minutes, CPU hours). ``--oracle-only`` decides the ceiling alone, from a run directory holding
only its ``sets.jsonl`` (no finished run). Writes ``bench/ceiling.json`` in the run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_verdict import ensure_run, scored
from subset_decisions import Case, decide_subsets, mix_rates, reference_case  # the decisions as lara run makes them

from generation.records import read_questions, read_sets
from probes.detectors import get_detector
from probes.detectors.on_controls import ControlPlan
from probes.detectors.run import run_detectors
from probes.evaluation import evaluate
from probes.operations.detect import DetectOptions, ModelAccess, opened_responders
from probes.pipeline import load_run_config
from probes.pipeline.run_state import LazyModel
from probes.pipeline.stages import config_model_access, prompt_format
from probes.verdicts.modes import ScoredSet

ROOT = Path(__file__).resolve().parents[1]
ROLLOUT_SCORES = ("shift_vote", "answer_shift", "gold_shift")


def run_models(config) -> dict[str, LazyModel]:
    """The audited model and the reference, each loaded once, on first use."""
    models = dict(config.models())
    return {name: LazyModel(models[name]) for name in (config.name, config.reference_name())}


def run_access(config, models: dict[str, LazyModel]) -> tuple[ModelAccess, ModelAccess, DetectOptions]:
    """The audited model and the reference as the run's detectors reach them (the audited one's
    engine and endpoint, the reference on hf: so the samples the run stored are the ones found),
    and how the run puts questions to them."""
    reference = config.reference_name()
    d = config.detect
    return (
        config_model_access(config, config.name, models[config.name]),
        config_model_access(config, reference, models[reference], reference=True),
        DetectOptions(prompt_format(config), batch_size=d.batch_size, decoding=d.decoding),
    )


def score_on_run(config, detectors: list, questions, models: dict[str, LazyModel] | None = None) -> Any:
    """``detectors`` on ``questions`` and their sampling controls (the verdict's first
    ``calibration.controls``) through the run's models (``models``: loaded once by the caller) and
    response stores: the audited model against the reference (:class:`probes.detectors.run.DetectSummary`);
    an engine opened for it (vLLM's) closed on leaving."""
    c = config.calibration
    names = [detector.name for detector in detectors]
    plan = ControlPlan.from_sets(
        read_sets(Path(config.run_dir) / "sets.jsonl"), c.controls, c.controls, c.controls, names
    )
    audited, reference, options = run_access(config, models or run_models(config))
    with opened_responders(audited, reference, options) as (responder, sft):
        return run_detectors(detectors, questions, responder, reference=sft, controls=plan)


def save(config, name: str, found: dict) -> None:
    """``bench/<name>.json`` in the run directory."""
    out = Path(config.run_dir) / "bench"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(found, indent=1, default=float) + "\n")


def run_params(config, name: str, **changes: Any) -> dict[str, Any]:
    """Detector ``name``'s parameters as the run sets them (its sampling temperature included)."""
    params = {**config.detect.params.get(name, {}), **changes}
    if "temperature" not in params and config.detect.sampling_temperature is not None:
        params["temperature"] = config.detect.sampling_temperature
    return params


def oracle_scores(config, questions, n_oracle: int) -> tuple[ScoredSet, dict[str, np.ndarray]]:
    """The exact reward gain of each question and of its sampling controls, through the run's stores;
    and the two models' pass rates per question."""
    detector = get_detector("reward_gain", **run_params(config, "reward_gain", n=n_oracle))
    summary = score_on_run(config, [detector], questions)
    rates = {k: summary.raw.columns[f"reward_gain_reward_{k}"] for k in ("audited", "reference")}
    return ScoredSet(summary.table, summary.controls), rates


def decisions(case: Case, members: list[str], non_members: list[str], args, settings) -> dict[str, float]:
    """The whole audited set decided at once, and the all-member / all-non-member subsets."""
    whole = case.decide(members + non_members, settings)
    truth = set(members)
    out = {
        "flagged": int(whole.flagged.sum()),
        "flagged_members": int(sum(f and i in truth for i, f in zip(whole.ids, whole.flagged))),
        "at_least": int(whole.at_least),
        "tested": int((~np.isnan(whole.p_value)).sum()),
    }
    for mix, key in ((1.0, "members_named"), (0.0, "any_flag_non_members")):
        decided = decide_subsets(case, members, non_members, mix, args, settings, truth)
        rates = mix_rates(decided, settings)
        out[key] = rates["power"] if mix == 1.0 else rates["any_flag"]
    return out


def share(value: float, ceiling: float) -> str:
    return f"{100 * value / ceiling:5.0f} %" if ceiling > 0 else "    – "


def print_table(rows: dict[str, dict[str, float]], ceiling: dict[str, float], args) -> None:
    print(
        f"  {'decided on':<44} {'flagged (members) of tested':>27} {'at least k':>10} {'share':>7}  "
        f"{'members named, subsets of ' + str(args.size):>30} {'share':>7}  {'any flag, non-members':>21}"
    )
    for title, r in rows.items():  # "of tested": questions without a p-value (NaN, too few controls) are counted out
        print(
            f"  {title:<44} {r['flagged']:>9} ({r['flagged_members']:>4}) of {r['tested']:>4}      "
            f"{r['at_least']:>10} {share(r['at_least'], ceiling['at_least']):>7}  "
            f"{r['members_named']:>30.3f} {share(r['members_named'], ceiling['members_named']):>7}  {r['any_flag_non_members']:>21.3f}"
        )


def run_cases(config, questions) -> dict[str, Case]:
    """The run's default decisions (reference mode), and each detector they combine alone."""
    run_dir = Path(config.run_dir)
    rl, sft = scored(run_dir, config.name), scored(run_dir, config.reference_name())
    default = reference_case(config, run_dir, questions, rl, sft)
    cases = {"the run's defaults (" + ", ".join(default.detectors) + ")": default}
    for name in dict.fromkeys([*default.detectors, *ROLLOUT_SCORES]):  # every detector the run combined, alone
        if name in default.audited.scores.columns:
            runs = config.detect.params.get(name, {}).get("n")
            label = f"{name} alone" + (f" ({runs} samples)" if runs else "")
            cases[label] = dataclasses.replace(default, detectors=[name])
    return cases


def run(config, args: argparse.Namespace) -> dict:
    if not args.oracle_only:
        ensure_run(config)
    questions = read_questions(config.questions)
    members = [q.id for q in questions if q.label == 1][: args.per_label]
    non_members = [q.id for q in questions if q.label == 0][: args.per_label]
    chosen = set(members + non_members)
    start = time.perf_counter()
    oracle, rates = oracle_scores(config, [q for q in questions if q.id in chosen], args.n_oracle)
    seconds = time.perf_counter() - start
    settings = config.verdict
    candidates = {
        f"ceiling: exact reward gain, {args.n_oracle} samples": Case("oracle", oracle, "reference", ["reward_gain"])
    }
    if not args.oracle_only:
        candidates.update(run_cases(config, questions))
    found = {title: decisions(case, members, non_members, args, settings) for title, case in candidates.items()}
    ceiling = next(iter(found.values()))
    gain = oracle.scores.columns["reward_gain"]
    truth = set(members)
    labels = np.array([1 if i in truth else 0 for i in oracle.scores.ids])
    finite = ~np.isnan(gain)
    auc = evaluate(labels, gain, seed=args.seed)["auc"]
    passes = {
        f"{who} {model}": float(np.nanmean(rates[model][labels == (who == "members")]))
        for who in ("members", "non-members")
        for model in ("reference", "audited")
    }
    print(
        f"\n{config.name} vs {config.reference_name()} ({Path(config.questions).parent.name}): {len(members)} members, "
        f"{len(non_members)} non-members; the oracle drew {args.n_oracle} samples a model in {seconds:.0f} s"
    )
    print(
        "  pass rates (reference -> audited): members "
        f"{100 * passes['members reference']:.1f} -> {100 * passes['members audited']:.1f} %, non-members "
        f"{100 * passes['non-members reference']:.1f} -> {100 * passes['non-members audited']:.1f} %; exact gain AUC "
        f"{auc['value']:.3f} [{auc['ci'][0]:.3f}, {auc['ci'][1]:.3f}] ({int((~finite).sum())} without an answer left out)"
    )
    print(f"  decided at q = {settings.fdr} ({settings.fdr_method}), {args.subsets} subsets of {args.size}:")
    print_table(found, ceiling, args)
    out = {"n_oracle": args.n_oracle, "seconds": seconds, "pass_rates": passes, "oracle_auc": auc, "decisions": found}
    save(config, "ceiling", out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--n-oracle", type=int, default=64)
    parser.add_argument("--per-label", type=int, default=None, help="the first N members and N non-members only")
    parser.add_argument("--subsets", type=int, default=100)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--oracle-only",
        action="store_true",
        help="the ceiling alone: no finished run needed, only its sets.jsonl (the run's decisions are not read)",
    )
    parser.add_argument("--set", action="append", default=[], help="a config override, KEY=VALUE (as lara run --set)")
    args = parser.parse_args()
    run(load_run_config(args.config, args.set), args)


if __name__ == "__main__":
    main()
