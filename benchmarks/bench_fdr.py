"""Per-question decisions (SPEC §8.10) on a shipped testbed, beside what the evidence allows.

    python benchmarks/bench_fdr.py [--config configs/demo.yaml] [--subsets 100] [--size 60] [--fdr 0.10]
                                   [--band 200] [--seed 0]

Uses the scores of a finished ``lara run`` of the config (run first if missing). Prints:

1. **Residual AUC** per detector and for each learned combination, per mode on the whole audited
   set: members' original residuals against the pooled null (controls, or the clean set) — the
   per-question evidence the decisions work with (0.5: none) — and non-members' (≈ 0.5 when the
   null is honest). Beside it, the residual AUC Benjamini–Hochberg would need to flag half the
   contaminated questions at ``--fdr`` (binormal, many questions).
2. **Decisions per mix** (random subsets of ``--size`` questions with 0, 10, 50 and 100 % members,
   each decided as ``lara run`` decides a subset of a benchmark — against the whole benchmark's
   controls — with its own seed): realised FDR, power, the **labelled oracle's** power (the
   most members any threshold on the same p-values flags at FDP ≤ q knowing the labels; "n/a"
   with no non-member, where it is 1 by construction), their ratio, the "at least" bound's mean
   and coverage — and the defaults before issue 32 (residual against all controls, deterministic
   p-values, Cauchy) beside.
   **The null band.** Subsets of one benchmark share its questions: the realised FDR over them is
   one benchmark's figure, and its spread is the benchmark's, not the subsets'. (With 150
   exactly-null questions, BH in subsets of 60 flags something in 0–44 % of subsets, 95 % of the
   time, though the mean over benchmarks is 10 %.) So each realised FDR is shown with the 95 % band
   the same figure has when the non-members' p-values (every question's, on the SFT checkpoint)
   are replaced by exact uniform ones (one per question, shared by the subsets it is in), ``--band``
   times: a figure above its band says the
   procedure is not at level here; one inside it says no more than that.
3. **Calibration, the check that can fail**: the non-members' p-values, the whole benchmark
   decided at once, against the uniform law: their share ≤ 0.05 and ≤ 0.10, and the one-sided
   Kolmogorov–Smirnov p-value of "too many small p-values" (dependence through the shared pool
   makes it approximate).
   On the RL checkpoint, the non-members with the smallest p-values are listed, with how many share
   their template and their answer with a member (GRPO rewarded the model for that answer).
   The relative mode's decisions on the whole audited set against smaller clean sets (a quarter,
   half, all of it): what the clean set's size buys.
4. **A planted broken null**: the SFT checkpoint's scores with every audited original raised above
   its own similars to a within-AUC of about 0.64 (the v1 generator's bias), the clean set's not,
   in the relative mode — a calibrated mode whose check passes as it is; every flag is false —
   which the calibration check must report as failing at this size (the subsets' FDR alone may
   not: its band is wide).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
from bench_verdict import ensure_run, scored  # the scores and controls as lara run reads them
from subset_decisions import (
    Case,
    calibration,
    combined,
    decide_subsets,
    mix_rates,
    null_band,
    reference_case,
    split_ids,
)

from generation.records import read_questions
from probes.pipeline import load_run_config
from probes.scores import ScoreTable
from probes.verdicts import stats
from probes.verdicts.decisions import decide_questions
from probes.verdicts.modes import ScoredSet, VerdictSettings
from probes.verdicts.power import auc_needed, residual_auc

ROOT = Path(__file__).resolve().parents[1]
MIXES = (0.0, 0.1, 0.5, 1.0)
BEFORE = dict(decision_residual="spec", decision_pvalue="spec", decision_combine="cauchy")


def case_rates(
    case: Case, members: list[str], non_members: list[str], args: argparse.Namespace, settings: VerdictSettings
) -> dict[str, dict]:
    """Per mix, the decisions' rates with their null band, the calibration check, and the figures
    with the defaults before issue 32."""
    truth = set(members) if case.trained else set()  # on a checkpoint before RL every flag is false
    out: dict[str, dict] = {"calibration": calibration(case, members + non_members, truth, settings)}
    for label, s in (("now", settings), ("before", dataclasses.replace(settings, **BEFORE))):
        rates = {}
        for mix in MIXES:
            decided = decide_subsets(case, members, non_members, mix, args, s, truth)
            r = mix_rates(decided, s)
            if label == "now":
                r["band"] = null_band(decided, s, args.band, args.seed)
            rates[f"{100 * mix:g}% members"] = r
        out[label] = rates
    return out


def near_duplicates(questions) -> set[str]:
    """Non-members sharing their template and their answer with a member (testbeds record the
    template under ``extra``): GRPO rewards a model for a member's answer, so such a question may be
    answered from memory though it was never trained on."""

    def key(q):
        template = q.extra_value("template")
        return (template, str(q.answer)) if template is not None else None

    trained = {key(q) for q in questions if q.label == 1} - {None}
    return {q.id for q in questions if q.label == 0 and key(q) in trained}


def smallest_non_members(
    case: Case,
    members: list[str],
    non_members: list[str],
    settings: VerdictSettings,
    duplicates: set[str],
    below: float = 0.05,
) -> dict[str, object]:
    """The non-members with p ≤ ``below`` (the whole benchmark decided at once) and how many of them
    are near-duplicates of members, beside how many non-members are."""
    d = case.decide(members + non_members, settings)
    found = sorted((float(p), i) for i, p in zip(d.ids, d.p_value) if i in set(non_members) and p <= below)
    return {
        "below": below,
        "ids": [i for _, i in found],
        "p": [p for p, _ in found],
        "near_duplicates": sum(i in duplicates for _, i in found),
        "non_members_near_duplicates": len(duplicates),
    }


def clean_set_sizes(
    case: Case, members: list[str], non_members: list[str], settings: VerdictSettings, draws: int = 10, seed: int = 0
) -> dict[int, dict[str, float]]:
    """The relative mode's decisions on the whole audited set against random clean sets of a quarter,
    a half and all of the clean set (``draws`` each): members and non-members flagged. A clean
    question costs what an audited one does (every detector scores it), so its cost is its share of
    the audited set's detection time."""
    assert case.clean is not None
    rng = np.random.default_rng(seed)
    clean_ids, out = list(case.clean.ids), {}
    for size in sorted({len(clean_ids) // 4, len(clean_ids) // 2, len(clean_ids)}):
        rows = []
        for k in range(draws if size < len(clean_ids) else 1):
            clean = case.clean.subset(list(rng.choice(clean_ids, size, replace=False)))
            d = decide_questions(
                {"mode": "relative", "combined": {"detectors": case.detectors}},
                case.audited.subset(members + non_members),
                None,
                clean,
                dataclasses.replace(settings, seed=seed + k),
            )
            member = np.array([i in set(members) for i in d.ids])
            rows.append(((d.flagged & member).sum(), (d.flagged & ~member).sum(), d.at_least))
        out[size] = {
            "members": float(np.mean([r[0] for r in rows])),
            "non_members": float(np.mean([r[1] for r in rows])),
            "at_least": float(np.mean([r[2] for r in rows])),
            "draws": len(rows),
        }
    return out


def residual_aucs(
    case: Case, ids: list[str], members: set[str], settings: VerdictSettings
) -> dict[str, tuple[float, float, int, int]]:
    """Per detector and learned stream: (members', non-members') residual AUC against the pooled
    null, and how many members and non-members have a residual there (the rest are left out: too
    few controls, or decided by another stream)."""
    d = case.decide(ids, settings)
    member = np.array([i in members for i in d.ids])

    def row(values: np.ndarray, null: np.ndarray | None) -> tuple[float, float, int, int]:
        scored = ~np.isnan(values)
        return (
            residual_auc(values[member], null),
            residual_auc(values[~member], null),
            int((scored & member).sum()),
            int((scored & ~member).sum()),
        )

    out = {name: row(e.residual, e.null_values) for name, e in d.detectors.items()}
    for s in d.streams:
        label = f"learned ({s.name}: {', '.join(s.detectors)})" if len(s.detectors) > 1 else f"{s.name} stream"
        out[label] = row(s.score, s.null_scores)
    return out


def broken(sft: ScoredSet, detectors: list[str], within: float = 0.64) -> tuple[ScoredSet, dict[str, float]]:
    """The SFT checkpoint's scores with the original of every question of ``sft.ids`` (not the
    clean set's) raised above its own similars, for each detector with controls by the shift (found
    by bisection) that brings its within-AUC to ``within``. Returns the planted set and each
    detector's within-AUC after the shift."""
    columns = dict(sft.scores.columns)
    achieved = {}
    chosen = set(sft.ids)
    mask = np.array([i in chosen for i in sft.scores.ids], dtype=np.float64)

    def auc_after(name: str, shift: float) -> float:
        raised = np.array(sft.scores.columns[name], dtype=np.float64) + shift * mask
        planted = ScoredSet(ScoreTable(sft.scores.ids, {name: raised}), sft.controls, list(sft.ids))
        return float(np.nanmean(stats.within_ranks(planted.original(name), planted.control_matrix(name))))

    for name in (d for d in detectors if sft.has_controls(d)):
        low, high = 0.0, 10 * float(stats.pooled_control_scale(sft.control_matrix(name)).scale[0])
        for _ in range(40):
            middle = (low + high) / 2
            low, high = (middle, high) if auc_after(name, middle) < within else (low, middle)
        columns[name] = np.array(sft.scores.columns[name], dtype=np.float64) + high * mask
        achieved[name] = auc_after(name, high)
    return ScoredSet(
        ScoreTable(sft.scores.ids, columns), sft.controls, list(sft.ids), sft.settings, sft.prompt_format
    ), achieved


def print_aucs(title: str, aucs: dict[str, tuple[float, float, int, int]]) -> None:
    print(f"\n{title}: residual AUC against the pooled null (members; non-members; how many of each have a residual)")
    for name, (m, n, n_m, n_n) in aucs.items():
        print(f"  {name:<58}{m:>7.3f}{n:>8.3f}   ({n_m}; {n_n})")


def print_mixes(title: str, found: dict[str, dict], fdr: float) -> None:
    now, before, c = found["now"], found["before"], found["calibration"]
    print(f"\n{title}")
    print(
        f"  {'mix':<13}{'realised FDR':>13}{'null band':>16}{'power':>8}{'labelled':>10}{'ratio':>7}{'any flag':>9}"
        f"{'at least (cover)':>18}{'power before':>13}{'any before':>11}"
    )
    for mix, r in now.items():
        b = before[mix]
        oracle = (
            "—"
            if math.isnan(r["power"]) or mix == "0% members"
            else "n/a*"
            if mix == "100% members"
            else f"{r['oracle']:.3f}"
        )
        ratio = f"{r['power'] / r['oracle']:.2f}" if oracle[0].isdigit() and r["oracle"] > 0 else "—"
        power = "—" if math.isnan(r["power"]) else f"{r['power']:.3f}"
        before_power = "—" if math.isnan(b["power"]) else f"{b['power']:.3f}"
        above = "!" if r["fdr"] > r["band"][1] else " "
        print(
            f"  {mix:<13}{r['fdr']:>12.3f}{above} [{r['band'][0]:.3f}, {r['band'][1]:.3f}]{power:>8}{oracle:>10}{ratio:>7}"
            f"{r['any_flag']:>9.3f}{r['at_least']:>10.1f} ({r['coverage']:.2f}){before_power:>13}{b['any_flag']:>11.3f}"
        )
    verdict = "FAILS" if c["ks_p"] < 0.05 else "passes"
    print(
        f"  calibration of the {c['n']} not-contaminated questions' p-values: share <= 0.05: {c['le_05']:.3f}, <= {fdr:g}: "
        f"{c['le_10']:.3f}; one-sided KS p = {c['ks_p']:.3f}: {verdict}"
    )


def cases(config, run_dir: Path, questions, only: str | None) -> list[Case]:
    """The four model × mode cases of the testbed, and the SFT checkpoint's relative mode with a
    planted broken null: the audited originals raised above their similars, the clean set's not (a
    calibrated mode whose check passes as it is)."""
    rl, sft = scored(run_dir, config.name), scored(run_dir, config.reference_name())
    audited_ids, clean_ids = split_ids(questions, rl)
    rl_all, sft_all = rl.subset(audited_ids), sft.subset(audited_ids)
    (relative,) = combined(run_dir / config.name, ("relative",), only)
    sft_absolute, sft_relative = combined(run_dir / config.reference_name(), ("absolute", "relative"), only)
    planted, achieved = broken(sft_all, sft_relative)
    title = (
        "SFT checkpoint, relative mode, planted broken null (the audited originals raised to a within-AUC of "
        + ", ".join(f"{n} {v:.2f}" for n, v in achieved.items())
        + "): every flag false, the checks must fail"
    )
    return [
        reference_case(config, run_dir, questions, rl, sft, only),
        Case(
            "RL checkpoint, relative mode (clean_ref problems)",
            rl_all,
            "relative",
            relative,
            clean=rl.subset(clean_ids),
        ),
        Case(
            "SFT checkpoint (before RL), relative mode",
            sft_all,
            "relative",
            sft_relative,
            clean=sft.subset(clean_ids),
            trained=False,
        ),
        Case(
            "SFT checkpoint (before RL), absolute mode (uncalibrated)", sft_all, "absolute", sft_absolute, trained=False
        ),
        Case(title, planted, "relative", sft_relative, clean=sft.subset(clean_ids), trained=False),
    ]


def run(config, run_dir: Path, args: argparse.Namespace) -> dict:
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    settings = dataclasses.replace(config.verdict, fdr=args.fdr)
    all_cases = cases(config, run_dir, questions, args.detectors)
    print(
        f"Per-question decisions at FDR q = {args.fdr} ({config.name} and {config.reference_name()}); BH needs a residual "
        f"AUC of {auc_needed(1.0, args.fdr):.2f} / {auc_needed(0.5, args.fdr):.2f} / {auc_needed(0.1, args.fdr):.2f} to flag half "
        "the contaminated questions when 100 / 50 / 10 % are (binormal, many questions)"
    )
    found: dict = {"residual_auc": {}, "mixes": {}}
    for case in all_cases:
        aucs = residual_aucs(case, members + non_members, set(members), settings)
        found["residual_auc"][case.title] = aucs
        print_aucs(case.title, aucs)
    print(
        f"\n{args.subsets} random subsets of {args.size} per mix, each decided against the whole benchmark's controls "
        f"(the null band: {args.band} replicates with exact uniform p-values for every question not "
        "contaminated; ! above it) (* no non-member: every threshold has FDP 0, the labelled oracle is 1 by construction)"
    )
    relative = next(c for c in all_cases if c.mode == "relative" and c.trained)
    sizes = found["clean_set_sizes"] = clean_set_sizes(relative, members, non_members, settings)
    print(
        f"\n{relative.title}: the whole audited set against smaller clean sets (each a {len(members) + len(non_members)}-question"
        " run's detection cost times its share)"
    )
    for size, r in sizes.items():
        print(
            f"  clean set of {size:>4}: members flagged {r['members']:6.1f}, non-members flagged {r['non_members']:5.1f}, "
            f"at least {r['at_least']:6.1f} (mean of {r['draws']})"
        )
    duplicates = near_duplicates(questions)
    for case in all_cases:
        found["mixes"][case.title] = case_rates(case, members, non_members, args, settings)
        print_mixes(case.title, found["mixes"][case.title], args.fdr)
        if case.trained and duplicates:
            tail = found["mixes"][case.title]["tail"] = smallest_non_members(
                case, members, non_members, settings, duplicates
            )
            print(
                f"  non-members with p <= {tail['below']} (the whole benchmark decided at once): {len(tail['ids'])}, of which "
                f"{tail['near_duplicates']} share their template and answer with a member (as {tail['non_members_near_duplicates']} "
                f"of the {len(non_members)} non-members do): "
                + ", ".join(f"{i} {p:.4f}" for i, p in zip(tail["ids"], tail["p"]))
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--run", type=Path, help="run directory (default: the config's)")
    parser.add_argument("--subsets", type=int, default=100)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--fdr", type=float, default=0.10)
    parser.add_argument("--band", type=int, default=200, help="replicates of the null band")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--detectors", help="combine these detectors (comma-separated; default: those the run's verdict combined)"
    )
    args = parser.parse_args()
    config = load_run_config(args.config, [f"run_dir={args.run}"] if args.run else [])
    run_dir = Path(config.run_dir)
    start = time.perf_counter()
    ensure_run(config)
    found = run(config, run_dir, args)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "fdr_rates.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
