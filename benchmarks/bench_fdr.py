"""Per-question decisions (SPEC §8.10) on a shipped testbed, beside what the evidence allows.

    python benchmarks/bench_fdr.py [--config configs/demo.yaml] [--subsets 200] [--size 60] [--fdr 0.10] [--seed 0]

Uses the scores of a finished ``lara run`` of the config (run first if missing). Prints:

1. **Residual AUC** per detector and for each learned combination, per mode on the whole audited
   set: members' original residuals against the pooled null (controls, or the clean set) — the
   per-question evidence the decisions work with (0.5: none) — and non-members' (≈ 0.5 when the
   null is honest). Beside it, the residual AUC Benjamini–Hochberg would need to flag half the
   contaminated questions at ``--fdr`` (binormal, many questions).
2. **Decisions per mix** (random subsets of ``--size`` questions with 0, 10, 50 and 100 % members,
   each decided as ``lara run`` decides a subset of a benchmark: the benchmark's controls are the
   null, with its own seed): realised FDR (± s.e.), power, the **labelled oracle's** power (the most members any
   threshold on the same per-question p-values flags at FDP ≤ q knowing the labels; "n/a" with no
   non-member, where it is 1 by construction), their ratio, the "at least" bound's mean and its
   coverage — with the defaults before issue 32 beside (residual against all controls,
   deterministic p-values, Cauchy).
   On the SFT checkpoint (before RL) no question is contaminated, whatever its label: every flag is
   false, the realised FDR is the share of subsets with any flag, and "at least" covers when it is 0.
3. **The FDR check can fail**: the SFT checkpoint (every flag false) in the absolute mode as it is,
   and with a planted broken null — every original's scores raised above its own similars to a
   within-AUC of about 0.64 (the v1 generator's bias) — which must make the check fail at this size.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

from generation.records import read_questions
from probes.calibration import stats
from probes.calibration.decisions import decide_questions
from probes.calibration.power import auc_needed, labelled_oracle, residual_auc
from probes.calibration.verdict import ScoredSet, VerdictSettings
from probes.pipeline import load_run_config, run_pipeline
from probes.scores import ScoreTable

from bench_verdict import scored  # the scores and controls as lara run reads them

ROOT = Path(__file__).resolve().parents[1]
MIXES = (0.0, 0.1, 0.5, 1.0)
BEFORE = dict(decision_residual="spec", decision_pvalue="spec", decision_combine="cauchy")


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


@dataclasses.dataclass
class Case:
    """One model in one mode: its scored sets and the detectors its verdict combined there."""

    title: str
    audited: ScoredSet
    mode: str
    detectors: list[str]
    reference: ScoredSet | None = None
    clean: ScoredSet | None = None
    trained: bool = True  # the RL checkpoint's members are contaminated; on the SFT checkpoint no question is

    def decide(self, ids: list[str], settings: VerdictSettings):
        return decide_questions({"mode": self.mode, "combined": {"detectors": self.detectors}}, self.audited.subset(ids),
                                self.reference, self.clean, settings, pool=self.audited)


def residual_aucs(case: Case, ids: list[str], members: set[str], settings: VerdictSettings) -> dict[str, tuple[float, float]]:
    """Per detector and learned stream: (members', non-members') residual AUC against the pooled null."""
    d = case.decide(ids, settings)
    member = np.array([i in members for i in d.ids])
    out = {}
    for name, e in d.detectors.items():
        out[name] = (residual_auc(e.residual[member], e.null_values), residual_auc(e.residual[~member], e.null_values))
    for s in d.streams:
        label = f"learned ({s.name}: {', '.join(s.detectors)})" if len(s.detectors) > 1 else f"{s.name} stream"
        out[label] = (residual_auc(s.score[member], s.null_scores), residual_auc(s.score[~member], s.null_scores))
    return out


def mix_rates(case: Case, members: list[str], non_members: list[str], args: argparse.Namespace,
              settings: VerdictSettings) -> dict[str, dict[str, float]]:
    """Per mix: realised FDR (± s.e.), power, any flag, labelled oracle, "at least" mean and coverage."""
    rng = np.random.default_rng(args.seed)
    member_set = set(members) if case.trained else set()  # on a checkpoint before RL every flag is false
    out = {}
    for mix in MIXES:
        n_members = round(args.size * mix)
        n_true = n_members if case.trained else 0
        rows: dict[str, list[float]] = {k: [] for k in ("fdp", "power", "any", "oracle", "bound", "covered")}
        for draw in range(args.subsets):
            ids = list(rng.choice(members, n_members, replace=False)) + list(rng.choice(non_members, args.size - n_members, replace=False))
            d = case.decide(ids, dataclasses.replace(settings, seed=args.seed + draw))  # each subset its own audit, its own seed
            member = np.array([i in member_set for i in d.ids])
            flagged = d.flagged
            rows["fdp"].append((flagged & ~member).sum() / max(int(flagged.sum()), 1))
            rows["any"].append(float(flagged.any()))
            rows["bound"].append(d.at_least)
            rows["covered"].append(float(d.at_least <= n_true))
            if n_true:
                rows["power"].append((flagged & member).sum() / n_true)
                if n_true < args.size:
                    rows["oracle"].append(labelled_oracle(d.p_value, member, settings.fdr)[0])
        out[f"{100 * mix:g}% members"] = {
            "fdr": float(np.mean(rows["fdp"])), "fdr_se": float(np.std(rows["fdp"], ddof=1) / math.sqrt(args.subsets)),
            "power": float(np.mean(rows["power"])) if rows["power"] else math.nan, "any_flag": float(np.mean(rows["any"])),
            "oracle": float(np.mean(rows["oracle"])) if rows["oracle"] else math.nan,
            "at_least": float(np.mean(rows["bound"])), "coverage": float(np.mean(rows["covered"]))}
    return out


def broken(sft: ScoredSet, detectors: list[str], within: float = 0.64) -> tuple[ScoredSet, dict[str, float]]:
    """The SFT checkpoint's scores with every original raised above its own similars, for each
    detector by the shift (found by bisection) that brings its within-AUC to ``within``. Returns the
    planted set and each detector's within-AUC after the shift."""
    columns = dict(sft.scores.columns)
    achieved = {}

    def auc_after(name: str, shift: float) -> float:
        raised = np.array(sft.scores.columns[name], dtype=np.float64) + shift
        planted = ScoredSet(ScoreTable(sft.scores.ids, {name: raised}), sft.controls, list(sft.ids))
        return float(np.nanmean(stats.within_ranks(planted.original(name), planted.control_matrix(name))))

    for name in detectors:
        low, high = 0.0, 10 * float(stats.pooled_control_scale(sft.control_matrix(name)).scale[0])
        for _ in range(40):
            middle = (low + high) / 2
            low, high = (middle, high) if auc_after(name, middle) < within else (low, middle)
        columns[name] = np.array(sft.scores.columns[name], dtype=np.float64) + high
        achieved[name] = auc_after(name, high)
    return ScoredSet(ScoreTable(sft.scores.ids, columns), sft.controls, list(sft.ids), sft.settings, sft.prompt_format), achieved


