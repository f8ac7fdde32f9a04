"""Matched controls scored by the detectors (SPEC §8.1, §8.10): which controls each detector
scores (:class:`ControlPlan`), every control text in one table (:class:`ControlRows`), one
detector's scores on them (:func:`score_controls`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from cache.fingerprint import text_hash

from ..scorefiles import ControlTable
from ..scores import CALIBRATED, derived_column
from ..verdicts.controls import control_answers, control_texts, decision_control_count
from .base import Detector
from .checks import cut_notes

if TYPE_CHECKING:
    from ..responders.base import Responder


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
        :func:`~probes.verdicts.controls.decision_control_count` — and ``sampling_controls`` for
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


@dataclass
class ControlRows:
    """Every control text to score: ``keys[k]`` = (question id, control index c ≥ 1), its text and
    its (re-solved) answer (None where unknown)."""

    keys: list[tuple[str, int]]
    texts: list[str]
    answers: list[Any]

    @classmethod
    def of(cls, ids: Sequence[str], controls: ControlPlan | None) -> ControlRows:
        texts = controls.texts if controls is not None else {}
        rows = [(qid, c, text) for qid in ids for c, text in enumerate(texts.get(qid, ()), start=1)]
        answers = controls.answers if controls is not None else None
        return cls(
            [(r[0], r[1]) for r in rows],
            [r[2] for r in rows],
            [_control_answer(answers, r[0], r[1]) for r in rows],
        )

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
    rows: ControlRows,
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
        # a question's first `limit` controls that have one, among all it has: which controls the generator
        # could re-solve depends on their numbers alone, never on a model
        eligible, taken = len(mine), Counter()
        mine = []
        for k, key in enumerate(rows.keys):
            if (limit is None or taken[key[0]] < limit) and detector.usable_answer(rows.answers[k]):
                taken[key[0]] += 1
                mine.append(k)
        detector.fit(clean_questions, reference=reference, answers=[rows.answers[k] for k in mine])
        notes.append(
            f"{detector.name}: scored on the {len(mine)} of {eligible} controls with a re-solved answer it can use"
        )
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


def _control_answer(answers: Mapping[str, Sequence[Any]] | None, qid: str, index: int) -> Any:
    """Control ``index`` (1-based) of question ``qid``'s answer, or None."""
    given = (answers or {}).get(qid) or ()
    return given[index - 1] if index <= len(given) else None
