"""Evaluation of detector scores against membership labels (SPEC §7).

>>> from probes.evaluation import evaluate, compare
>>> r = evaluate(labels, scores)           # labels [n] 1 = member; scores [n], higher = member
>>> r["auc"]["value"], r["auc"]["ci"]      # ROC-AUC and its stratified-bootstrap 95 % CI
>>> compare(labels, scores_a, scores_b)    # ΔAUC with paired-bootstrap CI and DeLong's test

Every figure comes as ``{"value": x, "ci": [lo, hi], "n": n_used}``. Non-finite scores are
never dropped silently: they are counted (``n_nonfinite``) and the figures use the finite rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, blocks, percentile_ci, stratified_indices
from .delong import delong_test
from .roc import RocPoints, auc, roc_points, tpr_at_fpr, youden

__all__ = [
    "LOW_FPRS",
    "RESOLVING_FACTOR",
    "compare",
    "evaluate",
    "figures",
    "tpr_key",
    "auc",
    "roc_points",
    "tpr_at_fpr",
    "youden",
    "delong_test",
    "RocPoints",
    "realised_point",
]

LOW_FPRS = (0.01, 0.001)  # SPEC §7: TPR at 1 % and 0.1 % FPR beside the main rate (DIBA's headline figure)
RESOLVING_FACTOR = 10  # SPEC §7: a rate FPR is resolvable from 10/FPR non-members (benchmarks/bench_low_fpr.py)


def tpr_key(fpr: float = 0.05) -> str:
    """Name of the TPR@FPR figure: ``tpr_at_5fpr`` for 5 %, ``tpr_at_0p1fpr`` for 0.1 %."""
    return f"tpr_at_{100 * fpr:g}fpr".replace(".", "p")


def figures(labels: np.ndarray, scores: np.ndarray, fpr: float = 0.05, strict: bool = False) -> dict[str, np.ndarray]:
    """Point figures of each row of ``labels``/``scores`` [B, n] (finite scores): ``[B]`` arrays
    ``auc``, ``tpr_at_fpr``, ``f1_youden``, ``accuracy_youden``, ``youden_threshold``, and
    ``tpr_key(f)`` for each low rate f of :data:`LOW_FPRS`."""
    points = roc_points(labels, scores)
    point = youden(points)
    return {
        "auc": auc(points),
        "tpr_at_fpr": tpr_at_fpr(points, fpr, strict),
        "f1_youden": point.f1,
        "accuracy_youden": point.accuracy,
        "youden_threshold": point.threshold,
        **{tpr_key(low): tpr_at_fpr(points, low, strict) for low in LOW_FPRS},
    }


def evaluate(
    labels: Any,
    scores: Any,
    *,
    n_bootstrap: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    ci: float = 0.95,
    fpr: float = 0.05,
    strict: bool = False,
) -> dict[str, Any]:
    """ROC-AUC, TPR@FPR, and F1/accuracy at the Youden threshold, each with a stratified-bootstrap CI.

    Args:
        labels: ``[n]`` 1/True = member, 0/False = non-member.
        scores: ``[n]`` detector scores, higher = member; NaN/inf are counted and left out.
        n_bootstrap: resamples (members and non-members resampled separately); 0 = no CIs.
        seed: seed of the resampling.
        ci: confidence level of the percentile intervals.
        fpr: the false-positive rate of the TPR figure.
        strict: TPR among points with FPR < ``fpr`` instead of ≤.

    Returns:
        ``{"auc", tpr_key(fpr), "f1_youden", "accuracy_youden": {"value", "ci", "n"},
        "youden_threshold": {"value"}, "n", "n_used", "n_nonfinite", "n_members", "n_non_members",
        "low_fpr", "settings"}``; ``low_fpr`` maps ``tpr_key(f)`` of each rate of :data:`LOW_FPRS`
        to its figure, or, with fewer than 10/f non-members (10/f + 1 when ``strict``), to
        ``{"value": None, "resolvable": False, "why": …, "at_realised_fpr": {"fpr", "tpr"}}``:
        not a figure (at 1/f the point is ~45 % too high and its "95 %" CI covers 75–80 %,
        ``benchmarks/bench_low_fpr.py``), only the realised FPR of the threshold the TPR@f rule
        picks on these data and the TPR there (e.g. FPR 0.0: the "1 %" point is a 0 % point).
    """
    y, s = _check(labels, scores)
    finite = np.isfinite(s)
    y_used, s_used = y[finite], s[finite]
    n_pos, n_neg = int(y_used.sum()), int((~y_used).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(
            f"evaluation needs members and non-members with finite scores; have {n_pos} member(s) and {n_neg} "
            f"non-member(s) ({int((~finite).sum())} non-finite score(s) left out)"
        )
    point = {k: float(v[0]) for k, v in figures(y_used[None], s_used[None], fpr, strict).items()}
    points = roc_points(y_used[None], s_used[None])
    boot = _bootstrap(y_used, s_used, n_bootstrap, seed, fpr, strict)
    n_used = len(s_used)

    def figure(name: str) -> dict[str, Any]:
        lo, hi = percentile_ci(boot[name], ci) if n_bootstrap else (float("nan"), float("nan"))
        return {"value": point[name], "ci": [lo, hi], "n": n_used}

    return {
        "auc": figure("auc"),
        tpr_key(fpr): figure("tpr_at_fpr"),
        "low_fpr": {tpr_key(low): _low_rate(figure, points, low, n_used, strict) for low in LOW_FPRS},
        "f1_youden": figure("f1_youden"),
        "accuracy_youden": figure("accuracy_youden"),
        "youden_threshold": {"value": point["youden_threshold"], "n": n_used},
        "n": len(s),
        "n_used": n_used,
        "n_nonfinite": int((~finite).sum()),
        "n_members": n_pos,
        "n_non_members": n_neg,
        "settings": {
            "n_bootstrap": n_bootstrap,
            "seed": seed,
            "ci": ci,
            "fpr": fpr,
            "strict": strict,
            "bootstrap": "stratified percentile",
        },
    }


def compare(
    labels: Any,
    scores_a: Any,
    scores_b: Any,
    *,
    n_bootstrap: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    ci: float = 0.95,
) -> dict[str, Any]:
    """Paired comparison of two detectors on the same samples: ΔAUC = AUC(a) − AUC(b) with a
    paired stratified-bootstrap CI, and DeLong's test. Samples where either score is non-finite
    are left out (counted)."""
    y, a = _check(labels, scores_a)
    _, b = _check(labels, scores_b)
    both = np.isfinite(a) & np.isfinite(b)
    y, a, b = y[both], a[both], b[both]
    if y.all() or not y.any():
        raise ValueError(
            f"a paired comparison needs members and non-members with both scores finite; {int(both.sum())} sample(s) have both"
        )
    test = delong_test(y, a, b)
    rng = np.random.default_rng(seed)
    deltas = []
    for size in blocks(n_bootstrap, 2 * len(y)):
        idx = stratified_indices(y, size, rng)
        yb = y[idx]
        deltas.append(auc(roc_points(yb, a[idx])) - auc(roc_points(yb, b[idx])))
    lo, hi = percentile_ci(np.concatenate(deltas), ci) if deltas else (float("nan"), float("nan"))
    return {
        "delta_auc": {"value": test["delta"], "ci": [lo, hi], "n": int(len(y))},
        "auc_a": test["auc_a"],
        "auc_b": test["auc_b"],
        "delong": {"z": test["z"], "p_value": test["p_value"], "se": test["se"]},
        "n_left_out": int((~both).sum()),
        "settings": {"n_bootstrap": n_bootstrap, "seed": seed, "ci": ci},
    }


def _low_rate(figure: Any, points: RocPoints, fpr: float, n_used: int, strict: bool) -> dict[str, Any]:
    """TPR at a low FPR with its CI, or "not resolvable" with fewer than 10/FPR non-members (SPEC
    §7; one more when ``strict``, as with exactly 10/FPR the tenth false positive is excluded)."""
    n_neg = int(points.n_neg[0])
    needed = int(round(RESOLVING_FACTOR / fpr)) + int(strict)
    if n_neg < needed:
        realised = realised_point(points, fpr, strict)
        return {
            "value": None,
            "ci": [None, None],
            "n": n_used,
            "fpr": fpr,
            "resolvable": False,
            "why": f"{n_neg} non-members: at least {needed} ({RESOLVING_FACTOR}/FPR) are needed to resolve FPR = "
            f"{100 * fpr:g}%; the threshold the rule picks here has a realised FPR of {100 * realised['fpr']:.3g}%",
            "at_realised_fpr": realised,
        }
    return {**figure(tpr_key(fpr)), "fpr": fpr, "resolvable": True}


def realised_point(points: RocPoints, fpr: float, strict: bool = False) -> dict[str, float]:
    """The ROC point of the TPR@``fpr`` rule on the first dataset of ``points``: its TPR (the largest
    among points with FPR ≤ ``fpr``, < when ``strict``) and the FPR it really has (the smallest FPR
    reaching that TPR, i.e. the highest threshold that does)."""
    rates, tprs = points.fpr[0], points.tpr[0]
    allowed = rates < fpr if strict else rates <= fpr  # (0, 0) always is
    tpr = float(tprs[allowed].max())
    return {"fpr": float(rates[allowed & (tprs == tpr)].min()), "tpr": tpr}


def _bootstrap(
    y: np.ndarray, s: np.ndarray, n_resamples: int, seed: int, fpr: float, strict: bool
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    parts: list[dict[str, np.ndarray]] = []
    for size in blocks(n_resamples, len(y)):
        idx = stratified_indices(y, size, rng)
        parts.append(figures(y[idx], s[idx], fpr, strict))
    if not parts:
        return {}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _check(labels: Any, scores: Any) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"labels and scores must be two [n] arrays of one length; got {y.shape} and {s.shape}")
    values = set(np.unique(y).tolist())
    if not values <= {0, 1}:
        raise ValueError(f"labels must be 1 (member) or 0 (non-member); found {sorted(values, key=str)[:5]}")
    return y.astype(bool), s
