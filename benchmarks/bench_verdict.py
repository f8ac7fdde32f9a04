"""Size and power of the label-free verdict (SPEC §8.9) on the shipped testbed, by simulation.

    python benchmarks/bench_verdict.py [--run runs/demo] [--subsets 200] [--size 50] [--seed 0]

Uses the scores of a finished ``lara run configs/demo.yaml`` (run first if missing): the RL
checkpoint's and the SFT checkpoint's detector scores on every question and on its matched
controls. Draws random subsets of ``--size`` questions and computes the verdict of each, exactly
as ``lara run`` does, counting rejections at α = 0.05:

* reference mode (RL audited, SFT reference): subsets of non-members (size) and of members (power);
* relative mode (RL, against the ``clean_ref`` problems, drawn like the audited ones): the same;
* absolute mode on the SFT control, whose questions are all clean: its observed rate, with the
  offline generator's similars as they are (``relations: arithmetic``) and as they were before
  (``relations: order``, scored here on the SFT checkpoint with the same detectors).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np

from generation.pipeline import run_generation
from generation.records import read_questions, read_sets
from probes.pipeline import load_run_config, run_pipeline
from probes.scorefiles import read_scored
from probes.scores import ScoreTable, join_tables
from probes.verdicts.controls import control_texts
from probes.verdicts.modes import ScoredSet, VerdictSettings, compute_verdict

ROOT = Path(__file__).resolve().parents[1]


def ensure_run(config) -> None:
    """Run the config's demo where it has not finished (a model without its ``verdict.json``); a
    finished run is read as it is, also one finished on another machine and copied here without its
    activations (``acts.h5``, gigabytes), which ``lara run`` would recompute before anything else."""
    run_dir = Path(config.run_dir)
    if not all((run_dir / name / "verdict.json").is_file() for name, _ in config.models()):
        run_pipeline(config, progress=False)


def scored(run_dir: Path, model: str, with_lara: bool = True) -> ScoredSet:
    """The model's scores with the controls its detect stage bound (and its settings digests), as ``lara run`` reads them."""
    files = read_scored(run_dir / model / "detectors.csv")
    tables = [files.scores]
    if with_lara and (run_dir / model / "lara.csv").is_file():
        tables.append(ScoreTable.read_csv(run_dir / model / "lara.csv"))
    return ScoredSet(join_tables(tables), files.controls, settings=files.settings, prompt_format=files.prompt_format)


def verdict_view(scored_set: ScoredSet, config) -> ScoredSet:
    """The scores as ``lara run``'s verdict reads them: each question's first ``calibration.controls``
    controls (the decisions' further ones are not the verdict's)."""
    c = config.calibration
    return scored_set.limited(c.controls if c.most > c.controls else None)


