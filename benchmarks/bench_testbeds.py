"""Every validity figure on both testbeds, side by side (issue 24): the testbed whose templates
were written here (``configs/demo.yaml``) and the one built from GSM-Symbolic's templates of GSM8K
test questions, which nobody here wrote (``configs/demo-gsm.yaml``).

    python benchmarks/bench_testbeds.py [--subsets 200] [--size 50] [--fdr-size 60] [--fdr-subsets 100] [--band 200] [--seed 0]

Runs each demo first where it has not run (``lara run`` skips what is done; the GSM demo takes
about half an hour on 2 cores from nothing), then prints, per testbed:

* detector AUCs with their 95 % bootstrap CIs on the RL and on the SFT checkpoint (from each
  run's ``report.json``; on the SFT checkpoint, trained before RL, every CI should contain 0.5);
* the blind baseline (the question text alone);
* the label-free verdict's rejection rates at α = 0.05 over ``--subsets`` random subsets of
  ``--size`` questions (bench_verdict.py's simulation): size on non-members, power on members, in
  the reference, relative and absolute modes on RL, and the relative and absolute modes on SFT
  (trained before RL: every rejection is false);
* the per-question decisions at q = 0.10 (bench_fdr.py's simulation): each detector's and the
  learned combination's residual AUC, and per mix of members the realised FDR with its null band,
  power beside the labelled oracle's, and the calibration check of the non-members' p-values.

Writes ``bench/testbeds.json`` in each run directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fdr  # noqa: E402
import bench_verdict  # noqa: E402
import subset_decisions  # noqa: E402

from generation.records import read_questions  # noqa: E402
from probes.detectors import ORDER  # noqa: E402
from probes.pipeline import load_run_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TESTBEDS = {
    "ours (40 templates)": ROOT / "configs" / "demo.yaml",
    "GSM-Symbolic (47 templates)": ROOT / "configs" / "demo-gsm.yaml",
    "SmolLM2-135M (real model)": ROOT / "configs" / "demo-smollm.yaml",  # the smollm extra; hours on 2 cores
}
DETECTORS = ["lara", *ORDER, "self_critique+lara"]  # the registry's order (probes.detectors.ORDER)


def figures(config_path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One testbed's figures (its demo run first, where missing)."""
    config = load_run_config(config_path)
    run_dir = Path(config.run_dir)
    bench_verdict.ensure_run(config)
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    rl, sft = bench_verdict.scored(run_dir, config.name), bench_verdict.scored(run_dir, config.reference_name())
    scored_ids = set(rl.scores.ids)  # detect.clean_ref: the detectors may score fewer clean questions than LaRA
    clean_ids = [q.id for q in questions if q.split == "clean_ref" and q.id in scored_ids]
    reports = {
        model: json.loads((run_dir / model / "report" / "report.json").read_text())
        for model in (config.name, config.reference_name())
    }
    aucs = {model: auc_cells(r, model == config.reference_name()) for model, r in reports.items()}
    settings = dataclasses.replace(config.verdict, permutations=2000, bootstrap=1)
    groups = {"non-members": non_members, "members": members}
    rl_v, sft_v = bench_verdict.verdict_view(rl, config), bench_verdict.verdict_view(sft, config)
    verdict = {
        "RL": bench_verdict.rates(
            rl_v,
            groups,
            args.subsets,
            args.size,
            settings,
            reference=sft_v,
            clean=rl_v.subset(clean_ids),
            seed=args.seed,
        ),
        "SFT": bench_verdict.rates(
            sft_v,
            groups,
            args.subsets,
            args.size,
            dataclasses.replace(settings, detectors=None),
            clean=sft_v.subset(clean_ids),
            seed=args.seed,
        ),
    }
    fdr_args = argparse.Namespace(seed=args.seed, size=args.fdr_size, subsets=args.fdr_subsets, band=args.band)
    fdr_settings = dataclasses.replace(config.verdict, fdr=0.10)
    (with_controls,) = subset_decisions.combined(run_dir / config.name, ("reference",), None)
    (sft_absolute,) = subset_decisions.combined(run_dir / config.reference_name(), ("absolute",), None)
    audited = members + non_members
    rl_case = subset_decisions.Case(
        "RL, reference mode", rl.subset(audited), "reference", with_controls, sft, rl.subset(clean_ids)
    )
    sft_case = subset_decisions.Case("SFT, absolute mode", sft.subset(audited), "absolute", sft_absolute, trained=False)
    fdr = {
        case.title: bench_fdr.case_rates(case, members, non_members, fdr_args, fdr_settings)
        for case in (rl_case, sft_case)
    }
    found = {
        "auc": aucs,
        "blind": reports[config.name]["blind"]["auc"],
        "verdict": verdict,
        "fdr": fdr,
        "residual_auc": bench_fdr.residual_aucs(rl_case, audited, set(members), fdr_settings),
        "models": [config.name, config.reference_name()],
    }
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "testbeds.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    return found


