"""The verdict in words (SPEC §8): the text ``lara run`` and ``lara verdict`` print first and the
report's "Verdict" section, from the numbers :mod:`probes.verdicts` returns. Importing it pulls
no statistics library."""

from __future__ import annotations

import math
from typing import Any

from ..accuracy.table import accuracy_markdown, accuracy_sentence
from ..verdicts.coverage import coverage_lines
from .flagged import FDR_METHODS, FLAGGED_UNREJECTED

VALIDATED_ON = (
    "known only where the generator was validated: 0.045–0.050 on our two testbeds; on a third testbed of 45 "
    "templates of its own a clean checkpoint read within-AUC 0.63–0.65 and was rejected at p = 0.0002"
)


def describe_verdict(verdict: dict[str, Any], title: str = "Verdict") -> str:
    """The verdict as text (printed first by ``lara run`` and ``lara verdict``): the headline, one
    line per detector with the questions it used and those it left out, the other modes, the
    subsets, the warnings."""
    is_reference = verdict.get("is_reference", False)  # the run's reference audited: it cannot be its own
    lines = [f"{title}: {_headline(verdict, is_reference)}"]
    lines += [f"  {line}" for line in _detector_lines(verdict)] if verdict["detectors"] else []
    others = [m for m in verdict["modes"] if m != verdict["mode"]]
    for mode in others:
        m = verdict["modes"][mode]
        lines.append(
            f"  also {mode} mode{' (uncalibrated, a diagnostic)' if mode == 'absolute' else ''}: "
            f"{'reject' if m['reject'] else 'not rejected'}, combined {p_sentence(m['combined']['p_value'])}"
        )
        if mode == "absolute":
            lines.append(f"    {absolute_size_text(verdict)}")
    for mode, why in (verdict.get("unavailable") or {}).items():
        lines.append(f"  {mode} mode unavailable: {why}")
    for name, sub in (verdict.get("subsets") or {}).items():
        lines.append(f"  subset {name} ({sub['n']} questions): {_headline(sub, is_reference)}{_left_out_note(sub)}")
    lines += [f"  warning: {w}" for w in verdict.get("warnings", [])]
    lines += [f"  note: {n}" for n in verdict.get("notes", [])]
    if verdict.get("coverage"):
        lines.append("  what the questions allowed:")
        lines += [f"    {line}" for line in coverage_lines(verdict["coverage"])]
    if "questions" in verdict:
        lines.append(f"  {describe_questions(verdict['questions'], rejected=bool(verdict.get('reject')))}")
    if verdict.get("accuracy"):
        lines.append(f"  {accuracy_sentence(verdict['accuracy'])}")
    return "\n".join(lines)


def decided(verdict: dict[str, Any]) -> bool:
    """Whether a mode decided (False: *no verdict*, which is not a negative answer)."""
    return verdict.get("mode") is not None


def _headline(v: dict[str, Any], is_reference: bool = False) -> str:
    if not decided(v):
        return "NO VERDICT (no mode has a detector with a usable question; not a negative answer)"
    c = v["combined"]
    test = f"{c['method']} {p_sentence(c['p_value'])} over {', '.join(c['detectors']) or 'no detector'}"
    if not v["calibrated"]:  # the absolute mode decides: no reference, no clean set
        return (
            f"{NO_CALIBRATED_REFERENCE if is_reference else NO_CALIBRATED_VERDICT}; the absolute mode, a diagnostic only: {_signal(v)} at alpha = "
            f"{v['alpha']:g} ({test}; its size is {VALIDATED_ON})"
        )
    left = f"; left out, no information: {', '.join(c['left_out'])}" if c.get("left_out") else ""
    left += (
        f"; left out, not calibrated by the reference: {', '.join(c['not_calibrated'])}"
        if c.get("not_calibrated")
        else ""
    )
    return f"{verdict_word(v)} at alpha = {v['alpha']:g} ({v['mode']} mode; {test}{left})"


def _signal(v: dict[str, Any]) -> str:
    """An uncalibrated (absolute-mode) outcome, which is never a verdict."""
    return "signal" if v["reject"] else "no signal"


NO_CALIBRATED_VERDICT = (
    "NO CALIBRATED VERDICT — give the checkpoint before RL (a reference model) or a clean set drawn like "
    "the audited questions (split clean_ref; a few dozen known-clean questions also measure the absolute "
    "mode's size on questions like yours)"
)


