"""The relative mode's size (issue 56, item 5): when it rejects clean subsets too often, is the
clean set's count to blame, its draw, or the clean set itself?

    python benchmarks/bench_relative_size.py [--config configs/demo-smollm.yaml] [--set KEY=VALUE]
                                             [--detectors ppl,min_k,zlib,recall] [--block 150]
                                             [--subsets 200] [--size 50] [--plant D] [--redeal R]
                                             [--subsets-redeal 50] [--seed 0]

The relative mode (SPEC §8.6) compares each audited question's rank among its matched controls with
a clean set's. Its size is checked as ``bench_testbeds.py`` checks it: random subsets of
``--size`` non-members, each decided against a clean set, the rejection rate at α counted per
detector and combined (Cauchy, as the verdict combines). Here the clean set varies:

* ``first B``: the detectors' clean set of the demo (``detect.clean_ref: B``), the same for every subset;
* ``block i``: each disjoint block of ``B`` clean questions in file order, the same for every subset —
  how much the rate depends on which ``B`` were drawn;
* ``all N``: every clean question;
* ``fresh B``: ``B`` clean questions drawn anew for every subset — the rate over clean draws, which is
  what a two-sample test's size is (its p-value already accounts for the clean set's sampling error);
* ``placebo``: subsets of clean questions (not non-members) against ``B`` of the other clean questions,
  drawn anew — exchangeable by construction, so this row must hold α; a planted fault
  (``--plant D``: D standard deviations added to every audited original's score, as a generator bias
  would) must fail it.

Beside each fixed clean set, the whole non-member pool decided at once against it (its p-value):
where the pool the subsets are drawn from sits. ``--redeal R`` pools the non-members with the clean
questions (on a model that saw neither, exchangeable) and deals them anew ``R`` times into an audited
pool and a clean set of the same sizes: the distribution of the ``first B`` row's rate under
exchangeability (its mean is the test's size; a rate in its upper tail says the clean set is not
drawn like the non-members, a rate inside it that one draw is to blame).

If ``first B`` fails and ``fresh B`` holds, the draw is to blame; if both fail and ``all N`` holds, the
count; if the placebo holds and the non-member rows fail at every count, the clean set is not
drawn like the non-members. Scores ``--detectors`` (those that do not sample: minutes on a CPU) on
every clean question and its ``calibration.controls`` controls with both models of the run (through
its response stores); the audited questions' scores are the run's. Writes
``bench/relative_size.json`` in the run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import numpy as np
from bench_ceiling import run_access, run_models, save
from bench_verdict import ensure_run, scored, verdict_view

from generation.records import read_questions, read_sets
from probes.detectors.on_controls import ControlPlan
from probes.detectors.run import run_detectors
from probes.detectors.selection import build_detectors
from probes.operations.detect import opened_responders
from probes.pipeline import load_run_config
from probes.pipeline.stages import config_model_access
from probes.scorefiles import ControlTable, ScoredSet
from probes.scores import ScoreTable
from probes.verdicts.modes import compute_verdict

ROOT = Path(__file__).resolve().parents[1]


def clean_scored(config, names: list[str], clean, models) -> dict[str, ScoredSet]:
    """Each model's ``names`` scores on the ``clean`` questions and their first
    ``calibration.controls`` controls, through the run's response stores."""
    run_dir, d, c = Path(config.run_dir), config.detect, config.calibration
    detectors = build_detectors(names, d.params, d.sampling_temperature)
    plan = ControlPlan.from_sets(read_sets(run_dir / "sets.jsonl"), c.controls, c.controls, c.controls, names)
    _, _, options = run_access(config, models)
    out = {}
    for name, lazy in models.items():
        access = config_model_access(config, name, lazy)  # each model audited on its own, as the relative mode runs it
        with opened_responders(access, None, options) as (responder, _):
            summary = run_detectors(detectors, clean, responder, controls=plan)
        out[name] = ScoredSet(summary.table, summary.controls)
    return out


def planted(scored_set: ScoredSet, names: list[str], shift: float) -> ScoredSet:
    """``scored_set`` with ``shift`` standard deviations (each detector's, over the originals) added
    to every original's score, not its controls': a bias that lifts an original above its controls,
    as a generator's would."""
    columns = dict(scored_set.scores.columns)
    for n in names:
        columns[n] = columns[n] + shift * np.nanstd(scored_set.original(n))
    table = dataclasses.replace(scored_set.scores, columns=columns)
    return dataclasses.replace(scored_set, scores=table)


@dataclasses.dataclass
class Scheme:
    """How each subset's clean set is chosen: a fixed list of ids, or ``fresh`` of ``pool`` drawn per subset."""

    fixed: list[str] | None = None
    pool: list[str] | None = None
    fresh: int = 0