def auc_cells(report: dict[str, Any], is_reference: bool) -> dict[str, dict[str, Any]]:
    """Each detector's AUC cell from a ``report.json``; a row constant by construction is
    ``{"not_applicable": reason}``: flagged so by the report, or (a report written before the flag)
    a reference-based detector on the reference model itself, which compares the model with itself."""
    from probes.detectors import REGISTRY

    cells = {}
    for name in DETECTORS:
        row = report["detectors"].get(name)
        if row is None:
            continue
        if "not_applicable" in row:
            cells[name] = {"not_applicable": row["not_applicable"]}
        elif is_reference and name in REGISTRY and REGISTRY[name].requires_reference:
            cells[name] = {"not_applicable": "self-reference"}
        else:
            cells[name] = row.get("auc") or {}
    return cells


def count_cis(cells: dict[str, dict[str, Any]], contain: bool, value: float = 0.5) -> tuple[int, int, list[str]]:
    """(rows whose CI contains ``value`` — or, ``contain=False``, excludes it —, rows counted, rows left
    out as not applicable). Rows without a figure or constant by construction are never counted."""
    left_out = [n for n, c in cells.items() if "not_applicable" in c]
    counted = [
        c
        for c in cells.values()
        if "not_applicable" not in c
        and c.get("value") is not None
        and math.isfinite(c["value"])
        and None not in c.get("ci", [None])
    ]
    hits = sum((c["ci"][0] <= value <= c["ci"][1]) == contain for c in counted)
    return hits, len(counted), left_out


def _auc(cell: dict[str, Any] | None, sft: bool = False) -> str:
    if cell and "not_applicable" in cell:
        return f"n/a ({cell['not_applicable']}) "
    if not cell or cell.get("value") is None or not math.isfinite(cell["value"]):
        return "—"
    lo, hi = cell["ci"]
    outside = sft and not lo <= 0.5 <= hi
    return f"{cell['value']:.2f} [{lo:.2f}, {hi:.2f}]" + ("*" if outside else " ")


def show_auc_counts(found: dict[str, dict[str, Any]]) -> None:
    """Per testbed: RL CIs that exclude 0.5, SFT CIs that contain it; rows constant by construction
    are left out of both counts and named."""
    for n, f in found.items():
        rl, sft = f["models"]
        parts = []
        for label, model, contain in (("RL", rl, False), ("SFT", sft, True)):
            hits, counted, left_out = count_cis(f["auc"][model], contain)
            parts.append(
                f"{label}: {hits} of {counted} AUC CIs {'contain' if contain else 'exclude'} 0.5"
                + (f" ({', '.join(left_out)} n/a: constant by construction, not counted)" if left_out else "")
            )
        print(f"  {n}: " + "; ".join(parts))