NO_CALIBRATED_REFERENCE = (
    "NO CALIBRATED VERDICT — this model is the run's reference (the checkpoint before RL), which cannot be its "
    "own: give a clean set drawn like the audited questions (split clean_ref) to calibrate its verdict"
)


def absolute_size_text(verdict: dict[str, Any]) -> str:
    """The absolute mode's size where the verdict can show it (a clean set), else where it is known."""
    measured = verdict.get("absolute_on_clean")
    if measured:
        return size_sentence(measured["size"], measured.get("test"))
    return f"the absolute mode's size is {VALIDATED_ON}"


def verdict_word(v: dict[str, Any]) -> str:
    """How a decided verdict is headed: CONTAMINATED only when a calibrated mode rejects; when the
    absolute mode decides there is no calibrated verdict (its size is not shown on questions the
    generator was not tuned on), only its signal or its absence as a diagnostic."""
    if not v["calibrated"]:
        return f"NO CALIBRATED VERDICT (absolute: {_signal(v)})"
    return "CONTAMINATED" if v["reject"] else "not flagged"


def left_out_text(record: dict[str, Any]) -> str:
    """``"3 (2 nan score, 1 too few controls)"`` or ``"0"``: the questions a statistic left out."""
    parts = {
        **{k: v for k, v in (record.get("left_out") or {}).items() if v},
        **{f"clean {k}": v for k, v in (record.get("clean_left_out") or {}).items() if v},
    }
    total = sum(parts.values())
    return f"{total} ({', '.join(f'{v} {k.replace(chr(95), chr(32))}' for k, v in parts.items())})" if total else "0"


def _left_out_note(v: dict[str, Any]) -> str:
    notes = [f"{name} left out {left_out_text(r)}" for name, r in v["detectors"].items() if left_out_text(r) != "0"]
    return f"; {'; '.join(notes)}" if notes else ""


def _detector_lines(v: dict[str, Any]) -> list[str]:
    out = [
        f"{'detector':<18} {'within-AUC [95% CI]':<22} {'p':>8}  {'contaminated >= [95% CI]':<26} {'n':>5}  left out"
    ]
    for name, r in v["detectors"].items():
        auc, frac = r["within_auc"], r["contaminated_fraction"]
        out.append(
            f"{name:<18} {_fig(auc):<22} {_p(r['p_value']):>8}  {_fig(frac):<26} {r['n']:>5}  {left_out_text(r)}"
        )
    return out


def _fig(f: dict[str, Any]) -> str:
    value, (lo, hi) = f["value"], f["ci"]
    if value is None and f.get("estimate") is not None:  # a contaminated fraction withheld: the mode does not reject
        return "– (not rejected)"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    bounds = "" if lo is None or (isinstance(lo, float) and math.isnan(lo)) else f" [{lo:.2f}, {hi:.2f}]"
    return f"{value:.2f}{bounds}"


def _p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return "< 1e-4" if p < 1e-4 else f"{p:.4f}"


def p_sentence(p: float | None) -> str:
    """``p < 1e-4`` or ``p = 0.2648``."""
    text = _p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def verdict_markdown(verdict: dict[str, Any]) -> list[str]:
    """The "Verdict" section of a report (Markdown lines)."""
    lines = ["## Verdict", "", f"**{_headline(verdict, verdict.get('is_reference', False))}**", ""]
    if verdict["detectors"]:
        lines += [
            "| Detector | within-AUC [95% CI] | p | contaminated fraction ≥ [95% CI] | n | left out |",
            "|---|---|---|---|---|---|",
        ]
        for name, r in verdict["detectors"].items():
            if name in (
                verdict.get("self_reference") or ()
            ):  # the model compared with itself: constant by construction
                lines.append(f"| {name} | n/a (self-reference) | n/a | n/a | {r['n']} | all: no information |")
                continue
            lines.append(
                f"| {name} | {_fig(r['within_auc'])} | {_p(r['p_value'])} | {_fig(r['contaminated_fraction'])} | {r['n']} "
                f"| {left_out_text(r)} |"
            )
        lines.append("")
    lines += [f"- {mode} mode unavailable: {why}" for mode, why in (verdict.get("unavailable") or {}).items()]
    if verdict.get("coverage"):
        lines += ["What the questions allowed each detector (decided, and why the others were left out):", ""]
        lines += [f"- {line}" for line in coverage_lines(verdict["coverage"])] + [""]
    rows = [("all audited", verdict)] + list((verdict.get("subsets") or {}).items())
    if len(rows) > 1 or len(verdict["modes"]) > 1:
        lines += [
            "| Questions | " + " | ".join(f"{m} mode" for m in verdict["modes"]) + " |",
            "|---|" + "---|" * len(verdict["modes"]),
        ]
        for name, v in rows:
            cells = [
                (
                    ("**reject**" if v["modes"][m]["reject"] else "not rejected")
                    + f", {p_sentence(v['modes'][m]['combined']['p_value'])}"
                )
                if m in v["modes"]
                else "unavailable"
                for m in verdict["modes"]
            ]
            lines.append(f"| {name} ({v['n']}) | " + " | ".join(cells) + " |")
        lines.append("")
    if "absolute" in verdict["modes"]:
        lines += [f"Absolute mode (uncalibrated, a diagnostic): {absolute_size_text(verdict)}.", ""]
    lines += accuracy_markdown(verdict.get("accuracy"))
    lines += [f"Warning: {w}" for w in verdict.get("warnings", [])]
    lines += [f"Note: {n}" for n in verdict.get("notes", [])]
    lines += [
        "",
        "Within-AUC: the originals' mean rank among their own matched controls (0.5 when the benchmark was "
        "not trained on; in the relative mode, the audited questions' AUC against the clean set's). Calibrated "
        "by the mode: reference = differences to the reference model, relative = against a clean set, absolute = "
        "as is (uncalibrated). The contaminated fraction is Storey's lower bound. Left out: questions whose score "
        "is NaN or that have too few scored controls (±inf scores are ranked, not left out).",
        "",
    ]
    return lines


