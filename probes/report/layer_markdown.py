"""``report.md``'s layer analysis: the window table, and every per-layer figure beside the nulls it
is read against (SPEC §4.5 item 5): the max-|d| permutation null, the placebo on random halves of
the non-members, the reference checkpoint's map and the depth-profile contrast, the control set."""

from __future__ import annotations

from typing import Any

from .markdown_figures import p_text as _p

NONE_SURVIVES = "no layer beyond the permutation null"


def layers_markdown(layers: dict[str, Any]) -> list[str]:
    """The ``## Layer analysis`` section of a report's ``layers`` record."""
    lines = ["## Layer analysis", ""]
    left_out = layers.get("n_nonfinite") or {}
    if sum(left_out.values()):
        lines += [
            f"Left out: {left_out['members']} member(s) and {left_out['non_members']} non-member(s) whose metrics "
            "are not finite (see the metrics file's reasons).",
            "",
        ]
    if layers.get("control_set"):
        lines += _control_set(layers["control_set"])
    if "error" in layers:
        return lines + [layers["error"], ""]
    if layers.get("null"):
        lines += _per_layer(layers)
    lines += _windows(layers)
    if layers.get("placebo_split"):
        lines += _placebo_split(layers["placebo_split"])
    if layers.get("reference"):
        lines += _reference(layers["reference"], layers["metric_names"])
    return lines


def survivors(null: dict[str, Any]) -> str:
    """``"layers 2, 4 survive …"`` or ``"no layer beyond the permutation null"``."""
    found = null["significant_layers"]
    if not found:
        return NONE_SURVIVES
    return f"layer{'s' if len(found) > 1 else ''} {', '.join(found)} beyond the permutation null (family-wise α = {null['alpha']:g})"


def _per_layer(layers: dict[str, Any]) -> list[str]:
    null, names = layers["null"], layers["metric_names"]
    lines = [
        f"Cohen's d (members − non-members) per layer of sign(m)·log(1+|m|), {layers['members']} members, "
        f"{layers['non_members']} non-members, each with its family-wise-adjusted p (max-|d| permutation null: "
        f"{null['n_permutations']} label permutations, {null['permutation']}); ✱ = the layer survives:",
        "",
        "| Layer | " + " | ".join(names) + " | layer p |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for j, label in enumerate(layers["layer_labels"]):
        cells = [f"{_d(null['d'][m][j])} (p {_p(null['p_adjusted'][m][j])})" for m in names]
        mark = " ✱" if label in null["significant_layers"] else ""
        lines.append(f"| {label}{mark} | " + " | ".join(cells) + f" | {_p(null['p_layer'][j])} |")
    found = survivors(null)
    lines += [
        "",
        f"**{found[0].upper() + found[1:]}.** The largest |d| of the map is "
        f"{null['observed_max']:.2f} (p = {_p(null['p_global'])}); under the null the 95th percentile of that "
        f"maximum is {null['null_max']:.2f}: any cell below it is what {layers['n']} questions show by chance.",
        "",
    ]
    return lines


def _windows(layers: dict[str, Any]) -> list[str]:
    windows = layers.get("windows") or {}
    if not windows:
        return []
    names = list(windows)
    header = " | ".join(f"{w} ({windows[w]['layers'][0]}–{windows[w]['layers'][-1]})" for w in names)
    lines = [
        f"Cohen's d (members − non-members) of the window mean of sign(m)·log(1+|m|), {layers['members']} members, "
        f"{layers['non_members']} non-members (levels: read them against the null above):",
        "",
        f"| Metric | {header} |",
        "|---|" + "---|" * len(names),
    ]
    for metric in layers["metric_names"]:
        cells = []
        for w in names:
            fig = windows[w]["cohens_d"][metric]
            cells.append(
                _d(fig["value"]) + ("" if fig["ci"][0] is None else f" [{_d(fig['ci'][0])}, {_d(fig['ci'][1])}]")
            )
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    return lines + [""]


def _placebo_split(split: dict[str, Any]) -> list[str]:
    return [
        f"Placebo (random halves of the {split['n']} non-members, {split['n_splits']} splits, the same map): "
        f"a layer reads significant in {100 * split['any_significant_rate']:.0f} % of the splits (a null reads ≈ "
        f"{100 * split['alpha']:g} %); their largest |d| has median {split['observed_max_median']:.2f} — the level a "
        "map of noise reaches with these numbers.",
        "",
    ]


def _reference(ref: dict[str, Any], names: list[str]) -> list[str]:
    if "error" in ref:
        return [f"Reference checkpoint: {ref['error']}.", ""]
    placebo, contrast = ref["placebo"], ref["contrast"]
    lines = [
        f"Placebo (the reference checkpoint before RL, the same {ref['n']} questions): {survivors(placebo)}, "
        f"largest |d| {placebo['observed_max']:.2f} (p = {_p(placebo['p_global'])}). Depth-profile contrast — the map of "
        f"per-question differences audited − reference, which asks whether RL moved members' metrics differently "
        f"from non-members': {survivors(contrast)}, largest |d| {contrast['observed_max']:.2f} "
        f"(p = {_p(contrast['p_global'])}).",
        "",
        "| Layer | " + " | ".join(f"{m}: audited − placebo d" for m in names) + " | contrast p |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for j, label in enumerate(contrast["layer_labels"]):
        cells = [_d(ref["audited_minus_placebo"][m][j]) for m in names]
        mark = " ✱" if label in contrast["significant_layers"] else ""
        lines.append(f"| {label}{mark} | " + " | ".join(cells) + f" | {_p(contrast['p_layer'][j])} |")
    if ref.get("n_missing"):
        lines.append(f"\n{ref['n_missing']} question(s) without finite reference metrics are left out of this table.")
    return lines + [""]


def _control_set(control: dict[str, Any]) -> list[str]:
    ratio = control["ratio"]
    text = (
        f"Clean reference of the LaRA scores: {control['n_reference']} questions for {control['n_audited']} audited "
        + (f"({ratio:.2f}×)." if ratio is not None else ".")
    )
    if control.get("warning"):
        text += f" **Warning:** {control['warning']}."
    return [text, ""]


def _d(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x:+.2f}"
