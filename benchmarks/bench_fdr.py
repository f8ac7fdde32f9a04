"""False-discovery rate and power of the per-question decisions (SPEC §8.10) on the shipped
testbed, by simulation.

    python benchmarks/bench_fdr.py [--run runs/demo] [--subsets 200] [--size 60] [--fdr 0.10] [--seed 0]

Uses the scores of a finished ``lara run configs/demo.yaml`` (run first if missing). Draws random
subsets of ``--size`` questions with 0, 10, 50 and 100 % members and decides each subset's
questions exactly as ``lara run`` does — conformal p-values per question and detector in the
deciding mode, Cauchy-combined, Benjamini–Hochberg at ``--fdr`` — over the detectors each model's own
verdict combined in that mode. Reports, per mix, the realised false-discovery proportion averaged over the
subsets (non-members flagged / flagged, 0 when nothing is) with its Monte-Carlo standard error,
the power (members flagged / members) and the share of subsets with any flag:

* the RL checkpoint in the reference mode (the SFT checkpoint as reference) and in the relative
  mode (against the ``clean_ref`` problems);
* the SFT checkpoint (before RL: every flag is false), in the relative mode and, uncalibrated, in
  the absolute mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np

from generation.records import read_questions
from probes.calibration.decisions import decide_questions
from probes.calibration.verdict import ScoredSet
from probes.pipeline import load_run_config, run_pipeline

from bench_verdict import scored  # the scores and controls as lara run reads them

ROOT = Path(__file__).resolve().parents[1]
MIXES = (0.0, 0.1, 0.5, 1.0)


def combined(model_dir: Path, modes: tuple[str, ...], only: str | None) -> list[list[str]]:
    """The detectors each mode of the model's own verdict combined (a detector with no information
    on that model, e.g. its drift from itself, was left out there and stays out), optionally cut to
    the comma-separated ``only``."""
    verdict = json.loads((model_dir / "verdict.json").read_text())
    chosen = {d.strip() for d in only.split(",")} if only else None
    lists = []
    for mode in modes:
        names = (verdict["modes"].get(mode) or {}).get("combined", {}).get("detectors") or []
        lists.append([n for n in names if chosen is None or n in chosen])
    return lists


def rates(audited: ScoredSet, mode: str, detectors: list[str], members: list[str], non_members: list[str], args: argparse.Namespace,
          settings, reference: ScoredSet | None = None, clean: ScoredSet | None = None) -> dict[str, dict[str, float]]:
    """Per mix: mean false-discovery proportion (± its standard error), power, share with any flag."""
    rng = np.random.default_rng(args.seed)
    verdict = {"mode": mode, "combined": {"detectors": detectors}}
    out = {}
    for mix in MIXES:
        n_members = round(args.size * mix)
        fdp, power, any_flag = [], [], 0
        for _ in range(args.subsets):
            ids = list(rng.choice(members, n_members, replace=False)) + list(rng.choice(non_members, args.size - n_members, replace=False))
            decisions = decide_questions(verdict, audited.subset(ids), reference, clean, settings)
            flagged = {i for i, f in zip(decisions.ids, decisions.flagged) if f}
            false = len(flagged - set(members))
            fdp.append(false / len(flagged) if flagged else 0.0)
            if n_members:
                power.append(len(flagged & set(members)) / n_members)
            any_flag += bool(flagged)
        out[f"{100 * mix:g}% members"] = {"fdr": float(np.mean(fdp)), "fdr_se": float(np.std(fdp, ddof=1) / math.sqrt(len(fdp))),
                                          "power": float(np.mean(power)) if power else math.nan, "any_flag": any_flag / args.subsets}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--run", type=Path, help="run directory (default: the config's)")
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--fdr", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--detectors", help="combine these detectors (comma-separated; default: those the run's verdict combined)")
    args = parser.parse_args()
    config = load_run_config(args.config, [f"run_dir={args.run}"] if args.run else [])
    run_dir = Path(config.run_dir)
    start = time.perf_counter()
    if not (run_dir / config.name / "verdict.json").is_file():
        run_pipeline(config, progress=False)
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    clean_ids = [q.id for q in questions if q.split == "clean_ref"]
    rl, sft = scored(run_dir, config.name), scored(run_dir, config.reference_name())
    settings = dataclasses.replace(config.verdict, fdr=args.fdr)
    with_controls, relative = combined(run_dir / config.name, ("reference", "relative"), args.detectors)
    sft_absolute, sft_relative = combined(run_dir / config.reference_name(), ("absolute", "relative"), args.detectors)
    found = {
        "RL checkpoint, reference mode (SFT reference)": rates(rl, "reference", with_controls, members, non_members, args, settings,
                                                               reference=sft, clean=rl.subset(clean_ids)),
        "RL checkpoint, relative mode (clean_ref problems)": rates(rl, "relative", relative, members, non_members, args, settings,
                                                                   clean=rl.subset(clean_ids)),
        "SFT checkpoint (before RL), relative mode": rates(sft, "relative", sft_relative, members, non_members, args, settings,
                                                           clean=sft.subset(clean_ids)),
        "SFT checkpoint (before RL), absolute mode (uncalibrated)": rates(sft, "absolute", sft_absolute, members, non_members, args,
                                                                          settings),
    }
    print(f"Per-question decisions at FDR q = {args.fdr}: {args.subsets} random subsets of {args.size} questions per mix "
          f"({time.perf_counter() - start:.0f} s); detectors: {', '.join(with_controls)} (reference; with lara and reward gain "
          "against the clean_ref problems, as lara run decides), "
          f"{', '.join(relative)} (relative); on the SFT checkpoint {', '.join(sft_absolute)} (absolute), "
          f"{', '.join(sft_relative)} (relative)")
    for title, table in found.items():
        print(f"\n{title}")
        print(f"  {'mix':<14}{'realised FDR':>18}{'power':>9}{'any flag':>10}")
        for mix, r in table.items():
            print(f"  {mix:<14}{r['fdr']:>11.3f} ± {r['fdr_se']:.3f}{r['power']:>9.3f}{r['any_flag']:>10.3f}")
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "fdr_rates.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