def size_sentence(size: dict[str, Any], test: dict[str, Any] | None = None) -> str:
    """One line for the verdict's text: the absolute test on the clean questions and its size."""
    if "error" in size:
        return f"the absolute mode's size on your clean questions: not measured ({size['error']})"
    head = f"the absolute mode on the {size['n_clean']} clean questions"
    if test is not None and math.isfinite(test["combined"]["p_value"]):
        head += f": {'rejected' if test['reject'] else 'not rejected'}, combined p = {test['combined']['p_value']:.2g}"
    aucs = ", ".join(f"{k} {v:.2f}" for k, v in size["within_auc"].items())
    ranges = (
        ", ".join(
            f"{k} {100 * lo:.0f}–{100 * hi:.0f} %"
            for k, (lo, hi) in size["size_range"].items()
            if _finite(lo) and _finite(hi)
        )
        or "not estimable"
    )
    return (
        f"{head} (within-AUC {aucs}; 0.5 if the generator's similars read like real questions); a clean set like "
        f"them of {size['n_audited']} questions would be flagged in ≈ {100 * size['size']:.0f} % of draws "
        f"(bootstrap, nominal {100 * size['alpha']:g} %; over the clean bias's 95 % CI: {ranges})"
    )


def describe_questions(block: dict[str, Any] | None, where: str = "", rejected: bool = True) -> str:
    """One line: how many questions are flagged, at which FDR, in which mode, the first ids, and
    the "at least" bound; when the verdict does not reject (``rejected`` False) and a question is
    flagged all the same, why that is no finding."""
    if block is None:
        return "which questions: none decided (no verdict)"
    if not block["calibrated"]:
        return f"which questions: none decided — {block['undecided']}"
    mode = f"{block['mode']} mode" + ("" if block["calibrated"] else ", uncalibrated")
    shown = ", ".join(block["flagged"][:8]) + (", …" if block["n_flagged"] > 8 else "")
    method = FDR_METHODS[block["method"]][1]
    bound = block.get("at_least")
    least = (
        f"; at least {bound['value']} of the {bound['of']} contaminated ({100 * bound['level']:g}% lower bound)"
        if bound
        else ""
    )
    untested = block["n"] - block["n_tested"]
    left = f" (of {block['n']}: {untested} not tested: too few scored controls or a NaN score)" if untested else ""
    caveat = f" ({FLAGGED_UNREJECTED.format(fdr=100 * block['fdr'])})" if block["n_flagged"] and not rejected else ""
    return (
        f"which questions: {block['n_flagged']} of {block['n_tested']} tested flagged{left} at FDR {100 * block['fdr']:g}% "
        f"({mode}, {method}){': ' + shown if shown else ''}{least}{caveat}{' -> ' + where if where else ''}"
    )


def _finite(x: float | None) -> bool:
    """A number that is neither missing (None in JSON) nor NaN."""
    return x is not None and math.isfinite(x)
