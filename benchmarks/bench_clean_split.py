"""Is the relative mode's rate on non-members a property of the one clean set drawn? (issue 24)

    python benchmarks/bench_clean_split.py [--config configs/demo-gsm.yaml] [--run DIR] [--resplits 30] [--subsets 50]

The relative mode tests the audited questions against one clean set. Its rejection rate over
random subsets of the non-members, with that clean set fixed, is a rate *given* the clean set:
every subset shares the clean set's own sampling error. On a model that never saw either, the
non-members and the clean set are exchangeable, so pooling them and dealing them again into a
clean set and audited questions of the same sizes gives the distribution of that conditional rate
under exchangeability (its mean is the test's size). This prints, per checkpoint of a finished run
(``lara run CONFIG`` first): the rate with the actual clean set, the re-dealt rates' mean and
quantiles, and how many re-dealings reach the actual rate. An actual rate far in the upper tail
says the clean set differs from the non-members systematically, not by the luck of one draw.
Where the questions name their template (``extra.template``), it also prints, per detector, the
non-members' minus the clean set's mean within-statistic (original minus its controls' median),
template by template: a shift that RL applied to one split shows as a consistent sign.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from bench_verdict import rates, scored, verdict_view

from generation.records import read_questions
from probes.pipeline import load_run_config

ROOT = Path(__file__).resolve().parents[1]


def relative_rates(
    model, audited_ids: list[str], clean_ids: list[str], subsets: int, size: int, settings, seed: int
) -> dict[str, float]:
    """``{detector or combined: relative-mode rejection rate}`` over random subsets of ``audited_ids``."""
    found = rates(model, {"audited": audited_ids}, subsets, size, settings, clean=model.subset(clean_ids), seed=seed)[
        "audited"
    ]
    return {k.split("/", 1)[1]: v for k, v in found.items() if k.startswith("relative/")}


def per_template(model, questions, names: list[str]) -> None:
    """Per detector: the template-wise gap non-members − clean set in the within-statistic, its mean
    ± standard error over the templates that have both, and the share of templates where it is > 0."""
    split = {q.id: (q.split, q.extra.get("extra", q.extra).get("template")) for q in questions}
    for name in names:
        within = np.asarray(model.original(name)) - np.nanmedian(np.asarray(model.control_matrix(name)), axis=1)
        groups: dict[tuple, list[float]] = {}
        left_out = 0  # non-member and clean questions with no template or a non-finite within-statistic
        for qid, value in zip(model.scores.ids, within):
            kind, template = split[qid]
            if template is not None and np.isfinite(value):
                groups.setdefault((template, kind), []).append(float(value))
            elif kind in ("non_member", "clean_ref"):
                left_out += 1
        templates = {t for t, _ in groups}
        gaps = np.array(
            [
                np.mean(groups[(t, "non_member")]) - np.mean(groups[(t, "clean_ref")])
                for t in sorted(templates)
                if (t, "non_member") in groups and (t, "clean_ref") in groups
            ]
        )
        if len(gaps) > 1:
            print(
                f"  {name:<16}non-members − clean, per template: {gaps.mean():+.4f} ± {gaps.std(ddof=1) / np.sqrt(len(gaps)):.4f} "
                f"(SE; {len(gaps)} templates), > 0 in {np.mean(gaps > 0):.0%}; left out: {left_out} questions, "
                f"{len(templates) - len(gaps)} templates missing a split"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo-gsm.yaml")
    parser.add_argument("--run", type=Path, help="run directory (default: the config's)")
    parser.add_argument("--resplits", type=int, default=30)
    parser.add_argument("--subsets", type=int, default=50)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = load_run_config(args.config, [f"run_dir={args.run}"] if args.run else [])
    run_dir = Path(config.run_dir)
    questions = read_questions(config.questions)
    non_members = [q.id for q in questions if q.label == 0]
    clean = [q.id for q in questions if q.split == "clean_ref"]
    settings = dataclasses.replace(config.verdict, permutations=500, bootstrap=1, detectors=None)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(
        f"Relative mode on non-member subsets of {args.size}: the actual clean set ({len(clean)}) against "
        f"{args.resplits} re-dealings of the {len(non_members) + len(clean)} clean-to-the-model questions "
        f"({args.subsets} subsets each, {settings.permutations} permutations)"
    )
    for name in (config.name, config.reference_name()):
        model = verdict_view(scored(run_dir, name, with_lara=False), config)
        actual = relative_rates(model, non_members, clean, args.subsets, args.size, settings, args.seed)
        pool, dealt = non_members + clean, []
        for r in range(args.resplits):
            order = list(rng.permutation(pool))
            dealt.append(
                relative_rates(
                    model,
                    order[len(clean) :],
                    order[: len(clean)],
                    args.subsets,
                    args.size,
                    settings,
                    args.seed + r + 1,
                )
            )
        print(f"\n{name}\n  {'detector':<16}{'actual':>8}{'re-dealt mean':>15}{'5–95 %':>14}{'≥ actual':>10}")
        for key in sorted(actual, key=lambda k: (k != "combined", k)):
            values = np.array(
                [d[key] for d in dealt if key in d]
            )  # a re-dealing where the mode left the detector out: none
            lo, hi = np.quantile(values, [0.05, 0.95])
            print(
                f"  {key:<16}{actual[key]:>8.3f}{values.mean():>15.3f}{f'{lo:.2f}–{hi:.2f}':>14}"
                f"{int(np.sum(values >= actual[key])):>7}/{len(values)}"
                + (f" ({len(dealt) - len(values)} left out)" if len(values) < len(dealt) else "")
            )
        per_template(model, questions, [k for k in actual if k != "combined" and model.has_controls(k)])
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
