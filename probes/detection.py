"""``lara detect``: run output-level detectors over questions through one (cached) responder."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from cache.fingerprint import text_hash

from .calibration.controls import control_answers, control_texts, decision_control_count
from .calibration.stats import calibrated_scores
from .detectors import Detector, get_detector
from .detectors.base import has_answer
from .detectors.checks import capped_notes, cut_notes, fed_detectors, nan_notes
from .detectors.selection import (  # noqa: F401 (detector_names, parse_params, checked_detectors: their old home)
    checked_detectors,
    detector_names,
    parse_params,
    settings_digest,
    with_sampling_temperature,
)
from .responders.distributed import sum_counts_over_ranks
from .scorefiles import ControlTable, write_scored
from .scores import CALIBRATED, CLEAN_SPLIT, ScoreTable, derived_column

if TYPE_CHECKING:
    from .responders.base import Responder

logger = logging.getLogger(__name__)


@dataclass
class DetectSummary:
    """What ``run_detectors`` did.

    Attributes:
        table: one oriented score column per detector.
        raw: the raw statistics (and decision rules), one column each.
        info: detector parameters, notes on approximations, counts.
        controls: the detectors' scores on each question's matched controls (SPEC §8.1), if asked.
    """

    table: ScoreTable
    raw: ScoreTable
    info: dict[str, Any] = field(default_factory=dict)
    controls: ControlTable | None = None

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


@dataclass(frozen=True)
class ControlPlan:
    """The matched controls the detectors score (SPEC §8.1, §8.10).

    Attributes:
        texts: ``{question id: its controls' texts}``, in order.
        answers: ``{question id: its controls' answers}`` aligned with ``texts`` (None where
            unknown; :mod:`generation.answers` re-solves them from worked solutions): a detector
            that reads answers scores the controls that have one.
        calibrate: the detectors that score them (None: all); the table gains their
            ``<det>@cal`` columns.
        sampling: the detectors that sample score only each question's first this many (the
            others all of them: SPEC §8.10's decision controls, one forward pass per text); None: all.
    """

    texts: Mapping[str, Sequence[str]]
    answers: Mapping[str, Sequence[Any]] | None = None
    calibrate: Sequence[str] | None = None
    sampling: int | None = None

    @classmethod
    def from_sets(
        cls,
        sets: Sequence[Any],
        controls: int = 3,
        decision_controls: int | None = None,
        sampling_controls: int | None = None,
        calibrate: Sequence[str] | None = None,
    ) -> "ControlPlan":
        """The plan from perturbation sets: each question's first ``controls`` similars (its first
        ``decision_controls`` for the detectors that do not sample — None: the default,
        :func:`~probes.calibration.controls.decision_control_count` — and ``sampling_controls`` for
        those that do; both at least ``controls``)."""
        decision_controls = decision_control_count(controls, decision_controls)
        most = max(controls, decision_controls, sampling_controls or 0)
        sampling = max(controls, sampling_controls or 0)
        return cls(
            control_texts(list(sets), most),
            control_answers(list(sets), most),
            list(calibrate) if calibrate is not None else None,
            sampling if decision_controls > sampling else None,
        )


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
    rows = _ControlRows.of(ids, controls)
    calibrated = [
        d
        for d in detectors
        if controls is not None
        and (controls.calibrate is None or d.name in controls.calibrate)
        and (rows.answered or not d.requires_answers)
    ]
    notes += [
        f"{d.name}: not scored on the controls (no control has an answer: give the questions a worked solution, "
        "extra.solution, for the generator to re-solve; generation.answers); it enters the relative mode against a clean "
        "set with answers"
        for d in detectors
        if controls is not None and d.requires_answers and not rows.answered
    ]
    control_table = rows.table() if controls is not None else None
    table, raw = ScoreTable(list(ids)), ScoreTable(list(ids))
    bar = _progress(progress, len(detectors) + len(calibrated))
    described, calibration = {}, {}
    for detector in detectors:
        if bar is not None:
            bar.set_postfix_str(detector.name)
        detector.fit(clean_questions, reference=references[detector.name], answers=answers)
        result = detector.score(texts, feeding[detector.name])
        notes += _add_result(table, raw, detector, result, ids)
        described[detector.name] = _described(detector, result, ids)
        if detector in calibrated:
            if bar is not None:
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
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    info = _info(detectors, described, responder, reference, sampling_temperature, notes, start)
    if control_table is not None:
        info["calibration"] = rows.describe(control_table, [d.name for d in calibrated], calibration)
    return DetectSummary(table=table, raw=raw, info=info, controls=control_table)


@dataclass
class _ControlRows:
    """Every control text to score: ``keys[k]`` = (question id, control index c ≥ 1), its text and
    its (re-solved) answer (None where unknown)."""

    keys: list[tuple[str, int]]
    texts: list[str]
    answers: list[Any]

    @classmethod
    def of(cls, ids: Sequence[str], controls: ControlPlan | None) -> _ControlRows:
        texts = controls.texts if controls is not None else {}
        rows = [(qid, c, text) for qid in ids for c, text in enumerate(texts.get(qid, ()), start=1)]
        answers = controls.answers if controls is not None else None
        return cls(
            [(r[0], r[1]) for r in rows],
            [r[2] for r in rows],
            [_control_answer(answers, r[0], r[1]) for r in rows],
        )

    @property
    def answered(self) -> bool:
        return any(has_answer(a) for a in self.answers)

    def describe(
        self, control_table: ControlTable, calibrated: Sequence[str], detectors: dict[str, Any]
    ) -> dict[str, Any]:
        """What the meta records of the controls: their counts, the calibrated columns, each
        detector's record on them."""
        return {
            "n_controls_max": int(control_table.index.max()) if self.keys else 0,
            "n_questions_with_controls": len({k[0] for k in self.keys}),
            "n_control_texts": len(self.keys),
            "columns": [derived_column(name, CALIBRATED) for name in calibrated],
            "detectors": detectors,
        }

    def table(self) -> ControlTable:
        """The controls table with no score column yet (ids, indices, text hashes)."""
        return ControlTable(
            [k[0] for k in self.keys],
            np.array([k[1] for k in self.keys], dtype=np.int64),
            text_hash=[text_hash(t) for t in self.texts],
        )