def print_aucs(title: str, aucs: dict[str, tuple[float, float]]) -> None:
    print(f"\n{title}: residual AUC against the pooled null (members; non-members)")
    for name, (m, n) in aucs.items():
        print(f"  {name:<58}{m:>7.3f}{n:>8.3f}")


def print_mixes(title: str, now: dict, before: dict) -> None:
    print(f"\n{title}")
    print(f"  {'mix':<13}{'realised FDR':>15}{'power':>8}{'labelled':>10}{'ratio':>7}{'any flag':>9}{'at least (cover)':>18}"
          f"{'power before':>13}{'any before':>11}")
    for mix, r in now.items():
        b = before[mix]
        oracle = "—" if math.isnan(r["power"]) or mix == "0% members" else "n/a*" if mix == "100% members" else f"{r['oracle']:.3f}"
        ratio = f"{r['power'] / r['oracle']:.2f}" if oracle[0].isdigit() and r["oracle"] > 0 else "—"
        power = "—" if math.isnan(r["power"]) else f"{r['power']:.3f}"
        before_power = "—" if math.isnan(b["power"]) else f"{b['power']:.3f}"
        print(f"  {mix:<13}{r['fdr']:>8.3f} ± {r['fdr_se']:.3f}{power:>8}{oracle:>10}{ratio:>7}{r['any_flag']:>9.3f}"
              f"{r['at_least']:>10.1f} ({r['coverage']:.2f}){before_power:>13}{b['any_flag']:>11.3f}")


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
    found = run(config, run_dir, args)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "fdr_rates.json").write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


