"""How many non-members a TPR at a low FPR needs (SPEC §7, finding 6): bias of the point and
coverage of its "95 %" bootstrap CI, measured by simulation.

    python benchmarks/bench_low_fpr.py [--datasets 200] [--bootstrap 200] [--members equal|N] [--seed 0]

Binormal scores with ROC-AUC 0.80: non-members N(0, 1), members N(μ, 1), μ = √2·Φ⁻¹(0.8), so the
true TPR at FPR f is 1 − Φ(Φ⁻¹(1 − f) − μ). For f ∈ {1 %, 0.1 %} and 1/f, 2/f and 10/f
non-members (members: as many, or ``--members N``), each of ``--datasets`` datasets is evaluated by
``probes.evaluation.evaluate(..., fpr=f)`` (the same rule and stratified percentile bootstrap as the
report's TPR@1 % and TPR@0.1 %). Per cell: the mean point estimate, its bias, and how often the
95 % CI covers the true TPR (Monte Carlo SE ≈ 0.015 at 200 datasets). A cell passes at coverage
≥ 0.90 and a bias within 10 % of the true TPR. The rows at 1/f are expected to fail: that is why
the report calls a rate resolvable only from 10/f non-members (the last column says what
``evaluate`` reports at that size).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probes.evaluation import evaluate, tpr_key  # noqa: E402

AUC = 0.80
MU = math.sqrt(2) * NormalDist().inv_cdf(AUC)  # binormal, unit variances: AUC = Φ(μ/√2)
FPRS = (0.01, 0.001)
FACTORS = (1, 2, 10)  # non-members = factor / FPR
PASS_COVERAGE = 0.90
PASS_RELATIVE_BIAS = 0.10


def true_tpr(fpr: float, mu: float = MU) -> float:
    """TPR at ``fpr`` of the binormal model: 1 − Φ(Φ⁻¹(1 − fpr) − μ)."""
    return 1 - NormalDist().cdf(NormalDist().inv_cdf(1 - fpr) - mu)


def cell(fpr: float, n_non: int, n_members: int, datasets: int, n_bootstrap: int, seed: int) -> dict[str, float]:
    """Mean estimate, bias, CI coverage and width of TPR@``fpr`` over ``datasets`` simulated datasets."""
    truth = true_tpr(fpr)
    y = np.r_[np.ones(n_members, bool), np.zeros(n_non, bool)]
    values, covered, widths = [], [], []
    resolvable = None
    for d in range(datasets):
        rng = np.random.default_rng([seed, n_non, d])
        s = rng.normal(size=len(y)) + MU * y
        r = evaluate(y, s, n_bootstrap=n_bootstrap, seed=d, fpr=fpr)
        fig = r[tpr_key(fpr)]
        lo, hi = fig["ci"]
        values.append(fig["value"])
        covered.append(lo <= truth <= hi)
        widths.append(hi - lo)
        resolvable = r["low_fpr"][tpr_key(fpr)]["resolvable"]
    mean = float(np.mean(values))
    return {
        "truth": truth,
        "mean": mean,
        "bias": mean - truth,
        "coverage": float(np.mean(covered)),
        "width": float(np.mean(widths)),
        "resolvable": bool(resolvable),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=int, default=200, help="simulated datasets per cell (default 200)")
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples per dataset (default 200)")
    parser.add_argument("--members", default="equal", help="'equal' (as many as non-members) or a fixed number")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(
        f"Binormal scores, AUC {AUC:.2f} (mu = {MU:.3f}); {args.datasets} datasets per cell, {args.bootstrap} "
        f"stratified bootstrap resamples, 95 % percentile CI; members: {args.members}; pass: coverage >= {PASS_COVERAGE} "
        f"and |bias| <= {PASS_RELATIVE_BIAS:.0%} of the true TPR"
    )
    print(
        f"{'FPR':>6} {'non-m.':>7} {'members':>8} {'true TPR':>9} {'mean est.':>10} {'bias':>8} {'rel.':>7} "
        f"{'coverage':>9} {'CI width':>9} {'':<19} evaluate reports"
    )
    for fpr in FPRS:
        for factor in FACTORS:
            n_non = int(round(factor / fpr))
            n_members = n_non if args.members == "equal" else int(args.members)
            tick = time.perf_counter()
            c = cell(fpr, n_non, n_members, args.datasets, args.bootstrap, args.seed)
            failed = [
                what
                for what, bad in (
                    ("coverage", c["coverage"] < PASS_COVERAGE),
                    ("bias", abs(c["bias"]) > PASS_RELATIVE_BIAS * c["truth"]),
                )
                if bad
            ]
            verdict = "FAIL: " + "+".join(failed) if failed else "pass"
            shown = "the figure" if c["resolvable"] else "not resolvable"
            print(
                f"{100 * fpr:>5g}% {n_non:>7} {n_members:>8} {c['truth']:>9.3f} {c['mean']:>10.3f} {c['bias']:>+8.3f} "
                f"{c['bias'] / c['truth']:>+7.0%} {c['coverage']:>9.2f} {c['width']:>9.3f} {verdict:<19} {shown} "
                f"({factor}/FPR; {time.perf_counter() - tick:.0f} s)"
            )
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
