"""What a run checks and notes of each detector around its scores: the responder that feeds it (its
engine's hf fallback where the engine cannot), its reference model, the answers it reads — all
refused before any work — and the notes on responses cut at the token budget, prompts cut to the
context and questions left without a score."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import ConfigError
from .base import Detector, check_access, check_reference, has_answer

if TYPE_CHECKING:
    from ..responders.base import Responder


def capped_notes(detector: Any, result: Any) -> list[str]:
    """SPEC §5: responses that stop at the token budget are counted (in the meta, always) and noted;
    a detector whose responses mostly did says so. Not for detectors whose budget is part of the
    method (CDD compares the first ``max_tokens`` tokens, partial completion the remainder's length)."""
    if not result.n_capped or detector.capped_by_design:
        return []
    budget = detector.get_params().get("max_new_tokens")
    n = int(result.n_responses.sum())
    text = f"{detector.name}: {result.n_capped} of {n} responses stopped at the token budget ({budget})"
    if result.n_capped * 2 > n:
        text += "; most answers are truncated, so their statistics compare prefixes: raise max_new_tokens"
    return [text]


def unmet_answers(detector: type[Detector] | Detector, answers: Sequence[Any] | None) -> str | None:
    """Why ``detector`` cannot use these known answers (and what to give), or None when it can."""
    if answers is not None and detector.answers_met(answers):
        return None
    if answers is not None and any(has_answer(a) for a in answers):
        return "no answer given is one the verifier can read: give each as a number, text, or LaTeX math-verify parses"
    return "no question has one: give questions with an 'answer' field (lara questions import extracts it)"


def check_answers(detector: Detector, ids: Sequence[str], answers: Sequence[Any] | None) -> None:
    """Refuse, before any work, a detector that reads answers when no question has one it can use."""
    why = unmet_answers(detector, answers)
    if why is not None:
        raise ConfigError(
            f"detector {detector.name!r} compares answers with each question's known answer, and {why}; "
            "or drop the detector"
        )


def nan_notes(name: str, result: Any, ids: Sequence[str]) -> list[str]:
    """Questions a detector could not score (NaN) are counted where the scores are shown; every
    statistic downstream leaves them out and counts them again."""
    missing = [i for i, v in zip(ids, result.scores) if np.isnan(v)]
    if not missing:
        return []
    shown = ", ".join(missing[:5]) + (", …" if len(missing) > 5 else "")
    return [f"{name}: {len(missing)} of {len(ids)} questions have no score (NaN: {shown})"]


def cut_notes(name: str, result: Any) -> list[str]:
    """SPEC §5: prompts longer than the model's context are cut for their own row only; say how many."""
    n = int(result.prompt_cut.sum())
    if not n:
        return []
    questions = int((result.prompt_cut > 0).sum())
    return [
        f"{name}: {n} prompt(s) of {questions} question(s) exceeded the model's context and lost their first tokens "
        "(per question in the raw table's _prompt_cut column and the meta's prompt_cut_ids)"
    ]


def _feeding(detector: Any, responder: Responder) -> tuple[Responder, list[str]]:
    """The responder that runs ``detector`` — ``responder``, or its hf ``fallback`` when its engine
    cannot feed the detector (said in a note) — and the approximation notes."""
    try:
        return responder, check_access(detector, responder)
    except ConfigError:
        fallback = getattr(responder, "fallback", None)
        if fallback is None:
            raise
        missing = ", ".join(sorted(a.value for a in set(detector.needs) - set(responder.access)))
        notes = check_access(detector, fallback)
        return fallback, notes + [
            f"{detector.name}: runs on the hf engine ({responder.identity.get('kind')} does not send {missing})"
        ]


def fed_detectors(
    detectors: Sequence[Detector],
    responder: Responder,
    reference: Responder | None,
    ids: Sequence[str],
    answers: Sequence[Any] | None,
) -> tuple[dict[str, Responder], dict[str, Responder | None], list[str]]:
    """Each detector's responder and reference responder, refusing before any work a detector whose
    needs cannot be met; the approximation notes."""
    notes: list[str] = []
    feeding: dict[str, Responder] = {}
    references: dict[str, Responder | None] = {}
    for detector in detectors:
        feeding[detector.name], more = _feeding(detector, responder)
        notes += more
        # a detector moved to the hf engine compares with the reference on the hf engine too
        references[detector.name] = (
            getattr(reference, "fallback", reference) if feeding[detector.name] is not responder else reference
        )
        check_reference(detector, feeding[detector.name], references[detector.name])
        if detector.requires_answers:
            check_answers(detector, ids, answers)
    return feeding, references, notes