def rates(
    audited: ScoredSet,
    groups: dict[str, list[str]],
    draws: int,
    size: int,
    settings: VerdictSettings,
    reference: ScoredSet | None = None,
    clean: ScoredSet | None = None,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """``{group: {mode/detector or mode/combined: rejection rate}}`` over random subsets."""
    rng = np.random.default_rng(seed)
    out = {}
    for group, ids in groups.items():
        counts: dict[str, int] = {}
        for _ in range(draws):
            subset = list(rng.choice(ids, size=size, replace=False))
            verdict = compute_verdict(audited.subset(subset), reference, clean, settings)
            for mode, result in verdict["modes"].items():
                counts[f"{mode}/combined"] = counts.get(f"{mode}/combined", 0) + result["reject"]
                for name, r in result["detectors"].items():
                    if math.isfinite(
                        r["p_value"]
                    ):  # a detector the mode left out (no information, not calibrated): no test
                        counts[f"{mode}/{name}"] = counts.get(f"{mode}/{name}", 0) + (r["p_value"] < settings.alpha)
        out[group] = {k: v / draws for k, v in counts.items()}
    return out


def sft_on_controls_drawn_now(run_dir: Path, config, questions, detectors: list[str], relations: str) -> ScoredSet:
    """The SFT control's scores on controls drawn by this checkout's offline generator with
    ``relations`` (``order``: the previous algorithm's order-only similars)."""
    from cache.loading import load_model
    from probes.detectors.on_controls import ControlPlan
    from probes.detectors.run import run_detectors
    from probes.responders.local import LocalResponder, PromptFormat
    from probes.responders.store import CachedResponder, ResponseStore

    generation = dataclasses.replace(
        config.generation, offline=dataclasses.replace(config.generation.offline, relations=relations)
    )
    sets_path = run_dir / "bench" / f"sets.{relations}.jsonl"
    sets_path.parent.mkdir(parents=True, exist_ok=True)
    run_generation(questions, sets_path, generation, overwrite=True)
    controls = control_texts(read_sets(sets_path), config.calibration.controls)
    name, source = next((c.name, c.source) for c in config.controls if c.reference)
    d = config.detect
    loaded = load_model(dataclasses.replace(config.model, source=source))
    responder = CachedResponder(
        LocalResponder(loaded, PromptFormat(mode=d.prompt_format, template=d.template), batch_size=d.batch_size),
        ResponseStore(run_dir / name / "responses.sqlite"),
    )
    summary = run_detectors(
        detectors,
        questions,
        responder,
        params=d.params,
        sampling_temperature=d.sampling_temperature,
        controls=ControlPlan(controls),
    )
    return ScoredSet(summary.table, summary.controls)


def print_rates(table: dict[str, dict[str, float]]) -> None:
    """One row per mode/detector, one column per group; "left out" where a group has no test."""
    keys = sorted(
        {k for g in table.values() for k in g}, key=lambda k: (k.split("/")[0], k.split("/")[1] != "combined", k)
    )
    print(f"  {'mode/detector':<32}" + "".join(f"{g:>14}" for g in table))
    for key in keys:
        print(
            f"  {key:<32}"
            + "".join(f"{table[g][key]:>14.3f}" if key in table[g] else f"{'left out':>14}" for g in table)
        )


def absolute_now(run_dir: Path, config, questions, groups: dict[str, list[str]], args) -> None:
    """``--absolute-now``: the SFT control's absolute-mode rejection rates on controls drawn now."""
    from probes.detectors import REGISTRY

    start = time.perf_counter()
    sft = verdict_view(scored(run_dir, config.reference_name()), config)
    detectors = [n for n in sft.controls.columns if not REGISTRY[n].requires_reference]
    now = sft_on_controls_drawn_now(run_dir, config, questions, detectors, config.generation.offline.relations)
    settings = dataclasses.replace(config.verdict, permutations=2000, bootstrap=1)
    table = rates(now, groups, args.subsets, args.size, settings, seed=args.seed)
    print(
        f"SFT control, absolute mode, controls drawn now ({config.generation.offline.relations}): {args.subsets} random "
        f"subsets of {args.size}, rejection rate at alpha = {settings.alpha} ({time.perf_counter() - start:.0f} s)"
    )
    print_rates(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--run", type=Path, help="run directory (default: the config's)")
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-before",
        action="store_true",
        help="leave out the SFT control's absolute mode on similars drawn as before (order only; scored here)",
    )
    parser.add_argument(
        "--absolute-now",
        action="store_true",
        help="only the SFT control's absolute mode, on controls drawn now by this checkout's generator and "
        "scored here (the run's own scores need not be current: a generator change is measured "
        "without rerunning the demo)",
    )
    args = parser.parse_args()
    config = load_run_config(args.config, [f"run_dir={args.run}"] if args.run else [])
    run_dir = Path(config.run_dir)
    start = time.perf_counter()
    questions = read_questions(config.questions)
    groups = {
        "non-members": [q.id for q in questions if q.label == 0],
        "members": [q.id for q in questions if q.label == 1],
    }
    if args.absolute_now:
        absolute_now(run_dir, config, questions, groups, args)
        return
    ensure_run(config)
    audited_name, reference_name = config.name, config.reference_name()
    rl, sft = (verdict_view(scored(run_dir, name), config) for name in (audited_name, reference_name))
    scored_ids = set(rl.scores.ids)  # detect.clean_ref: the detectors may score fewer clean questions than LaRA
    clean_ids = [q.id for q in questions if q.split == "clean_ref" and q.id in scored_ids]
    settings = dataclasses.replace(config.verdict, permutations=2000, bootstrap=1)
    found = {
        "RL, reference and relative modes": rates(
            rl, groups, args.subsets, args.size, settings, reference=sft, clean=rl.subset(clean_ids), seed=args.seed
        ),
        "SFT control, absolute mode, similars as generated now (arithmetic relations)": rates(
            sft, groups, args.subsets, args.size, dataclasses.replace(settings, detectors=None), seed=args.seed
        ),
    }
    from probes.detectors import REGISTRY

    # the SFT checkpoint is its own reference: drift and reward gain are 0 there, so they are not rescored
    detectors = [] if args.no_before else [n for n in sft.controls.columns if not REGISTRY[n].requires_reference]
    if detectors:
        before = sft_on_controls_drawn_now(run_dir, config, questions, detectors, "order")
        found["SFT control, absolute mode, similars as generated before (order only)"] = rates(
            before, groups, args.subsets, args.size, settings, seed=args.seed
        )
    print(
        f"Verdict rejection rates at alpha = {settings.alpha}: {args.subsets} random subsets of {args.size} questions, "
        f"{settings.permutations} permutations each ({time.perf_counter() - start:.0f} s)"
    )
    for title, table in found.items():
        print(f"\n{title}")
        print_rates(table)
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "verdict_rates.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
