"""What real benchmark text allowed each detector: how many questions it decided, and why each
other question was left out.

A detector's statistic leaves a question out when the question has no score (``nan_score``) or
fewer than :data:`~.stats.MIN_CONTROLS` scored controls (``too_few_controls``). On real
benchmarks the reasons behind those two counts are what a user can act on: a question with no
number gets no controls (the generator's reason), a control without a re-solved answer cannot
calibrate a detector that reads answers (the worked solution's reason), a known answer the
verifier cannot read gives no reward. :func:`coverage` names them per detector, from the run's
sets and questions; ``verdict.json`` carries it (``coverage``) and the report shows it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from .stats import MIN_CONTROLS


def coverage(
    scored: Any,
    sets: Sequence[Any],
    detectors: Mapping[str, Any],
    ids: Sequence[str] | None = None,
    width: int | None = None,
    min_controls: int = MIN_CONTROLS,
) -> dict[str, dict[str, Any]]:
    """Per detector of ``scored`` (its :class:`~probes.scorefiles.ScoredFiles`): ``decided`` (the
    questions with a score and at least ``min_controls`` scored controls, of which the verdict reads
    the first ``width``), ``of`` (the questions ``ids``, default all) and
    ``left_out`` ``{reason: count}``. ``sets``: the run's perturbation sets (their controls,
    answers and failures); ``detectors``: name → detector object (``requires_answers``,
    ``usable_answer``): only their columns are shown (all, when empty)."""
    by_id = {s.question.id: s for s in sets}
    row = {qid: k for k, qid in enumerate(scored.scores.ids)}
    ids = [qid for qid in (ids if ids is not None else scored.scores.ids) if qid in row]
    out: dict[str, dict[str, Any]] = {}
    for name, column in scored.scores.columns.items():
        if detectors and name not in detectors:
            continue  # a column derived from a detector's, or LaRA's: no controls of its own
        values = column[[row[qid] for qid in ids]]
        detector = detectors.get(name)
        reads_answers = bool(getattr(detector, "requires_answers", False))
        controls = _scored_controls(scored.controls, name, ids, width)
        reasons: Counter = Counter()
        decided = 0
        for k, qid in enumerate(ids):
            record = by_id.get(qid)
            if np.isnan(values[k]):
                reasons[_why_no_score(record, detector, reads_answers)] += 1
            elif controls is not None and controls[k] < min_controls:
                reasons[_why_few_controls(record, detector, reads_answers, min_controls)] += 1
            else:
                decided += 1
        out[name] = {"decided": decided, "of": len(ids), "left_out": dict(reasons.most_common())}
    return out


def _scored_controls(table: Any, name: str, ids: Sequence[str], width: int | None) -> np.ndarray | None:
    """Per question, how many of its controls ``name`` scored, at most ``width`` (None: all) — the
    verdict reads each question's first ``width`` scored controls (None without a controls table)."""
    if table is None or name not in table.columns:
        return None
    scored = (~np.isnan(table.matrix(name, ids))).sum(axis=1)
    return np.minimum(scored, width) if width else scored


def _why_no_score(record: Any, detector: Any, reads_answers: bool) -> str:
    if reads_answers and record is not None:
        answer = record.question.answer
        if answer is None:
            return "no known answer"
        if detector is not None and not detector.usable_answer(answer):
            return "a known answer the verifier cannot read"
    return "no score"


def _why_few_controls(record: Any, detector: Any, reads_answers: bool, needed: int) -> str:
    if record is None:
        return f"fewer than {needed} scored controls"
    texts = [t for t in (*record.similars, *record.controls) if t is not None]
    if len(texts) < needed:
        failures = [f.reason for f in record.failures if f.step in ("similars", "controls")]
        why = Counter(failures).most_common(1)[0][0].replace("_", " ") if failures else "none made"
        return f"fewer than {needed} controls generated ({why})"
    if reads_answers:
        answers = record.answers or {}
        given = [*(answers.get("similars") or []), *(answers.get("controls") or [])]
        usable = [a for a in given if a is not None and (detector is None or detector.usable_answer(a))]
        if len(usable) < needed:
            unavailable = answers.get("unavailable")
            why = unavailable.split(" (")[0] if unavailable else "the solution re-run on too few of them"
            return f"fewer than {needed} controls with a re-solved answer ({why})"
    return f"fewer than {needed} scored controls"


def coverage_lines(found: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``"reward_gain: 95 of 240 decided; left out: 120 fewer than 2 controls with …"``, a line each."""
    lines = []
    for name, c in found.items():
        left = "; ".join(f"{n} {why}" for why, n in c["left_out"].items())
        lines.append(f"{name}: {c['decided']} of {c['of']} decided" + (f"; left out: {left}" if left else ""))
    return lines
