"""The verdict as an operation (``lara verdict``, the run's verdict stage): the label-free verdict
(SPEC §8) and the per-question decisions (SPEC §8.10) computed from score files and written — the
decisions' table first, ``VERDICT.json`` last, each atomically."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lara_core.files import write_text_atomically

from ..accuracy.table import accuracy_table, subsets
from ..detectors import REGISTRY
from ..scorefiles import ScoredFiles
from ..scores import CLEAN_SPLIT, jsonable
from ..verdicts.coverage import coverage
from ..verdicts.decision_table import write_no_decisions
from ..verdicts.modes import ABSOLUTE_WARNING, REFERENCE_ABSOLUTE_WARNING, VerdictSettings
from ..verdicts.on_files import audit_verdict


@dataclass
class VerdictInputs:
    """What a verdict reads.

    Attributes:
        audited: the audited model's scores and controls (LaRA's columns joined in, where used).
        reference: the reference model's (the checkpoint before RL): the reference mode.
        clean: a clean set's scores (default: the audited questions of split ``clean_ref``).
        labels: only define the ``members`` / ``non_members`` subsets; never enter the verdict.
        splits: each question's split.
        subsets: groups with a verdict of their own (None: the settings').
        verdict_controls: the verdict reads each question's first this many controls, the
            decisions all (None: both all).
        self_reference: the audited model is the reference model: the detectors that compare with
            one are marked as comparing it with itself.
        accuracy / reference_accuracy: each audited question's greedy answer judged (True, False,
            None: not judged) for the audited and the reference model: the accuracy table.
        sets / detectors: the run's perturbation sets and detector objects: ``verdict.json``'s
            ``coverage`` (:mod:`probes.verdicts.coverage`), where given.
    """

    audited: ScoredFiles
    reference: ScoredFiles | None = None
    clean: ScoredFiles | None = None
    labels: Mapping[str, int | None] = field(default_factory=dict)
    splits: Mapping[str, str | None] = field(default_factory=dict)
    subsets: Sequence[str] | None = None
    verdict_controls: int | None = None
    self_reference: bool = False
    sets: Sequence[Any] | None = None  # the run's perturbation sets: what each detector decided, and why not (coverage)
    detectors: Mapping[str, Any] = field(default_factory=dict)  # name -> detector object, for the coverage
    accuracy: Mapping[str, bool | None] | None = None
    reference_accuracy: Mapping[str, bool | None] | None = None


def write_verdict(
    inputs: VerdictInputs, settings: VerdictSettings, output: str | Path, questions_table: str | Path
) -> dict[str, Any]:
    """Compute the verdict and the decisions; write the decisions to ``questions_table`` (every
    audited question, none flagged when no verdict) and the verdict to ``output`` (JSON); return it."""
    result, decisions = audit_verdict(
        inputs.audited,
        reference=inputs.reference,
        clean=inputs.clean,
        labels=dict(inputs.labels),
        splits=dict(inputs.splits),
        subsets=inputs.subsets,
        settings=settings,
        verdict_controls=inputs.verdict_controls,
    )
    if inputs.self_reference:  # the reference model's own comparisons with itself (issue 34, item 4)
        result["is_reference"] = True
        result["warnings"] = [
            REFERENCE_ABSOLUTE_WARNING if w == ABSOLUTE_WARNING else w for w in result.get("warnings", [])
        ]
        result["self_reference"] = [
            n for n in result.get("detectors", {}) if n in REGISTRY and REGISTRY[n].requires_reference
        ]
    audited = [i for i in inputs.audited.scores.ids if inputs.splits.get(i) != CLEAN_SPLIT]
    if decisions is not None:
        decisions.write_csv(questions_table)
    else:
        write_no_decisions(audited, questions_table)
    if inputs.accuracy is not None:
        result["accuracy"] = _accuracy(decisions, audited, inputs.accuracy, inputs.reference_accuracy)
    if inputs.sets is not None:
        result["coverage"] = coverage(inputs.audited, inputs.sets, inputs.detectors, audited, inputs.verdict_controls)
    write_text_atomically(output, json.dumps(jsonable(result), indent=1) + "\n")
    return result


def _accuracy(
    decisions: Any, audited: list[str], correct: Mapping[str, bool | None], reference: Mapping[str, bool | None] | None
) -> dict[str, Any]:
    """The accuracy table: every audited question, and where the decisions are calibrated the
    flagged ones, the rest, and all but the "at least k" most suspect (by the decisions' ranking)."""
    if decisions is None or not decisions.calibrated:
        rows = subsets(audited, None, None)
    else:
        ranked = [decisions.ids[i] for i in np.argsort(decisions.rank, kind="stable")]
        flagged = [i for i, f in zip(decisions.ids, decisions.flagged) if f]
        rows = subsets(ranked, flagged, decisions.at_least)
    return accuracy_table(rows, correct, reference)
