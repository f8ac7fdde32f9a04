"""Per-question decisions on random subsets of a finished run, as ``lara run`` makes them (SPEC §8.10):
the machinery :mod:`bench_fdr`, :mod:`bench_ceiling`, :mod:`bench_rollout_scores` and
:mod:`bench_rollout_budget` share — one model in one mode (:class:`Case`), subsets of a given mix
decided with their own seeds (:func:`decide_subsets`), and their rates (:func:`mix_rates`) with the
null band (:func:`null_band`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from probes.verdicts import conformal
from probes.verdicts.decision_table import QuestionDecisions
from probes.verdicts.decisions import decide_questions
from probes.verdicts.modes import ScoredSet, VerdictSettings
from probes.verdicts.power import labelled_oracle, uniformity_check


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

    def decide(self, ids: list[str], settings: VerdictSettings) -> QuestionDecisions:
        return decide_questions(
            {"mode": self.mode, "combined": {"detectors": self.detectors}},
            self.audited.subset(ids),
            self.reference,
            self.clean,
            settings,
            pool=self.audited,
        )


@dataclasses.dataclass
class Decided:
    """One subset decided as ``lara run`` decides it: its questions' p-values ``[n]`` (NaN untested),
    the lines of evidence behind its "at least" bound (``(p [n], pool)`` each), and which of its
    questions are contaminated."""

    ids: list[str]
    p: np.ndarray
    lines: list[tuple[np.ndarray, int]]
    truth: np.ndarray

    def bound(self, alpha: float) -> int:
        return max((conformal.at_least(q, pool, alpha / len(self.lines)) for q, pool in self.lines), default=0)


def decide_subsets(
    case: Case,
    members: list[str],
    non_members: list[str],
    mix: float,
    args: argparse.Namespace,
    settings: VerdictSettings,
    truth: set[str],
) -> list[Decided]:
    """``--subsets`` random subsets with the mix's share of members (a fixed stream per mix), each
    decided outright with its own seed (in the relative mode the learned score is fitted on the
    subset's own originals, so a question's p-value depends on the subset)."""
    rng = np.random.default_rng([args.seed, int(100 * mix)])
    k = round(args.size * mix)
    out = []
    for draw in range(args.subsets):
        ids = list(rng.choice(members, k, replace=False)) + list(rng.choice(non_members, args.size - k, replace=False))
        d = case.decide(ids, dataclasses.replace(settings, seed=args.seed + draw))
        assert (fdr_flags(d.p_value, settings) == d.flagged).all()  # the fast procedure below is the shipped one
        out.append(Decided(list(d.ids), d.p_value, d.lines, np.array([i in truth for i in d.ids])))
    return out


def bh_flags(p: np.ndarray, q: float) -> np.ndarray:
    """Benjamini–Hochberg's flags over the non-NaN ``p`` (as :func:`conformal.benjamini_hochberg`, vectorised)."""
    flagged = np.zeros(len(p), dtype=bool)
    tested = np.flatnonzero(~np.isnan(p))
    if not len(tested):
        return flagged
    order = tested[np.argsort(p[tested], kind="stable")]
    below = np.flatnonzero(p[order] <= q * np.arange(1, len(order) + 1) / len(order))
    if len(below):
        flagged[order[: below[-1] + 1]] = True
    return flagged


def fdr_flags(p: np.ndarray, settings: VerdictSettings) -> np.ndarray:
    """The flags of the run's FDR procedure (``verdict.fdr_method``): BH vectorised; Storey's adaptive
    BH as BH at q / π̂₀ over the non-NaN ``p``; the two-stage one through the shipped function."""
    if settings.fdr_method == "bh":
        return bh_flags(p, settings.fdr)
    if settings.fdr_method == "storey":
        finite = p[~np.isnan(p)]
        pi0 = conformal.storey_pi0(finite, settings.storey_lambda) if len(finite) else 1.0
        return bh_flags(p, settings.fdr / pi0)
    return conformal.benjamini_hochberg(p, settings.fdr, settings.fdr_method, settings.storey_lambda)[0]


