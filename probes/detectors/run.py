"""Run output-level detectors over questions through one (cached) responder, and on their
matched controls: :func:`run_detectors` and what it returns (:class:`DetectSummary`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..scorefiles import ControlTable, write_scored
from ..scores import CALIBRATED, CLEAN_SPLIT, ScoreTable, derived_column
from ..verdicts.stats import calibrated_scores
from .base import Detector, get_detector
from .checks import capped_notes, cut_notes, fed_detectors, nan_notes
from .on_controls import ControlPlan, ControlRows, score_controls
from .selection import settings_digest, with_sampling_temperature

if TYPE_CHECKING:
    from ..responders.base import Responder

logger = logging.getLogger(__name__)


@dataclass
class DetectSummary:
    """What ``run_detectors`` did.

    Attributes:
        table: one oriented score column per detector.
        raw: the raw statistics (and decision rules), one column each.
        info: detector parameters, notes on approximations, counts.
        controls: the detectors' scores on each question's matched controls (SPEC §8.1), if asked.
        written: the files of the bundle once written (:meth:`write`).
    """

    table: ScoreTable
    raw: ScoreTable
    info: dict[str, Any] = field(default_factory=dict)
    controls: ControlTable | None = None
    written: list[Path] = field(default_factory=list)

    def describe(self) -> str:
        c = self.info["counts"]
        detectors = [n for n in self.table.columns if "@" not in n]  # not the calibrated columns (<det>@cal)
        extra = len(self.table.columns) - len(detectors)
        lines = [
            f"{len(self.table.ids)} questions x {len(detectors)} detector(s)"
            + (f" (+ {extra} calibrated column(s))" if extra else "")
            + f" in {self.info['seconds']:.1f} s: "
            + _describe_counts(c)
        ]
        if self.info.get("sampling_temperature") is not None:
            lines.append(
                f"sampling temperature {self.info['sampling_temperature']:g} (detectors whose params set none)"
            )
        if self.controls is not None:
            cal = self.info["calibration"]
            lines.append(
                f"controls: {len(self.controls.ids)} similar questions of {cal['n_questions_with_controls']} questions "
                f"scored by {', '.join(self.controls.columns)}; calibrated columns {', '.join(cal['columns'])}"
            )
        if self.info.get("reference_counts"):
            lines.append("reference model: " + _describe_counts(self.info["reference_counts"]))
        lines += [f"note: {n}" for n in self.info["notes"]]
        return "\n".join(lines)

    def write(self, output: str | Path) -> list[Path]:
        """The score-file bundle (:func:`probes.scorefiles.write_scored`): SCORES.csv, .raw.csv,
        .controls.csv when scored and, last, .meta.json binding them."""
        return write_scored(output, self.table, self.raw, self.controls, self.info)


def run_detectors(
    names: Sequence[str | Detector],
    questions: Sequence[Any],
    responder: Responder,
    *,
    params: dict[str, dict[str, Any]] | None = None,
    reference: Responder | None = None,
    sampling_temperature: float | None = None,
    controls: ControlPlan | None = None,
    clean_questions: Sequence[str] | None = None,
    progress: bool = False,
) -> DetectSummary:
    """Score ``questions`` with each detector through ``responder``.

    Args:
        names: registry names (built here with ``params`` and ``sampling_temperature``), or
            detectors already built (:func:`probes.detectors.selection.build_detectors`: each
            detector is built once per run, where its parameters are checked).
        questions: one record per question (``generation.records.Question``: its ``id``, its
            text ``question``, its known ``answer`` for the detectors that read one, its ``split``).
        reference: a reference model's responder, for the detectors that compare with one.
        sampling_temperature: the temperature of the sampling detectors whose params set none.
        controls: the matched controls scored too (:class:`ControlPlan`). A detector that reads
            answers scores only controls with one.
        clean_questions: known-clean texts for the detectors that fit on some (ReCaLL's
            prefixes); None: the questions of split ``clean_ref``.
    """
    start = time.perf_counter()
    ids = [q.id for q in questions]
    texts = [q.question for q in questions]
    answers = [getattr(q, "answer", None) for q in questions]
    if clean_questions is None:
        clean_questions = [q.question for q in questions if getattr(q, "split", None) == CLEAN_SPLIT]
    chosen = with_sampling_temperature(params or {}, [n for n in names if isinstance(n, str)], sampling_temperature)
    detectors = [n if isinstance(n, Detector) else get_detector(n, **chosen[n]) for n in names]
    feeding, references, notes = fed_detectors(detectors, responder, reference, ids, answers)  # refuse before any work
    rows = ControlRows.of(ids, controls)
    calibrated = [
        d
        for d in detectors
        if controls is not None
        and (controls.calibrate is None or d.name in controls.calibrate)
        and d.answers_met(rows.answers)
    ]
    notes += [
        f"{d.name}: not scored on the controls (no control has an answer it can use: give the questions a worked "
        "solution, extra.solution, for the generator to re-solve; generation.answers); it enters the relative mode "
        "against a clean set with answers"
        for d in detectors
        if controls is not None and not d.answers_met(rows.answers)
    ]
    control_table = rows.table() if controls is not None else None
    table, raw = ScoreTable(list(ids)), ScoreTable(list(ids))
    bar = _progress(progress, len(detectors) + len(calibrated))
    described, calibration = {}, {}
    for detector in detectors:
        bar.set_postfix_str(detector.name)
        detector.fit(clean_questions, reference=references[detector.name], answers=answers)
        result = detector.score(texts, feeding[detector.name])
        notes += _add_result(table, raw, detector, result, ids)
        described[detector.name] = _described(detector, result, ids)
        if detector in calibrated:
            bar.update(1)
            bar.set_postfix_str(f"{detector.name} on controls")
            limit = controls.sampling if detector.samples_at_temperature else None  # type: ignore[union-attr]
            calibration[detector.name], more = score_controls(
                detector, rows, control_table, feeding[detector.name], references[detector.name], clean_questions, limit
            )
            notes += more
            cal, record = calibrated_scores(result.scores, control_table.matrix(detector.name, ids))  # type: ignore[union-attr]
            table.add(derived_column(detector.name, CALIBRATED), cal)
            calibration[detector.name]["zero_scale"] = record.to_dict()
        bar.update(1)
    bar.close()
    info = _info(detectors, described, responder, reference, sampling_temperature, notes, start)
    if control_table is not None:
        info["calibration"] = rows.describe(control_table, [d.name for d in calibrated], calibration)
    return DetectSummary(table=table, raw=raw, info=info, controls=control_table)


def _add_result(table: ScoreTable, raw: ScoreTable, detector: Detector, result: Any, ids: Sequence[str]) -> list[str]:
    """One detector's scores into ``table``, its raw statistics and per-question counts into
    ``raw``; the notes on what it could not do."""
    table.add(result.name, result.scores)
    raw.add(result.raw_name, result.raw)
    for key, values in result.extra.items():
        raw.add(f"{result.name}_{key}", np.asarray(values, dtype=np.float64))
    raw.add(f"{result.name}_capped", result.capped)  # SPEC §5: per question, answers cut at the budget
    raw.add(f"{result.name}_prompt_cut", result.prompt_cut)  # and prompts cut to fit the context
    return (
        result.notes
        + capped_notes(detector, result)
        + cut_notes(detector.name, result)
        + nan_notes(detector.name, result, ids)
    )


def _described(detector: Detector, result: Any, ids: Sequence[str]) -> dict[str, Any]:
    """What the meta records of one detector's run."""
    return {
        "params": detector.get_params(),
        "raw": result.raw_name,
        "raw_direction": detector.raw_direction,
        "n_nonfinite": int((~np.isfinite(result.scores)).sum()),
        "n_nan": int(np.isnan(result.scores).sum()),
        "settings_digest": settings_digest(detector),
        "responses": result.responses_summary(list(ids)),
    }


