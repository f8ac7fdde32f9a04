"""``report.md``: the report as Markdown, the detection table in the layout of the LaRA seed's
Table 1 (rows = detectors; columns ROC-AUC, F1, TPR@FPR=5 %, each with its 95 % CI)."""

from __future__ import annotations

from typing import Any

from .drift_markdown import drift_markdown
from .flagged import flagged_markdown
from .layer_markdown import layers_markdown
from .markdown_figures import p_text as _p
from .verdict_text import verdict_markdown

PLOTS = (
    ("verdict.png", "Verdict: within-AUC per detector, mode and subset"),
    ("roc.png", "ROC curves"),
    ("scores.png", "Score distributions"),
    ("profiles.png", "Per-layer metric profiles, members vs non-members"),
    ("cohens_d.png", "Cohen's d per metric and layer"),
)


def render_markdown(report: dict[str, Any], plots: list[str] | tuple[str, ...] = ()) -> str:
    """Markdown text of a report built by :func:`probes.report.build.build_report`."""
    lines = ["# LaRA Probes report", "", *summary_lines(report, plots)]
    if report["mode"] != "audit":
        lines += _comparisons(report)
        if "layers" in report:
            lines += layers_markdown(report["layers"])
        if "drift" in report:
            lines += drift_markdown(report["drift"])
    shown = [(f, t) for f, t in PLOTS if f in plots and f != "verdict.png"]
    if shown:
        lines += ["## Plots", ""]
        lines += [f"![{title}]({name})" for name, title in shown]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def summary_lines(report: dict[str, Any], plots: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The report's head: its inputs, the verdict and the questions it names, then the detection
    table (or the score audit) — what ``lara run`` prints of each model (:func:`render_summary`)."""
    lines = []
    inputs = report.get("inputs") or {}
    if inputs:
        lines += [", ".join(f"{k}: `{v}`" for k, v in inputs.items() if v), ""]
    if report.get("verdict"):
        lines += verdict_markdown(report["verdict"])
        if "verdict.png" in plots:
            lines += ["![Verdict: within-AUC per detector, mode and subset](verdict.png)", ""]
        verdict = report["verdict"]
        lines += flagged_markdown(verdict.get("questions"), report.get("texts"), rejected=bool(verdict.get("reject")))
    return lines + (_audit(report) if report["mode"] == "audit" else _detection(report, report["settings"]))


def render_summary(report: dict[str, Any]) -> str:
    """:func:`summary_lines` as text, from the report's data (``report.json``), without its figures."""
    return "\n".join(summary_lines(report)).strip()


def _detection(report: dict[str, Any], s: dict[str, Any]) -> list[str]:
    c = report["counts"]
    pct = f"{100 * s['fpr']:g}%"
    lines = [
        f"{c['members']} members and {c['non_members']} non-members"
        + (f"; {c['unlabelled']} scored question(s) without a label left out" if c.get("unlabelled") else "")
        + (f"; {c['not_scored']} labelled question(s) have no score row" if c.get("not_scored") else "")
        + ".",
        "",
        "## Detection",
        "",
        f"| Method | ROC-AUC | F1 | TPR@FPR={pct} | TPR@1% | TPR@0.1% | n (non-finite) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in report["detectors_order"]:
        r = report["detectors"][name]
        if "error" in r:
            lines.append(f"| {name} | – | – | – | – | – | {r['n']} ({r['n_nonfinite']}): {r['error']} |")
            continue
        if "not_applicable" in r:  # constant by construction: no figure (SPEC §7)
            lines.append(
                f"| {name} | n/a ({r['not_applicable']}) | n/a | n/a | n/a | n/a | {r['n']} ({r['n_nonfinite']}) |"
            )
            continue
        low = [_low(r.get("low_fpr", {}).get(k)) for k in ("tpr_at_1fpr", "tpr_at_0p1fpr")]
        lines.append(
            f"| {name} | {_fig(r['auc'])} | {_fig(r['f1_youden'])} | {_fig(r[s['tpr_key']])} | {low[0]} | {low[1]} "
            f"| {r['n']} ({r['n_nonfinite']}) |"
        )
    blind = report.get("blind") or {}
    if "auc" in blind:
        lines.append(f"| {blind['name']} | {_fig(blind['auc'])} | – | – | – | – | {blind['auc']['n']} (0) |")
    op = "<" if s["strict"] else "≤"
    lines += [
        "",
        f"Values with {100 * s['ci']:g}% CIs from a stratified bootstrap ({s['n_bootstrap']} resamples, seed {s['seed']}, "
        f"percentile intervals). Members are positive and higher scores mean member. TPR@FPR={pct} is the largest TPR "
        f"among ROC points with FPR {op} {pct}, and so are TPR@1% and TPR@0.1% (DIBA's low false-positive rates): a rate "
        "needs at least 10/FPR non-members to be resolved (at 1/FPR the point is ~45 % too high and its 95% CI covers "
        "75–80 %: benchmarks/bench_low_fpr.py) and reads *not resolvable* with fewer, beside the FPR that the rule's threshold really has on "
        "these data (0% means the point holds no false positive at all). F1 is taken at the Youden "
        "threshold (max TPR − FPR), chosen on these same samples, so it is optimistic. Non-finite scores are left out of a "
        "detector's figures and counted.",
        "",
    ]
    if any("not_applicable" in report["detectors"][n] for n in report["detectors_order"]):
        lines += [
            "*n/a*: the scores are constant by construction, so no AUC, TPR or F1 means anything and the row is "
            "left out of any count (*self-reference*: the audited model is the reference model the detector compares "
            "with, every score 0; *constant*: every finite score the same).",
            "",
        ]
    if "auc" in blind:
        lines += _blind(blind)
    return lines


def _blind(blind: dict[str, Any]) -> list[str]:
    """The blind baseline's reading against its within-group swap null (SPEC §8.8)."""
    null = blind.get("null") or {}
    against = (
        f" Its null under label swaps within matched groups ({null['groups']}: {null['n_mixed_groups']} groups "
        f"holding both labels, {null['n_in_mixed_groups']} of {blind['auc']['n']} questions; "
        f"{null['n_permutations']} swaps, the same folds) has median {null['median']:.2f} and 95th percentile "
        f"{null['q95']:.2f}; the observed {blind['auc']['value']:.2f} has p = {null['p']:.3f}."
        if null
        else ""
    )
    if blind.get("warning"):
        return [f"**Warning:** {blind['warning']}.{against}", ""]
    text = (
        "The blind baseline (the question text alone, " + blind["features"] + ", out-of-fold) does not separate the "
        "sets beyond what the design explains: no confound visible from the text." + against
    )
    if blind.get("matched_design"):
        text += (
            " In a matched design (each member paired with a non-member of its own kind) the cross-validation "
            "itself reads below 0.5, which is why the null, not 0.5, is the yardstick."
        )
    return [text, ""]


def _comparisons(report: dict[str, Any]) -> list[str]:
    comp = report.get("comparisons") or {}
    against = comp.get("against") or {}
    if comp.get("not_applicable"):
        return [f"## Paired comparison with `{comp['baseline']}`", "", f"n/a ({comp['not_applicable']}).", ""]
    if not against:
        return []
    lines = [
        f"## Paired comparison with `{comp['baseline']}`",
        "",
        "| Method | ΔAUC (method − baseline) | DeLong z | p | n |",
        "|---|---|---|---|---|",
    ]
    for name, r in against.items():
        if "error" in r:
            lines.append(f"| {name} | – | – | – | {r['error']} |")
            continue
        if "not_applicable" in r:
            lines.append(f"| {name} | n/a ({r['not_applicable']}) | – | – | – |")
            continue
        lines.append(
            f"| {name} | {_fig(r['delta_auc'], signed=True)} | {_num(r['delong']['z'])} | "
            f"{_p(r['delong']['p_value'])} | {r['delta_auc']['n']} |"
        )
    lines += ["", "ΔAUC CIs by a paired stratified bootstrap; p from DeLong's test (two-sided).", ""]
    return lines


def _audit(report: dict[str, Any]) -> list[str]:
    lines = [
        f"Audit without labels: {report['counts']['n_scored']} scored questions; score distributions only.",
        "",
        "| Score | n (non-finite) | mean | 5% | median | 95% |",
        "|---|---|---|---|---|---|",
    ]
    for name in report["detectors_order"]:
        d = report["distributions"][name]
        q = d.get("quantiles") or {}
        lines.append(
            f"| {name} | {d['n']} ({d['n_nonfinite']}) | {_num(d.get('mean'))} | {_num(q.get('0.05'))} | "
            f"{_num(q.get('0.5'))} | {_num(q.get('0.95'))} |"
        )
    return lines + [""]


def _fig(fig: dict[str, Any], signed: bool = False) -> str:
    value, (lo, hi) = fig["value"], fig["ci"]
    fmt = "{:+.2f}" if signed else "{:.2f}"
    if value is None:
        return "–"
    text = fmt.format(value)
    if lo is None or hi is None or lo != lo or hi != hi:
        return text
    return f"{text} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _low(fig: dict[str, Any] | None) -> str:
    """A low-FPR rate: its figure, or *not resolvable* with too few non-members (with the realised
    FPR of the rule's threshold, never its TPR as a bare number)."""
    if fig is None:
        return "–"
    if fig.get("resolvable", True):
        return _fig(fig)
    realised = (fig.get("at_realised_fpr") or {}).get("fpr")
    return "not resolvable" if realised is None else f"not resolvable (realised FPR {100 * realised:.2g}%)"


def _num(x: Any) -> str:
    return "–" if x is None or x != x else f"{x:.3g}"
