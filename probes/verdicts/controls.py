"""Matched controls (SPEC §8.1): each question's first C valid similar questions (the table of
detector scores on them, ``SCORES.controls.csv``, is :class:`probes.scorefiles.ControlTable`).

The similars of a perturbation set are freshly generated, so the audited model cannot have
trained on them, and they share the question's structure: they are its never-trained-on controls.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import InputError

DEFAULT_CONTROLS = 3
# the per-question decisions' controls for the detectors that do not sample, where none is named:
# the measured best (docs/verdicts.md, "Which settings": on the demo 10 flag what 20 do, 3 far fewer)
DEFAULT_DECISION_CONTROLS = 10


def decision_control_count(controls: int, decision_controls: int | None) -> int:
    """The controls the detectors that do not sample score: ``decision_controls`` where given, else
    :data:`DEFAULT_DECISION_CONTROLS` (never fewer than the verdict's ``controls``; 0 without controls)."""
    if decision_controls is not None:
        return decision_controls
    return max(controls, DEFAULT_DECISION_CONTROLS) if controls > 0 else 0


def control_texts(sets: Sequence[Any], n_controls: int = DEFAULT_CONTROLS) -> dict[str, list[str]]:
    """``{question id: its first n_controls valid similars}`` from perturbation sets — the K
    similars, then the further ones drawn only as controls (a question with fewer keeps what it
    has; SPEC §8.1 leaves one with fewer than 2 out later)."""
    if n_controls < 1:
        raise InputError(f"the number of controls must be >= 1, got {n_controls}")
    return {s.question.id: [text for text, _ in _controls_of(s)][:n_controls] for s in sets}


def control_answers(sets: Sequence[Any], n_controls: int = DEFAULT_CONTROLS) -> dict[str, list[Any]]:
    """``{question id: the answers of its controls}``, aligned with :func:`control_texts` (None
    where the generator could not re-solve one, or the set has no answers)."""
    return {s.question.id: [answer for _, answer in _controls_of(s)][:n_controls] for s in sets}


def _controls_of(s: Any) -> list[tuple[str, Any]]:
    """A set's valid similars then further controls, each with its re-solved answer (or None)."""
    answers = getattr(s, "answers", None) or {}
    texts = [*s.similars, *getattr(s, "controls", [])]
    given = [*(answers.get("similars") or [None] * len(s.similars)), *(answers.get("controls") or [])]
    given += [None] * (len(texts) - len(given))
    return [(text, answer) for text, answer in zip(texts, given) if text is not None]
