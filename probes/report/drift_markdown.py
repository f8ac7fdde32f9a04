"""``report.md``'s representation-drift section (SPEC §10): per layer, how far RL moved the
questions' pooled vectors (1 − cos of the audited model's and the reference's), members against
non-members, read against the same nulls as LaRA's layer map above it."""

from __future__ import annotations

from typing import Any

from .layer_markdown import _d, survivors
from .markdown_figures import p_text as _p

HEADING = "## Representation drift (audited vs reference)"


def drift_markdown(drift: dict[str, Any]) -> list[str]:
    """The drift section of a report's ``drift`` record (:func:`probes.lara.drift.store_drift_map`)."""
    lines = [HEADING, ""]
    left = _left_out(drift)
    if left:
        lines += [left, ""]
    if "error" in drift:
        return lines + [f"No drift map: {drift['error']}.", ""]
    lines += [
        f"1 − cos of the two models' mean-pooled vectors of each question, {drift['members']} members, "
        f"{drift['non_members']} non-members; Cohen's d (members − non-members) with its family-wise-adjusted p "
        f"(max-|d| permutation null: {drift['n_permutations']} label permutations, {drift['permutation']}); "
        "✱ = the layer survives:",
        "",
        "| Layer | members' drift | non-members' drift | d | AUC | layer p |",
        "|---|---|---|---|---|---|",
    ]
    means = drift["mean_drift"]
    for j, label in enumerate(drift["layer_labels"]):
        mark = " ✱" if label in drift["significant_layers"] else ""
        lines.append(
            f"| {label}{mark} | {_x(means['members'][j])} | {_x(means['non_members'][j])} | {_d(drift['d'][j])} | "
            f"{_a(drift['auc'][j])} | {_p(drift['p_layer'][j])} |"
        )
    found = survivors(drift)
    lines += [
        "",
        f"**{found[0].upper() + found[1:]}.** The largest |d| of the map is {drift['observed_max']:.2f} "
        f"(p = {_p(drift['p_global'])}); under the null the 95th percentile of that maximum is {drift['null_max']:.2f}.",
        "",
    ]
    placebo = drift.get("placebo")
    if placebo:
        lines += [
            f"Placebo (random halves of the {placebo['n']} non-members, {placebo['n_splits']} splits, the same map): "
            f"a layer reads significant in {100 * placebo['any_significant_rate']:.0f} % of the splits (a null reads ≈ "
            f"{100 * drift['alpha']:g} %); their largest |d| has median {placebo['observed_max_median']:.2f}.",
            "",
        ]
    else:
        lines += ["No placebo: it halves the non-members, and fewer than 4 are here.", ""]
    return lines


def _left_out(drift: dict[str, Any]) -> str:
    parts = []
    if drift.get("not_in_stores"):
        parts.append(f"{drift['not_in_stores']} labelled question(s) missing from an activation store")
    if drift.get("no_text"):
        parts.append(f"{drift['no_text']} labelled id(s) without a text")
    left = drift.get("left_out") or {}
    if sum(left.values()):
        parts.append(
            f"{left['members']} member(s) and {left['non_members']} non-member(s) with a non-finite drift (a zero vector)"
        )
    return ("Left out: " + "; ".join(parts) + ".") if parts else ""


def _x(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x:.4f}"


def _a(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x:.3f}"
