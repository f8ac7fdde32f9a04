"""A verdict from score files (``lara verdict``) and its text: which questions are audited, which are
the clean set, which subsets get their own verdict.

``subsets`` name groups of the audited questions: ``members`` (label 1), ``non_members`` (label 0)
or any split name of the questions file.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import ConfigError, InputError
from ..scorefiles import ControlTable, ScoredFiles, ScoredSet
from ..scores import CLEAN_SPLIT, ScoreTable
from .decision_table import QuestionDecisions
from .decisions import decide_questions
from .modes import VerdictSettings, compute_verdict

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
    if decisions is not None and decisions.diagnostic() is not None:
        verdict["questions_diagnostic"] = decisions.diagnostic()
    verdict["subsets"] = {}
    for name in settings.subsets if subsets is None else subsets:
        ids = subset_ids(audited_ids, name, labels, splits)
        if ids:
            verdict["subsets"][name] = compute_verdict(cut(audited_set).subset(ids), cut(ref), cut(clean_set), settings)
    return verdict, decisions


def scored_files(scores: ScoreTable, controls: ControlTable | None = None) -> ScoredFiles:
    """In-memory scores (and controls) as :func:`audit_verdict` takes them."""
    return ScoredFiles(scores, controls)