def rejection_rates(audited: ScoredSet, clean: ScoredSet, ids: list[str], scheme: Scheme, settings, args) -> dict:
    """``{detector or "combined": rate}``: the relative mode on ``--subsets`` random subsets of ``ids``;
    ``"untested"``: per detector, the subsets where it had no p-value (counted out of its rate)."""
    rng = np.random.default_rng(args.seed)
    counts: dict[str, int] = {}
    untested: dict[str, int] = {}
    for _ in range(args.subsets):
        subset = list(rng.choice(ids, size=args.size, replace=False))
        if scheme.fixed is not None:
            reference = scheme.fixed
        else:
            taken = set(subset)
            pool = [i for i in scheme.pool if i not in taken]
            reference = list(rng.choice(pool, size=scheme.fresh, replace=False))
        relative = compute_verdict(audited.subset(subset), None, clean.subset(reference), settings)["modes"]["relative"]
        counts["combined"] = counts.get("combined", 0) + bool(relative["reject"])
        for name, record in relative["detectors"].items():
            if math.isfinite(record["p_value"]):
                counts[name] = counts.get(name, 0) + (record["p_value"] < settings.alpha)
            else:
                untested[name] = untested.get(name, 0) + 1
    rates = {k: v / (args.subsets - untested.get(k, 0)) for k, v in counts.items()}
    return {**rates, "untested": untested}


def whole_pool(audited: ScoredSet, clean: ScoredSet, ids: list[str], scheme: Scheme, settings) -> dict[str, float]:
    """``{detector or "combined": p}``: every one of ``ids`` decided at once against a fixed clean
    set — where the pool the subsets are drawn from sits (``{}`` for a fresh draw)."""
    if scheme.fixed is None:
        return {}
    relative = compute_verdict(audited.subset(ids), None, clean.subset(scheme.fixed), settings)["modes"]["relative"]
    return {"combined": relative["combined"]["p_value"], **{n: r["p_value"] for n, r in relative["detectors"].items()}}


def pooled(first: ScoredSet, second: ScoredSet, names: list[str], width: int) -> ScoredSet:
    """One set holding ``first``'s and ``second``'s questions (ids disjoint): each detector's
    original scores and first ``width`` controls."""
    ids = [*first.ids, *second.ids]
    scores = ScoreTable(ids, {n: np.concatenate([first.original(n), second.original(n)]) for n in names})
    columns = {
        n: np.vstack([first.control_matrix(n, width), second.control_matrix(n, width)]).reshape(-1) for n in names
    }
    index = np.tile(np.arange(1, width + 1), len(ids))
    return ScoredSet(scores, ControlTable([i for i in ids for _ in range(width)], index, columns))


def redealt(pool: ScoredSet, n_audited: int, n_clean: int, settings, args) -> list[float]:
    """The combined rate on ``args.subsets_redeal`` subsets of ``n_audited`` questions against ``n_clean``
    others, the ``pool`` (questions clean to the model, exchangeable) dealt anew ``args.redeal`` times:
    the distribution of the rate given one clean set and one audited pool, under exchangeability."""
    rng = np.random.default_rng(args.seed + 1)
    inner = argparse.Namespace(**{**vars(args), "subsets": args.subsets_redeal})
    found = []
    for r in range(args.redeal):
        order = list(rng.permutation(pool.ids))
        audited_ids, clean_ids = order[:n_audited], order[n_audited : n_audited + n_clean]
        inner.seed = args.seed + 1 + r
        found.append(rejection_rates(pool, pool, audited_ids, Scheme(fixed=clean_ids), settings, inner)["combined"])
    return found


def redealt_line(dealt: list[float], actual: float, n_audited: int, args) -> str:
    """The re-dealt rates' mean with its standard error, quantiles, and how many reach ``actual``."""
    q = np.quantile(dealt, [0.05, 0.5, 0.95])
    return (
        f"re-dealt ({args.redeal}x: {n_audited} audited, {args.block} clean, {args.subsets_redeal} subsets each): "
        f"combined mean {np.mean(dealt):.3f} ± {np.std(dealt, ddof=1) / math.sqrt(len(dealt)):.3f} (s.e.), "
        f"5/50/95 % {q[0]:.3f}/{q[1]:.3f}/{q[2]:.3f}; at or above the actual {actual:.3f}: "
        f"{sum(d >= actual for d in dealt)} of {args.redeal}"
    )


def schemes(clean_ids: list[str], block: int) -> dict[str, Scheme]:
    blocks = [clean_ids[i : i + block] for i in range(0, len(clean_ids) - block + 1, block)]
    out = {f"first {block}": Scheme(fixed=blocks[0])}
    out.update({f"block {i + 1} of {len(blocks)}": Scheme(fixed=b) for i, b in enumerate(blocks) if i})
    out[f"all {len(clean_ids)}"] = Scheme(fixed=clean_ids)
    out[f"fresh {block} per subset"] = Scheme(pool=clean_ids, fresh=block)
    return out


