"""A verdict from score files (``lara verdict``) and its text: which questions are audited, which are
the clean set, which subsets get their own verdict.

``subsets`` name groups of the audited questions: ``members`` (label 1), ``non_members`` (label 0)
or any split name of the questions file.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ..errors import ConfigError, InputError
from ..scorefiles import ControlTable, ScoredFiles, ScoredSet
from ..scores import CLEAN_SPLIT, ScoreTable
from .absolute_size import VALIDATED_ON, size_sentence
from .decision_table import QuestionDecisions, describe_questions
from .decisions import decide_questions
from .verdict import VerdictSettings, compute_verdict

LABEL_SUBSETS = {"members": 1, "non_members": 0}


def subset_ids(
    ids: Sequence[str], name: str, labels: Mapping[str, int | None], splits: Mapping[str, str | None]
) -> list[str]:
    """The audited ids in subset ``name`` (by label for members/non_members, else by split)."""
    if name in LABEL_SUBSETS:
        return [i for i in ids if labels.get(i) == LABEL_SUBSETS[name]]
    chosen = [i for i in ids if splits.get(i) == name]
    if not chosen and name not in set(splits.values()):
        raise ConfigError(
            f"verdict subset {name!r} is neither members, non_members nor a split of the questions "
            f"({', '.join(sorted({s for s in splits.values() if s}))})"
        )
    return chosen


def audit_verdict(
    audited: ScoredFiles,
    *,
    reference: ScoredFiles | None = None,
    clean: ScoredFiles | None = None,
    labels: Mapping[str, int | None] | None = None,
    splits: Mapping[str, str | None] | None = None,
    subsets: Sequence[str] | None = None,
    settings: VerdictSettings = VerdictSettings(),
    verdict_controls: int | None = None,
) -> tuple[dict[str, Any], QuestionDecisions | None]:
    """The verdict on the audited questions of ``audited``, one per subset, and the per-question
    decisions (SPEC §8.10; None with no verdict), summarised under the verdict's ``questions``.

    Questions whose split is ``clean_ref`` are the clean set (relative mode) unless ``clean`` gives
    one, and are never audited. Labels, when present, are not used by the verdict itself: they
    only define the ``members`` / ``non_members`` subsets. The files' notes (controls ignored or
    not checked) go into the verdict's ``notes``. ``verdict_controls``: the verdict reads each
    question's first this many controls, the decisions all that were scored (SPEC §8.10's
    decision controls); None: both read all."""
    labels, splits = labels or {}, splits or {}
    scores, controls = audited.scores, audited.controls
    in_clean = [i for i in scores.ids if splits.get(i) == CLEAN_SPLIT]
    audited_ids = [i for i in scores.ids if i not in set(in_clean)]
    if not audited_ids:
        raise InputError("every scored question is in the clean set (split clean_ref); nothing to audit")
    audited_set = ScoredSet(scores, controls, audited_ids, audited.settings, audited.prompt_format)
    ref = (
        ScoredSet(
            reference.scores, reference.controls, settings=reference.settings, prompt_format=reference.prompt_format
        )
        if reference is not None
        else None
    )
    clean_set = (
        ScoredSet(clean.scores, clean.controls, settings=clean.settings, prompt_format=clean.prompt_format)
        if clean is not None
        else audited_set.subset(in_clean)
        if in_clean
        else None
    )
    cut = lambda x: x.limited(verdict_controls) if x is not None else None
    verdict = compute_verdict(cut(audited_set), cut(ref), cut(clean_set), settings)
    file_notes = [n for f in (audited, reference, clean) if f is not None for n in f.notes]
    verdict["notes"] = file_notes + verdict.get("notes", [])
    decisions = decide_questions(verdict, audited_set, ref, clean_set, settings)
    verdict["questions"] = decisions.summary() if decisions is not None else None
    verdict["subsets"] = {}
    for name in settings.subsets if subsets is None else subsets:
        ids = subset_ids(audited_ids, name, labels, splits)
        if ids:
            verdict["subsets"][name] = compute_verdict(cut(audited_set).subset(ids), cut(ref), cut(clean_set), settings)
    return verdict, decisions


def scored_files(scores: ScoreTable, controls: ControlTable | None = None) -> ScoredFiles:
    """In-memory scores (and controls) as :func:`audit_verdict` takes them."""
    return ScoredFiles(scores, controls)


def describe_verdict(verdict: dict[str, Any], title: str = "Verdict") -> str:
    """The verdict as text (printed first by ``lara run`` and ``lara verdict``): the headline, one
    line per detector with the questions it used and those it left out, the other modes, the
    subsets, the warnings."""
    lines = [f"{title}: {_headline(verdict)}"]
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
        lines.append(f"  subset {name} ({sub['n']} questions): {_headline(sub)}{_left_out_note(sub)}")
    lines += [f"  warning: {w}" for w in verdict.get("warnings", [])]
    lines += [f"  note: {n}" for n in verdict.get("notes", [])]
    if "questions" in verdict:
        lines.append(f"  {describe_questions(verdict['questions'])}")
    return "\n".join(lines)


def decided(verdict: dict[str, Any]) -> bool:
    """Whether a mode decided (False: *no verdict*, which is not a negative answer)."""
    return verdict.get("mode") is not None


def _headline(v: dict[str, Any]) -> str:
    if not decided(v):
        return "NO VERDICT (no mode has a detector with a usable question; not a negative answer)"
    c = v["combined"]
    test = f"{c['method']} {p_sentence(c['p_value'])} over {', '.join(c['detectors']) or 'no detector'}"
    if not v["calibrated"]:  # the absolute mode decides: no reference, no clean set
        return (
            f"{NO_CALIBRATED_VERDICT}; the absolute mode, a diagnostic only: {_signal(v)} at alpha = "
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
    lines = ["## Verdict", "", f"**{_headline(verdict)}**", ""]
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