def score_controls(
    detector: Detector,
    rows: _ControlRows,
    control_table: ControlTable,
    responder: Responder,
    reference: Responder | None,
    clean_questions: Sequence[str],
    limit: int | None,
) -> tuple[dict[str, Any], list[str]]:
    """Score each question's controls (its first ``limit``; None = all) with ``detector`` into
    ``control_table``'s column of its name (NaN where a control is not scored); a detector that
    reads answers judges each control against its own re-solved answer and scores only those that
    have one. Returns what the meta records of it and the notes."""
    notes = []
    mine = [k for k, key in enumerate(rows.keys) if limit is None or key[1] <= limit]
    if detector.requires_answers:  # each control judged against its own (re-solved) answer
        eligible, mine = len(mine), [k for k in mine if has_answer(rows.answers[k])]
        detector.fit(clean_questions, reference=reference, answers=[rows.answers[k] for k in mine])
        notes.append(f"{detector.name}: scored on the {len(mine)} of {eligible} controls with a re-solved answer")
    on_controls = detector.score([rows.texts[k] for k in mine], responder)
    notes += cut_notes(f"{detector.name} on controls", on_controls)
    column = np.full(len(rows.keys), np.nan)
    column[mine] = on_controls.scores
    control_table.columns[detector.name] = column
    record = {
        "responses": on_controls.responses_summary([f"{rows.keys[k][0]}#{rows.keys[k][1]}" for k in mine]),
        "n_control_texts": len(mine),
    }
    return record, notes


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


def _control_answer(answers: Mapping[str, Sequence[Any]] | None, qid: str, index: int) -> Any:
    """Control ``index`` (1-based) of question ``qid``'s answer, or None."""
    given = (answers or {}).get(qid) or ()
    return given[index - 1] if index <= len(given) else None


def _progress(progress: bool, total: int) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="pass", desc="detect")


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


def detect_questions(
    questions: Sequence[Any],
    names: Sequence[str | Detector],
    responder: Responder,
    *,
    params: dict[str, dict[str, Any]] | None = None,
    reference: Responder | None = None,
    sampling_temperature: float | None = None,
    controls: ControlPlan | None = None,
    progress: bool = False,
    ranks: Any = None,
) -> DetectSummary | None:
    """Score ``questions`` (``generation.records.Question``) with the detectors ``names`` (registry
    names, or detectors built once by :func:`probes.detectors.selection.checked_detectors`) — the
    entry ``lara detect``, the ``detect`` stage and the Python API share. ``controls``: the matched
    controls scored too (:meth:`ControlPlan.from_sets`); questions of split ``clean_ref`` are the
    clean set of the detectors that need one; answers go to those that read them. Under a launched
    job (``ranks``), the counts are summed over the ranks and only the main rank gets the summary
    (the others get None)."""
    summary = run_detectors(
        list(names),
        questions,
        responder,
        params=params,
        reference=reference,
        sampling_temperature=sampling_temperature,
        controls=controls,
        progress=progress,
    )
    if ranks is not None:
        sum_counts_over_ranks(summary.info, ranks)
        if not ranks.is_main:
            return None
    return summary
