"""Contamination-adjusted accuracy (issue 44, item 2): the audited model's accuracy on the whole
benchmark, on the questions the decisions flag, on the rest, and once the "at least k" most
suspect are set aside — each a proportion with a Wilson score interval — and the same questions'
accuracy for the reference model (the checkpoint before RL), so the RL gain on suspect questions
stands beside the gain on the others.

A question that has no answer to judge against is left out of every row and counted, never read
as a wrong answer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Mapping, Sequence


def wilson_interval(correct: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes in ``n`` trials (NaNs when ``n`` is 0)."""
    if n == 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Subset:
    """One row of the table: a named set of question ids."""

    name: str
    what: str
    ids: tuple[str, ...]


def _proportion(ids: Sequence[str], correct: Mapping[str, bool | None], level: float) -> dict[str, Any]:
    judged = [correct[i] for i in ids if correct.get(i) is not None]
    k, n = sum(bool(c) for c in judged), len(judged)
    low, high = wilson_interval(k, n, level)
    return {
        "n": n,
        "correct": k,
        "accuracy": k / n if n else None,
        "ci": [low, high] if n else None,
        "not_judged": len(ids) - n,
    }


def subsets(ranked: Sequence[str], flagged: Sequence[str] | None, at_least: int | None) -> list[Subset]:
    """The table's rows from the decisions: ``ranked`` every audited question, most suspect first;
    ``flagged`` the flagged ones and ``at_least`` the bound (None: no calibrated decision, so only
    the whole benchmark)."""
    rows = [Subset("all", "every audited question", tuple(ranked))]
    if flagged is None or at_least is None:
        return rows
    chosen = set(flagged)
    rows.append(Subset("flagged", "the questions flagged", tuple(i for i in ranked if i in chosen)))
    rows.append(Subset("not_flagged", "the questions not flagged", tuple(i for i in ranked if i not in chosen)))
    rows.append(
        Subset("without_most_suspect", f"without the {at_least} most suspect (at least k)", tuple(ranked[at_least:]))
    )
    return rows


def accuracy_table(
    rows: Sequence[Subset],
    correct: Mapping[str, bool | None],
    reference: Mapping[str, bool | None] | None = None,
    level: float = 0.95,
) -> dict[str, Any]:
    """``verdict.json``'s ``accuracy`` block: each row's accuracy with its ``level`` Wilson interval
    for the audited model and (where given) the reference model, and the difference of the two
    point estimates on the questions both have judged."""
    out: dict[str, Any] = {"level": level, "method": "greedy answer judged by the verifier; Wilson score interval"}
    table = []
    for row in rows:
        entry: dict[str, Any] = {"subset": row.name, "what": row.what, "questions": len(row.ids)}
        entry["audited"] = _proportion(row.ids, correct, level)
        if reference is not None:
            entry["reference"] = _proportion(row.ids, reference, level)
            both = [i for i in row.ids if correct.get(i) is not None and reference.get(i) is not None]
            gain = sum(bool(correct[i]) - bool(reference[i]) for i in both)
            entry["gain"] = {"n": len(both), "value": gain / len(both) if both else None}
        table.append(entry)
    out["rows"] = table
    return out


def accuracy_sentence(block: Mapping[str, Any] | None) -> str:
    """One line for the printed verdict: "accuracy 61 % [55, 67] on all 300 judged; …" (a row with
    no question, and setting aside none, are not repeated)."""
    if not block:
        return ""
    parts = []
    for row in block["rows"]:
        a = row["audited"]
        if row["questions"] == 0 or (
            row["subset"] == "without_most_suspect" and row["questions"] == block["rows"][0]["questions"]
        ):
            continue
        if a["accuracy"] is None:
            parts.append(f"no judged answer among {row['what']} ({row['questions']})")
            continue
        low, high = a["ci"]
        parts.append(f"{100 * a['accuracy']:.0f} % [{100 * low:.0f}, {100 * high:.0f}] {_where(row)}")
    left_out = block["rows"][0]["audited"]["not_judged"]
    note = f" ({left_out} question(s) not judged: no answer to judge against)" if left_out else ""
    return "accuracy " + "; ".join(parts) + note


def _where(row: Mapping[str, Any]) -> str:
    n = row["audited"]["n"]
    return {
        "all": f"on all {n} judged",
        "flagged": f"on the {n} flagged",
        "not_flagged": f"on the {n} not flagged",
        "without_most_suspect": f"once the most suspect are set aside ({n} left)",
    }.get(row["subset"], f"on {row['what']} ({n})")


def accuracy_markdown(block: Mapping[str, Any] | None) -> list[str]:
    """The report's accuracy table (Markdown lines): each row's accuracy and interval, the
    reference model's on the same questions and the gain, where there is a reference."""
    if not block:
        return []
    with_reference = "reference" in block["rows"][0]
    level = f"{100 * block['level']:.0f}%"
    head = f"| Questions | n | accuracy [{level} CI] |"
    head += f" reference model [{level} CI] | gain |" if with_reference else ""
    lines = [
        "**Accuracy** (greedy answer, judged by the verifier)",
        "",
        head,
        "|---|---|---|" + ("---|---|" * with_reference),
    ]
    for row in block["rows"]:
        cells = [row["what"], str(row["audited"]["n"]), _cell(row["audited"])]
        if with_reference:
            gain = row["gain"]["value"]
            cells += [_cell(row["reference"]), "n/a" if gain is None else f"{100 * gain:+.0f} pts"]
        lines.append("| " + " | ".join(cells) + " |")
    not_judged = block["rows"][0]["audited"]["not_judged"]
    if not_judged:
        lines += ["", f"{not_judged} question(s) not judged (no answer to judge against): left out."]
    return lines + [""]


def _cell(p: Mapping[str, Any]) -> str:
    if p["accuracy"] is None:
        return "no judged answer"
    low, high = p["ci"]
    return f"{100 * p['accuracy']:.1f} % [{100 * low:.1f}, {100 * high:.1f}]"