def show(found: dict[str, dict[str, Any]]) -> None:
    names = list(found)
    print("\nDetector AUC [95 % CI], members vs non-members (* SFT CI excludes 0.5)")
    print(f"  {'detector':<20}" + "".join(f"{n[:24] + ' RL':>28}{'SFT':>22}" for n in names))
    for detector in DETECTORS:
        cells = []
        for n in names:
            rl, sft = found[n]["models"]
            cells += [
                f"{_auc(found[n]['auc'][rl].get(detector)):>28}",
                f"{_auc(found[n]['auc'][sft].get(detector), sft=True):>22}",
            ]
        print(f"  {detector:<20}" + "".join(cells))
    print("  " + f"{'blind baseline':<20}" + "".join(f"{_auc(found[n]['blind']):>28}{'':>22}" for n in names))
    show_auc_counts(found)
    print("\nVerdict rejection rate at alpha = 0.05 (non-members: size; members: power on RL, size on SFT)")
    print(f"  {'model: mode/detector':<34}" + "".join(f"{n[:22] + ' non-m.':>30}{'members':>10}" for n in names))
    keys = sorted(
        {(model, k) for n in names for model, table in found[n]["verdict"].items() for g in table.values() for k in g},
        key=lambda mk: (mk[0], mk[1].split("/")[0], mk[1].split("/")[1] != "combined", mk[1]),
    )
    for model, key in keys:
        row = []
        for n in names:
            table = found[n]["verdict"][model]
            row += [
                f"{table['non-members'][key]:>30.3f}" if key in table["non-members"] else f"{'—':>30}",
                f"{table['members'][key]:>10.3f}" if key in table["members"] else f"{'—':>10}",
            ]
        print(f"  {model + ': ' + key:<34}" + "".join(row))
    print(
        "\nResidual AUC on the RL checkpoint, reference mode (members; non-members) against the pooled control residuals"
        " (how many of each have a residual)"
    )
    rows = list(dict.fromkeys(k for n in names for k in found[n]["residual_auc"]))
    for row in rows:
        cells = [found[n]["residual_auc"].get(row) for n in names]
        print(
            f"  {row[:56]:<58}"
            + "".join(f"{c[0]:>10.3f}{c[1]:>8.3f} ({c[2]}; {c[3]})" if c else f"{'—':>30}" for c in cells)
        )
    print("\nPer-question decisions at FDR q = 0.10: realised FDR [its null band] / power / the labelled oracle's")
    print(f"  {'model, mode: mix':<40}" + "".join(f"{n[:34]:>40}" for n in names))
    for title in next(iter(found.values()))["fdr"]:
        for mix in next(iter(found.values()))["fdr"][title]["now"]:
            cells = []
            for n in names:
                r = found[n]["fdr"][title]["now"][mix]
                power = "—" if not _finite(r["power"]) else f"{r['power']:.3f}"
                oracle = "—" if not _finite(r["oracle"]) else f"{r['oracle']:.3f}"
                cells.append(f"{r['fdr']:.3f} [{r['band'][0]:.2f}, {r['band'][1]:.2f}] / {power} / {oracle}".rjust(40))
            print(f"  {title + ': ' + mix:<40}" + "".join(cells))
        checks = [found[n]["fdr"][title]["calibration"] for n in names]
        print(f"  {title + ': calibration KS p':<40}" + "".join(f"{c['ks_p']:>40.3f}" for c in checks))


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--fdr-size", type=int, default=60)
    parser.add_argument(
        "--fdr-subsets", type=int, default=100, help="subsets per mix for the decisions (each decided outright)"
    )
    parser.add_argument("--band", type=int, default=200, help="replicates of the decisions' null band")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--testbeds",
        default=",".join(TESTBEDS),
        help="which, comma-separated (default: all; the real model's needs the smollm extra and its demo's run)",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    chosen = [name.strip() for name in args.testbeds.split(",")]
    unknown = [name for name in chosen if name not in TESTBEDS]
    if unknown:
        raise SystemExit(f"unknown testbed {', '.join(unknown)}; choose from: {', '.join(TESTBEDS)}")
    found = {name: figures(TESTBEDS[name], args) for name in chosen}
    print(
        f"{len(found)} testbeds ({time.perf_counter() - start:.0f} s; {args.subsets} subsets of {args.size} for the verdict, "
        f"of {args.fdr_size} for the decisions)"
    )
    show(found)


if __name__ == "__main__":
    main()
