"""The per-question decisions (SPEC §8.10) by simulation, through the shipped functions (issue 32):

    python benchmarks/bench_decisions.py [--reps 400] [--seed 0] [--only size,power,adaptive,broken]

* **size**: with no contaminated question, the share of audited sets with any flag at q = 0.10,
  for N ∈ {60, 500} questions, C ∈ {3, 5, 20} controls, Gaussian, t3 and 8-draw binomial scores —
  with the defaults before issue 32 (an original's residual against all its controls,
  deterministic p-values, Cauchy) and now (against all but one, randomised, learned). At level
  means within [q/2, q + 2 s.e.].
* **power**: planted contamination (originals raised by a shift giving the stated within-AUC) in
  10, 50 and 100 % of the questions: realised FDR, the decisions' power, the **exact-null
  oracle's** (BH on p-values from the null distribution itself, 200,000 simulated null residuals:
  the best a valid procedure can do with these residuals), the **labelled oracle's** (the most
  members any threshold flags at FDP ≤ q knowing the labels) and the ratio of the two — the floor
  that says how far below the labelled oracle any procedure without labels stays at that residual
  AUC —, the residual AUC, and the "at least" bound's mean and coverage.
* **adaptive**: plain BH beside Benjamini–Krieger–Yekutieli's two-stage and Storey's adaptive BH
  on the same p-values, with none, a third and half of the questions contaminated: realised FDR
  (the adaptive procedures' size at level, measured) and power.
* **broken**: a broken null (every original raised above its own similars to a within-AUC of 0.64,
  the v1 generator's bias; nothing contaminated, so every flag is false): the realised FDR and how
  often "at least" claims contamination, at the sizes the checks are run at — a check that cannot
  fail there shows nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np
from scipy.stats import norm

from probes.verdicts import conformal
from probes.verdicts.decisions import decide_questions
from probes.verdicts.modes import VerdictSettings
from probes.verdicts.power import labelled_oracle, residual_auc
from probes.verdicts.simulation import KINDS, texts, world

Q = 0.10
BEFORE = VerdictSettings(decision_residual="spec", decision_pvalue="spec", decision_combine="cauchy", fdr=Q)
NOW = VerdictSettings(fdr=Q)


def decide(w, settings: VerdictSettings, seed: int):
    return decide_questions(
        {"mode": "absolute", "combined": {"detectors": w.names}},
        w.audited,
        None,
        None,
        dataclasses.replace(settings, seed=seed),
    )


def size_table(reps: int, seed: int) -> None:
    print(
        f"\nSize: share of audited sets with any flag at q = {Q}, no contaminated question ({reps} sets per cell; "
        "at level = within [0.05, q + 2 s.e.])"
    )
    print(f"  {'N':>4} {'C':>3}  {'scores':<9}{'before':>8}{'now':>8}   s.e.  at level")
    se = math.sqrt(Q * (1 - Q) / reps)
    for n in (60, 500):
        for c in (3, 5, 20):
            for kind in KINDS:
                start = time.perf_counter()
                rates = [
                    sum(bool(decide(world(n, c, kind, seed=seed + r), s, r).flagged.any()) for r in range(reps)) / reps
                    for s in (BEFORE, NOW)
                ]
                ok = "yes" if 0.05 <= rates[1] <= Q + 2 * se else "NO"
                print(
                    f"  {n:>4} {c:>3}  {kind:<9}{rates[0]:>8.3f}{rates[1]:>8.3f}  {se:.3f}  {ok:<4} ({time.perf_counter() - start:.0f} s)",
                    flush=True,
                )


def exact_null(c: int, rng: np.random.Generator, size: int = 200_000) -> np.ndarray:
    """Sorted control residuals of Gaussian texts (the null every original's residual follows under H0)."""
    x = texts("gaussian", size // c, c, rng)[:, 1:, 0]
    return np.sort(conformal.control_residuals(np.zeros(len(x)), x).ravel())


def power_table(reps: int, seed: int) -> None:
    print(f"\nPower beside the oracles at q = {Q} (Gaussian scores, one detector; {reps} sets per row)")
    print(
        f"  {'N':>4} {'C':>3} {'share':>6} {'within':>7} {'resid.':>7} {'FDR':>7} {'power':>7} {'exact-null':>11} "
        f"{'ratio':>6} {'labelled':>9} {'exact/lab.':>11} {'at least (cover)':>17}"
    )
    rng = np.random.default_rng(seed)
    for n, c in ((60, 3), (60, 20), (300, 3)):
        null = exact_null(c, rng)
        for within in (0.75, 0.85, 0.95):
            shift = math.sqrt(2) * norm.ppf(within)
            for share in (0.1, 0.5, 1.0):
                fdp, power, oracle, labelled, bounds, covered, aucs = [], [], [], [], [], 0, []
                for r in range(reps):
                    w = world(n, c, share=share, shift=shift, seed=seed + r)
                    d = decide(w, NOW, r)
                    member = w.contaminated
                    flagged = d.flagged
                    fdp.append((flagged & ~member).sum() / max(flagged.sum(), 1))
                    power.append((flagged & member).sum() / member.sum())
                    residual = d.detectors["ppl"].residual * d.detectors["ppl"].scale
                    exact = (len(null) - np.searchsorted(null, residual, side="left") + 1) / (len(null) + 1)
                    oracle.append((conformal.benjamini_hochberg(exact, Q)[0] & member).sum() / member.sum())
                    value = labelled_oracle(d.p_value, member, Q)[0]
                    labelled.append(value)
                    bounds.append(d.at_least)
                    covered += d.at_least <= member.sum()
                    aucs.append(residual_auc(residual[member], null[:: max(1, len(null) // 5000)]))
                ratio = np.mean(power) / np.mean(oracle) if np.mean(oracle) > 0 else math.nan
                shown = "n/a*" if share == 1.0 else f"{np.mean(labelled):.3f}"
                floor = "—" if share == 1.0 or np.mean(labelled) == 0 else f"{np.mean(oracle) / np.mean(labelled):.2f}"
                print(
                    f"  {n:>4} {c:>3} {share:>6.0%} {within:>7.2f} {np.mean(aucs):>7.3f} {np.mean(fdp):>7.3f} {np.mean(power):>7.3f} "
                    f"{np.mean(oracle):>11.3f} {ratio:>6.2f} {shown:>9} {floor:>11} {np.mean(bounds):>9.1f} ({covered / reps:.2f})",
                    flush=True,
                )
    print("  * every threshold has FDP 0 when every question is a member: the labelled oracle is 1 by construction")
    print(
        "  ratio: the decisions' power over the exact-null oracle's (the best Benjamini–Hochberg can do with these residuals);"
        " exact/lab.: the exact-null oracle's over the labelled oracle's — what no procedure without labels closes"
    )


METHODS = ("bh", "two-stage", "storey")


def adaptive_table(reps: int, seed: int) -> None:
    """Plain BH beside the adaptive procedures on the same p-values: realised FDR (mean FDP) and
    power, with a third or half of the questions contaminated and with none (size)."""
    print(
        f"\nAdaptive procedures at q = {Q} on the same decisions' p-values (Gaussian scores, within-AUC 0.85; {reps} sets "
        "per row): realised FDR (at level = ≤ q + 2 s.e.) and power"
    )
    print(f"  {'N':>4} {'C':>3} {'share':>6}" + "".join(f"{m + ' FDR':>15}{'power':>8}" for m in METHODS))
    shift, broken = math.sqrt(2) * norm.ppf(0.85), math.sqrt(2) * norm.ppf(0.64)
    for n, c in ((60, 3), (60, 20), (300, 5)):
        for share in (0.0, 1 / 3, 0.5, "broken"):
            fdp: dict[str, list[float]] = {m: [] for m in METHODS}
            power: dict[str, list[float]] = {m: [] for m in METHODS}
            for r in range(reps):
                if share == "broken":  # the planted fault: a generator biased as v1 was, nothing contaminated
                    w = world(n, c, broken=broken, seed=seed + r)
                else:
                    w = world(n, c, share=share, shift=shift, seed=seed + r) if share else world(n, c, seed=seed + r)
                p_value = decide(w, NOW, r).p_value
                member = w.contaminated if share and share != "broken" else np.zeros(n, dtype=bool)
                for m in METHODS:
                    flagged = conformal.benjamini_hochberg(p_value, Q, m)[0]
                    fdp[m].append((flagged & ~member).sum() / max(flagged.sum(), 1))
                    power[m].append((flagged & member).sum() / member.sum() if member.any() else math.nan)
            cells = ""
            for m in METHODS:
                limit = Q + 2 * np.std(fdp[m]) / math.sqrt(reps)
                mark = "" if np.mean(fdp[m]) <= max(limit, Q) else "!"
                shown = "—" if not share or share == "broken" else f"{np.nanmean(power[m]):.3f}"
                cells += f"{np.mean(fdp[m]):>14.3f}{mark or ' '}{shown:>8}"
            label = share if isinstance(share, str) else f"{share:.0%}"
            print(f"  {n:>4} {c:>3} {label:>6}{cells}", flush=True)
    print(
        "  !: realised FDR above q + 2 s.e. (not at level); broken: a planted fault (a biased generator, H0 false for"
    )
    print("  every question though none is contaminated), which the check must fail")


def broken_table(reps: int, seed: int) -> None:
    shift = math.sqrt(2) * norm.ppf(0.64)
    print(
        f"\nA planted broken null (every original raised to a within-AUC of 0.64, none contaminated; {reps} sets per row): "
        f"the FDR check fails when its realised FDR exceeds q + 2 s.e. = {Q + 2 * math.sqrt(Q * (1 - Q) / reps):.3f}"
    )
    print(f"  {'N':>4} {'C':>3} {'realised FDR':>13} {'check':>7} {'at least > 0':>13}")
    for n, c in ((60, 3), (60, 5), (60, 20), (300, 3), (500, 5)):
        results = [decide(world(n, c, broken=shift, seed=seed + r), NOW, r) for r in range(reps)]
        fdr = np.mean(
            [bool(d.flagged.any()) for d in results]
        )  # every flag is false: FDP is 1 when anything is flagged
        fails = "FAILS" if fdr > Q + 2 * math.sqrt(Q * (1 - Q) / reps) else "passes"
        print(
            f"  {n:>4} {c:>3} {fdr:>13.3f} {fails:>7} {np.mean([d.at_least > 0 for d in results]):>13.3f}", flush=True
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--only", default="size,power,adaptive,broken", help="comma-separated: size, power, adaptive, broken"
    )
    args = parser.parse_args()
    parts = {p.strip() for p in args.only.split(",")}
    start = time.perf_counter()
    if "size" in parts:
        size_table(args.reps, args.seed)
    if "power" in parts:
        power_table(max(50, args.reps // 4), args.seed)
    if "adaptive" in parts:
        adaptive_table(max(100, args.reps // 2), args.seed)
    if "broken" in parts:
        broken_table(max(50, args.reps // 2), args.seed)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
