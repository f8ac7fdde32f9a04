"""The "Flagged questions" section of a report (SPEC §8.10): each question the per-question
decisions flagged, with its own score and its controls' in the deciding mode, so a reader sees why."""

from __future__ import annotations

import math
from typing import Any, Mapping

COMBINED = {
    "learned": "one learned score over its detectors per null, the smaller p doubled when there are two nulls",
    "cauchy": "the Cauchy combination of its detectors' p-values",
    "bonferroni": "the Bonferroni combination of its detectors' p-values",
}
FLAGGED_UNREJECTED = (
    "The verdict does not reject: the audited set as a whole shows no evidence of contamination, and with none "
    "at all the decisions flag one question or more in up to {fdr:g}% of audits — a flag here is a lead to check, "
    "not a finding."
)
SHOWN = 25  # questions listed in report.md (verdict.json holds up to 50, questions.csv all)


# each FDR procedure's name in the report (long) and in the printed line (short)
FDR_METHODS = {
    "bh": ("Benjamini–Hochberg", "BH"),
    "two-stage": ("Benjamini–Krieger–Yekutieli's two-stage adaptive Benjamini–Hochberg", "two-stage BH"),
    "storey": ("Storey's adaptive Benjamini–Hochberg", "Storey's adaptive BH"),
}


def flagged_markdown(
    block: Mapping[str, Any] | None, texts: Mapping[str, str] | None = None, rejected: bool = True
) -> list[str]:
    """Markdown lines of the section (none when the verdict has no per-question decisions); a
    question flagged while the verdict does not reject (``rejected`` False) is said to be no finding."""
    if not block:
        return []
    if not block["calibrated"]:  # an uncalibrated mode decides nothing (its figures are diagnostic only)
        return ["## Flagged questions", "", f"None decided: {block['undecided']}.", ""]
    mode = block["mode"]
    method = FDR_METHODS[block["method"]][0]
    lines = [
        "## Flagged questions",
        "",
        f"**{block['n_flagged']} of {block['n_tested']} questions flagged** at a false-discovery rate of "
        f"{100 * block['fdr']:g}% ({mode} mode; {method} over each question's conformal p-value: {COMBINED[block.get('combine', 'cauchy')]}). "
        "Expected share of clean questions among the flagged: at most the FDR."
        " `questions.csv` holds every question's p- and q-value, ranked by evidence.",
        "",
    ]
    if block["n_flagged"] and not rejected:
        lines += [FLAGGED_UNREJECTED.format(fdr=100 * block["fdr"]), ""]
    bound = block.get("at_least")
    if bound:
        lines += [
            f"**At least {bound['value']} of the {bound['of']} tested questions are contaminated** "
            f"({100 * bound['level']:g}% lower confidence bound; {bound['method']}), "
            + (
                "even though no single one can be named at this FDR."
                if bound["value"] and not block["n_flagged"]
                else "beside the flagged list."
                if bound["value"]
                else "— that is, the data show none for certain."
            ),
            "",
        ]
    if not block["flagged_detail"]:
        return lines
    names = list(block["flagged_detail"][0]["detectors"])
    lines += [
        "| Question | q | " + " | ".join(f"{n}: score (controls) → p" for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for item in block["flagged_detail"][:SHOWN]:
        text = (texts or {}).get(item["id"], "")
        label = f"`{item['id']}`" + (f" {_short(text)}" if text else "")
        cells = [_cell(item["detectors"][n]) for n in names]
        lines.append(f"| {label} | {item['q_value']:.3f} | " + " | ".join(cells) + " |")
    more = block["n_flagged"] - min(SHOWN, len(block["flagged_detail"]))
    lines += (["", f"… and {more} more in `questions.csv`."] if more > 0 else []) + [""]
    return lines


def _cell(d: Mapping[str, Any]) -> str:
    controls = "" if d["controls"] is None else " (" + ", ".join(_num(x) for x in d["controls"]) + ")"
    p = d["p_value"]
    shown = "– (left out)" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.3f}"
    return f"{_num(d['score'])}{controls} → {shown}"


def _num(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"
