"""More detectors must not mean a weaker bound: the per-question decisions of a finished run
(reference mode, as ``lara run`` makes them) over several sets of detectors.

    python benchmarks/bench_many_detectors.py [--config configs/demo.yaml] [--set KEY=VALUE ...]
        [--defaults ppl,min_k,zlib,recall,reward_gain] [--noise 5] [--seeds 10] [--subsets 50] [--size 50]
        [--screens none,0.05,0.01]

The run must have scored every detector on its controls (``detect.names: [all]`` with
``calibration.detectors`` unset). The sets of detectors decided on:

* the defaults (``--defaults``), every detector the run's verdict combined (``all``), and all of
  them plus ``--noise`` planted columns of pure noise (an independent normal draw for every text
  and model: a detector that carries no signal at all);
* the best subset: each detector alone, the defaults, all, and a greedy forward selection that
  adds, one at a time, the detector that raises the mean bound most — chosen with the labels
  (an oracle no audit has), as the yardstick a label-free combination should come near.

For each set, over ``--seeds`` decision seeds (the dropped control, the tie-breaks and the
learned score's folds; the figures' Monte-Carlo error is their spread): the questions flagged at
q and the members among them, "at least k" (mean ± s.e.), and the share of all-non-member
subsets of ``--size`` with any flag (``--subsets`` random subsets; at most about q when every
question is clean). Writes ``bench/many_detectors.json`` in the run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import numpy as np
from bench_ceiling import save
from bench_verdict import ensure_run, scored
from subset_decisions import Case, decide_subsets, mix_rates, reference_case

from generation.records import read_questions
from probes.pipeline import load_run_config
from probes.verdicts.modes import ScoredSet, VerdictSettings

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = "ppl,min_k,zlib,recall,reward_gain"


def plant_noise(scored_set: ScoredSet, names: list[str], seed: int) -> ScoredSet:
    """``scored_set`` with one column of standard normal noise per name, on every original and every
    control (a fresh draw per text, seeded by ``seed``)."""
    rng = np.random.default_rng(seed)
    for name in names:
        scored_set.scores.columns[name] = rng.standard_normal(len(scored_set.scores.ids))
        if scored_set.controls is not None:
            scored_set.controls.columns[name] = rng.standard_normal(len(scored_set.controls.ids))
    return scored_set


@dataclasses.dataclass
class Figures:
    """One set of detectors decided over several seeds."""

    detectors: list[str]
    tested: int  # questions with a p-value (the others: too few scored controls)
    flagged: float
    flagged_members: float
    at_least: float
    at_least_se: float
    any_flag_non_members: float = math.nan


def whole(case: Case, ids: list[str], truth: set[str], settings: VerdictSettings, seeds: int) -> Figures:
    """The audited set decided at once under ``seeds`` decision seeds: means (and the bound's s.e.)."""
    flagged, members, bound = [], [], []
    for seed in range(seeds):
        d = case.decide(ids, dataclasses.replace(settings, seed=seed))
        tested = int((~np.isnan(d.p_value)).sum())
        flagged.append(int(d.flagged.sum()))
        members.append(int(sum(f and i in truth for i, f in zip(d.ids, d.flagged))))
        bound.append(d.at_least)
    se = float(np.std(bound, ddof=1) / math.sqrt(seeds)) if seeds > 1 else math.nan
    return Figures(
        list(case.detectors), tested, float(np.mean(flagged)), float(np.mean(members)), float(np.mean(bound)), se
    )


def greedy(case: Case, ids: list[str], truth: set[str], settings: VerdictSettings, seeds: int) -> Figures:
    """Forward selection by the mean bound (labels used: an oracle): start from the best single
    detector, add the one that raises the bound most, stop when none does."""
    pool = list(case.detectors)
    chosen: list[str] = []
    best: Figures | None = None
    while pool:
        tried = {n: whole(dataclasses.replace(case, detectors=chosen + [n]), ids, truth, settings, seeds) for n in pool}
        name, figures = max(tried.items(), key=lambda kv: kv[1].at_least)
        if best is not None and figures.at_least <= best.at_least:
            break
        chosen.append(name)
        pool.remove(name)
        best = figures
    assert best is not None
    return best


def run(config, args: argparse.Namespace) -> dict:
    ensure_run(config)
    run_dir = Path(config.run_dir)
    questions = read_questions(config.questions)
    rl, sft = scored(run_dir, config.name), scored(run_dir, config.reference_name())
    noise = [f"noise_{k}" for k in range(args.noise)]
    plant_noise(rl, noise, args.seed), plant_noise(sft, noise, args.seed + 1)
    everything = reference_case(config, run_dir, questions, rl, sft)
    members = [q.id for q in questions if q.label == 1]
    non_members = [q.id for q in questions if q.label == 0]
    ids, truth = members + non_members, set(members)
    defaults = [n for n in args.defaults.split(",") if n in everything.detectors]
    sets = {
        "defaults": defaults,
        "all": list(everything.detectors),
        f"all + {args.noise} noise": list(everything.detectors) + noise,
    }
    found: dict[str, Figures] = {}
    for screen in args.screens:
        settings = dataclasses.replace(config.verdict, decision_screen=screen)
        for title, names in sets.items():
            case = dataclasses.replace(everything, detectors=names)
            key = f"{title}, screen {screen}"
            found[key] = whole(case, ids, truth, settings, args.seeds)
            subsets = argparse.Namespace(subsets=args.subsets, size=args.size, seed=args.seed)
            rates = mix_rates(decide_subsets(case, members, non_members, 0.0, subsets, settings, truth), settings)
            found[key].any_flag_non_members = rates["any_flag"]
    settings = config.verdict
    singles = {
        n: whole(dataclasses.replace(everything, detectors=[n]), ids, truth, settings, args.seeds)
        for n in everything.detectors
    }
    found["best single (" + max(singles, key=lambda n: singles[n].at_least) + ")"] = max(
        singles.values(), key=lambda f: f.at_least
    )
    chosen = greedy(everything, ids, truth, settings, args.greedy_seeds)
    chosen = whole(dataclasses.replace(everything, detectors=chosen.detectors), ids, truth, settings, args.seeds)
    found["best subset, greedy with labels (" + ", ".join(chosen.detectors) + ")"] = chosen
    print_table(config, found, len(members), len(non_members), args)
    out = {title: dataclasses.asdict(f) for title, f in found.items()}
    save(config, "many_detectors", out)
    return out


def print_table(config, found: dict[str, Figures], n_members: int, n_non: int, args) -> None:
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}): reference-mode "
        f"decisions over sets of detectors, {n_members} members and {n_non} non-members; q = {config.verdict.fdr}, "
        f"{args.seeds} seeds, {args.subsets} non-member subsets of {args.size}"
    )
    print(
        f"  {'detectors':<72} {'flagged (members) of tested':>28} {'at least k (s.e.)':>18} {'any flag, non-members':>22}"
    )
    for title, f in found.items():
        flags = f"{f.flagged:.1f} ({f.flagged_members:.1f}) of {f.tested}"
        bound = f"{f.at_least:.1f} ({f.at_least_se:.1f})"
        anyflag = "–" if math.isnan(f.any_flag_non_members) else f"{f.any_flag_non_members:.3f}"
        print(f"  {title[:72]:<72} {flags:>28} {bound:>18} {anyflag:>22}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--set", action="append", default=[], help="a config override, KEY=VALUE (as lara run --set)")
    parser.add_argument("--defaults", default=DEFAULTS)
    parser.add_argument("--noise", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--greedy-seeds", type=int, default=5, help="seeds per step of the greedy selection")
    parser.add_argument("--subsets", type=int, default=50)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--screens",
        type=lambda text: [None if x == "none" else float(x) for x in text.split(",")],
        default=[None],
        help="the learned score's screen levels to compare (verdict.decision_screen; none: no screen)",
    )
    args = parser.parse_args()
    run(load_run_config(args.config, args.set), args)


if __name__ == "__main__":
    main()