def cases(config, run_dir: Path, questions, only: str | None) -> tuple[list[Case], ScoredSet, list[str]]:
    """The four model × mode cases of the testbed, the SFT set, and the SFT absolute mode's detectors."""
    clean_ids = [q.id for q in questions if q.split == "clean_ref"]
    audited_ids = [q.id for q in questions if q.split != "clean_ref"]
    rl, sft = scored(run_dir, config.name), scored(run_dir, config.reference_name())
    rl_all, sft_all = rl.subset(audited_ids), sft.subset(audited_ids)
    with_controls, relative = combined(run_dir / config.name, ("reference", "relative"), only)
    sft_absolute, sft_relative = combined(run_dir / config.reference_name(), ("absolute", "relative"), only)
    return [Case("RL checkpoint, reference mode (SFT reference)", rl_all, "reference", with_controls, sft, rl.subset(clean_ids)),
            Case("RL checkpoint, relative mode (clean_ref problems)", rl_all, "relative", relative, clean=rl.subset(clean_ids)),
            Case("SFT checkpoint (before RL), relative mode", sft_all, "relative", sft_relative, clean=sft.subset(clean_ids), trained=False),
            Case("SFT checkpoint (before RL), absolute mode (uncalibrated)", sft_all, "absolute", sft_absolute, trained=False)], \
        sft_all, sft_absolute


def run(config, run_dir: Path, args: argparse.Namespace) -> dict:
    questions = read_questions(config.questions)
    members, non_members = [q.id for q in questions if q.label == 1], [q.id for q in questions if q.label == 0]
    settings = dataclasses.replace(config.verdict, fdr=args.fdr)
    before = dataclasses.replace(settings, **BEFORE)
    all_cases, sft_all, sft_absolute = cases(config, run_dir, questions, args.detectors)
    print(f"Per-question decisions at FDR q = {args.fdr} ({config.name} and {config.reference_name()}); BH needs a residual "
          f"AUC of {auc_needed(1.0, args.fdr):.2f} / {auc_needed(0.5, args.fdr):.2f} / {auc_needed(0.1, args.fdr):.2f} to flag half "
          "the contaminated questions when 100 / 50 / 10 % are (binormal, many questions)")
    found: dict = {"residual_auc": {}, "mixes": {}}
    for case in all_cases:
        aucs = residual_aucs(case, members + non_members, set(members), settings)
        found["residual_auc"][case.title] = aucs
        print_aucs(case.title, aucs)
    print(f"\n{args.subsets} random subsets of {args.size} per mix, each decided against the whole benchmark's controls "
          "(* no non-member: every threshold has FDP 0, the labelled oracle is 1 by construction)")
    for case in all_cases:
        now, old = (mix_rates(case, members, non_members, args, s) for s in (settings, before))
        found["mixes"][case.title] = {"now": now, "before": old}
        print_mixes(case.title, now, old)
    planted, achieved = broken(sft_all, sft_absolute)
    case = Case("SFT checkpoint, absolute mode, planted broken null (within-AUC " +
                ", ".join(f"{n} {v:.2f}" for n, v in achieved.items()) + "): every flag false, the check must fail",
                planted, "absolute", sft_absolute, trained=False)
    now = mix_rates(case, members, non_members, args, settings)
    found["mixes"][case.title] = {"now": now, "before": mix_rates(case, members, non_members, args, before)}
    print_mixes(case.title, now, found["mixes"][case.title]["before"])
    limit = args.fdr + 2 * math.sqrt(args.fdr * (1 - args.fdr) / args.subsets)
    worst = max(r["fdr"] for r in now.values())
    print(f"  the FDR check {'FAILS, as it must' if worst > limit else 'PASSES: it cannot see this broken null at this size'} "
          f"(largest realised FDR {worst:.3f} against q + 2 s.e. = {limit:.3f})")
    return found


if __name__ == "__main__":
    main()