def mix_rates(
    decided: list[Decided], settings: VerdictSettings, replaced: list[np.ndarray] | None = None
) -> dict[str, float]:
    """One mix: realised FDR (± s.e. over subsets), power, any flag, labelled oracle, "at least"
    mean and coverage; ``replaced``: p-values to use instead of the decisions' (the null band)."""
    rows: dict[str, list[float]] = {k: [] for k in ("fdp", "power", "any", "oracle", "bound", "covered")}
    for k, d in enumerate(decided):
        p = d.p if replaced is None else replaced[k]
        flagged, member = fdr_flags(p, settings), d.truth
        rows["fdp"].append((flagged & ~member).sum() / max(int(flagged.sum()), 1))
        rows["any"].append(float(flagged.any()))
        if member.any():
            rows["power"].append((flagged & member).sum() / member.sum())
            if not member.all():
                rows["oracle"].append(labelled_oracle(p, member, settings.fdr)[0])
        if replaced is None:
            bound = d.bound(settings.alpha)
            rows["bound"].append(bound)
            rows["covered"].append(float(bound <= member.sum()))
    mean = {k: float(np.mean(v)) if v else math.nan for k, v in rows.items()}
    return {
        "fdr": mean["fdp"],
        "fdr_se": float(np.std(rows["fdp"], ddof=1) / math.sqrt(len(decided))),
        "power": mean["power"],
        "any_flag": mean["any"],
        "oracle": mean["oracle"],
        "at_least": mean["bound"],
        "coverage": mean["covered"],
    }


def null_band(decided: list[Decided], settings: VerdictSettings, replicates: int, seed: int) -> tuple[float, float]:
    """The 2.5 and 97.5 % points of the realised FDR over the same subsets when every question that is
    not contaminated has an exact uniform p-value (the contaminated keep theirs) — one uniform per
    question of the benchmark, shared by every subset it is in, as its real p-value is."""
    rng = np.random.default_rng([seed, 7])
    figures = []
    for _ in range(replicates):
        draw: dict[int, float] = {}
        replaced = []
        for d in decided:
            p = d.p.copy()
            for j in np.flatnonzero(~d.truth & ~np.isnan(p)):
                p[j] = draw.setdefault(d.ids[j], rng.uniform())
            replaced.append(p)
        figures.append(mix_rates(decided, settings, replaced)["fdr"])
    return float(np.percentile(figures, 2.5)), float(np.percentile(figures, 97.5))


def calibration(case: Case, ids: list[str], truth: set[str], settings: VerdictSettings) -> dict[str, float]:
    """The not-contaminated questions' p-values, the whole benchmark decided at once, against the uniform law."""
    d = case.decide(ids, settings)
    return uniformity_check(np.array([pv for i, pv in zip(d.ids, d.p_value) if i not in truth]))


def split_ids(questions, rl: ScoredSet) -> tuple[list[str], list[str]]:
    """The audited questions' ids and the clean set's (those the detectors scored: ``detect.clean_ref``
    may score fewer clean questions than LaRA)."""
    scored_ids = set(rl.scores.ids)
    clean_ids = [q.id for q in questions if q.split == "clean_ref" and q.id in scored_ids]
    return [q.id for q in questions if q.split != "clean_ref"], clean_ids


def reference_case(config, run_dir: Path, questions, rl: ScoredSet, sft: ScoredSet, only: str | None = None) -> Case:
    """The RL checkpoint in the reference mode (SFT reference) over the detectors its verdict combined there."""
    audited_ids, clean_ids = split_ids(questions, rl)
    (with_controls,) = combined(run_dir / config.name, ("reference",), only)
    title = "RL checkpoint, reference mode (SFT reference)"
    return Case(title, rl.subset(audited_ids), "reference", with_controls, sft, rl.subset(clean_ids))