def _info(
    detectors: Sequence[Detector],
    described: dict[str, Any],
    responder: Responder,
    reference: Responder | None,
    sampling_temperature: float | None,
    notes: list[str],
    start: float,
) -> dict[str, Any]:
    uses_reference = reference is not None and any(d.requires_reference for d in detectors)
    return {
        "detectors": described,
        "responder": responder.identity,
        "reference": reference.identity if uses_reference else None,
        "sampling_temperature": sampling_temperature,
        "notes": notes,
        "counts": _counts(responder.counter),
        "reference_counts": _counts(reference.counter) if uses_reference else None,
        "seconds": time.perf_counter() - start,
    }


def _progress(progress: bool, total: int) -> Any:
    """The detectors' progress bar (one that shows nothing when ``progress`` is off)."""
    from tqdm.auto import tqdm  # lazy: only when detectors run

    return tqdm(total=total, unit="pass", desc="detect", disable=not progress)


def _describe_counts(c: Mapping[str, int]) -> str:
    """What one model did, as the summary prints it (the reference's sampling counted as the
    audited model's is: reward gain and policy drift sample both)."""
    return (
        f"{c['generated']} completions generated, {c['scored']} texts scored, "
        f"{c['cache_hits']} served from the response store"
        + (f"; {c['requests']} requests to the served model" if c.get("requests") else "")
    )


def _counts(counter: Any) -> dict[str, int]:
    return {
        "generated": counter.generated,
        "scored": counter.scored,
        "cache_hits": counter.cache_hits,
        "requests": counter.requests,
    }