def run(config, args: argparse.Namespace) -> dict:
    run_dir = Path(config.run_dir)
    if not args.stores_only:
        ensure_run(config)
    elif not (run_dir / "sets.jsonl").is_file():
        raise SystemExit(
            f"{run_dir}: no sets.jsonl; run lara run with this config first (its generate stage is enough)"
        )
    questions = read_questions(config.questions)
    non_members = [q.id for q in questions if q.label == 0]
    clean = [q for q in questions if q.split == "clean_ref"]
    clean_ids = [q.id for q in clean]
    models = run_models(config)
    start = time.perf_counter()
    scored_now = [q for q in questions if q.label == 0] if args.stores_only else []
    on_clean = clean_scored(config, args.detectors, scored_now + clean, models)
    seconds = time.perf_counter() - start
    settings = dataclasses.replace(config.verdict, detectors=tuple(args.detectors), permutations=2000, bootstrap=1)
    found: dict = {"detectors": args.detectors, "clean": len(clean_ids), "seconds": seconds, "rates": {}}
    mc = 1.96 * math.sqrt(settings.alpha * (1 - settings.alpha) / args.subsets)
    print(
        f"{Path(config.questions).parent.name}: the relative mode on {args.subsets} subsets of {args.size} "
        f"(rejection rate at alpha {settings.alpha}; Monte-Carlo error ±{mc:.3f}); {', '.join(args.detectors)} "
        f"scored on {len(clean_ids)} clean questions and their controls in {seconds:.0f} s"
    )
    header = "".join(f"{n:>10}" for n in [*args.detectors, "combined"])
    for model in (config.name, config.reference_name()):
        audited = on_clean[model] if args.stores_only else verdict_view(scored(run_dir, model, with_lara=False), config)
        rows, at_once = {}, {}
        for title, scheme in schemes(clean_ids, args.block).items():
            rows[f"non-members vs {title}"] = rejection_rates(
                audited, on_clean[model], non_members, scheme, settings, args
            )
            at_once[f"non-members vs {title}"] = whole_pool(audited, on_clean[model], non_members, scheme, settings)
        placebo = Scheme(pool=clean_ids, fresh=args.block)
        rows[f"placebo: clean vs fresh {args.block}"] = rejection_rates(
            on_clean[model], on_clean[model], clean_ids, placebo, settings, args
        )
        if args.plant:
            rows[f"placebo, planted +{args.plant:g}"] = rejection_rates(
                planted(on_clean[model].subset(clean_ids), args.detectors, args.plant),
                on_clean[model],
                clean_ids,
                placebo,
                settings,
                args,
            )
        found["rates"][model] = rows
        if args.redeal:
            pool = pooled(
                audited.subset(non_members),
                on_clean[model].subset(clean_ids),
                args.detectors,
                config.calibration.controls,
            )
            dealt = redealt(pool, len(non_members), args.block, settings, args)
            actual = rows[f"non-members vs first {args.block}"]["combined"]
            found.setdefault("redealt", {})[model] = {"rates": dealt, "actual": actual}
        found.setdefault("whole_pool_p", {})[model] = at_once
        print(f"\n  {model}: {'subsets vs clean set':<36}{header}   all {len(non_members)} at once: p")
        for title, r in rows.items():
            p = at_once.get(title, {}).get("combined", math.nan)
            print(
                f"  {'':<{len(model) + 2}}{title:<36}"
                + "".join(f"{r.get(n, math.nan):>10.3f}" for n in [*args.detectors, "combined"])
                + (f"   {p:.3f}" if math.isfinite(p) else "")
                + (f"  (no test in {r['untested']} subsets)" if r["untested"] else "")
            )
        if args.redeal:
            print(f"  {'':<{len(model) + 2}}" + redealt_line(dealt, actual, len(non_members), args))
    save(config, "relative_size", found)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo-smollm.yaml")
    parser.add_argument("--set", action="append", default=[], help="a config override, KEY=VALUE (as lara run --set)")
    parser.add_argument("--detectors", type=lambda s: s.split(","), default=["ppl", "min_k", "zlib", "recall"])
    parser.add_argument("--block", type=int, default=150)
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--plant", type=float, default=0.0, help="a planted bias on the placebo's originals")
    parser.add_argument(
        "--redeal", type=int, default=0, help="deal the non-members and clean questions anew this many times"
    )
    parser.add_argument("--subsets-redeal", type=int, default=50, help="subsets per re-dealing")
    parser.add_argument(
        "--stores-only",
        action="store_true",
        help="score the non-members here too, through the response stores, instead of reading a finished run "
        "(needs the run's sets.jsonl only)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(load_run_config(args.config, args.set), args)


if __name__ == "__main__":
    main()
