"""One suite of generic checks for every registered detector (scikit-learn's
``parametrize_with_checks`` habit): what each check asks follows from the detector's own tags —
its declared direction, parameters, access needs, reference and answers — never from a hand list.

Each check is ``check_<what>(name, models, folder)``: ``name`` a registry name, ``models`` two
loaded tiny models of one tokenizer and other weights (the audited model, the reference of the
detectors that compare with one), ``folder`` for response stores. ``tests/probes/test_detector_checks.py`` runs every check on every registered detector; a
detector added by the recipe of docs/development.md is in it with no test file edited.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import numpy as np

from lara_core.params import Interval
from probes.detectors import REGISTRY, get_detector
from probes.detectors.selection import settings_digest
from probes.responders.base import Access
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore

QUESTIONS = ["What is 2 + 3?", "Ann has 4 pens and buys 3 more. How many pens?", "What is 10 - 6?"]
ANSWERS = ["5", "7", "4"]
CLEAN = ["What is 1 + 1?", "Bob has 2 cats. How many cats?", "What is 9 - 3?", "What is 3 + 3?", "Hi"]
PROMPT = PromptFormat(mode="raw", template="Q: {prompt}\nA:")
BUDGET = 8  # tokens of every answer the checks sample: a tiny model, a few seconds a detector


def quick_params(name: str) -> dict[str, Any]:
    """Small values of the declared parameters, from their names and constraints alone: every
    token budget 8, every integer ``n`` (samples) 3 and integer ``k`` 2; the rest their defaults."""
    out = {}
    for key, param in REGISTRY[name].declared.items():
        integer = isinstance(param.constraint, Interval) and param.constraint.integer
        if key in ("max_new_tokens", "max_tokens"):
            out[key] = BUDGET
        elif integer and key == "n":
            out[key] = 3
        elif integer and key == "k":
            out[key] = 2
    return out


class AccessViolation(AssertionError):
    """A detector asked a model for something it did not declare."""


class DeclaredOnly:
    """A responder that supplies only the access kinds ``access`` (a detector's declaration):
    asking for another kind raises :class:`AccessViolation`; the fields of the answers that carry
    undeclared kinds come back blank (NaN, None or empty), so a detector reading them scores
    otherwise than with everything, which the check compares."""

    def __init__(self, inner: Any, access: frozenset[Access]) -> None:
        self.inner, self.access = inner, frozenset(access)
        self.identity, self.counter = inner.identity, inner.counter

    def _require(self, kind: Access, method: str) -> None:
        if kind not in self.access:
            raise AccessViolation(f"{method} needs {kind.value}, which the detector does not declare")

    def generate(self, prompts: Any, params: Any) -> Any:
        self._require(Access.SAMPLING, "generate")
        return [[self._blank(g) for g in row] for row in self.inner.generate(prompts, params)]

    def complete(self, texts: Any, params: Any) -> Any:
        self._require(Access.SAMPLING, "complete")
        return [[self._blank(g) for g in row] for row in self.inner.complete(texts, params)]

    def score(self, contexts: Any, texts: Any) -> Any:
        self._require(Access.TEXT_LOGPROBS, "score")
        return [self._blank_score(s) for s in self.inner.score(contexts, texts)]

    def score_ids(self, pairs: Any) -> Any:
        self._require(Access.TEXT_LOGPROBS, "score_ids")
        return [self._blank_score(s) for s in self.inner.score_ids(pairs)]

    def token_spans(self, text: str) -> Any:
        self._require(Access.TOKEN_IDS, "token_spans")
        return self.inner.token_spans(text)

    def _blank_score(self, s: Any) -> Any:
        """A scored text's tokens come with their log-probs (an API's echoed log-probs name them
        too); its vocabulary moments only where declared."""
        moments = self.access & {Access.VOCAB_MOMENTS, Access.VOCAB_MOMENTS_TOPK}
        return s if moments else dataclasses.replace(s, mu=None, sigma=None)

    def divergence(self, rollouts: Any, reference: Any) -> Any:
        self._require(Access.FULL_DISTRIBUTION, "divergence")
        return self.inner.divergence(rollouts, getattr(reference, "inner", reference))

    def __getattr__(self, name: str) -> Any:  # format, question_context, … (and the local model under it)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _blank(self, g: Any) -> Any:
        nan = np.full(len(g.logprobs), np.nan)
        entropy = self.access & {Access.ENTROPY_EXACT, Access.ENTROPY_TOPK}
        moments = self.access & {Access.VOCAB_MOMENTS, Access.VOCAB_MOMENTS_TOPK}
        return dataclasses.replace(
            g,
            logprobs=g.logprobs if Access.CHOSEN_LOGPROBS in self.access else nan,
            entropies=g.entropies if entropy else nan,
            mu=g.mu if moments else None,
            sigma=g.sigma if moments else None,
            token_ids=g.token_ids if Access.TOKEN_IDS in self.access else [],
        )


def responder(model: Any, folder: Path, tag: str) -> CachedResponder:
    """A fresh cached responder of ``model`` (its own store, ``folder/tag.sqlite``)."""
    return CachedResponder(LocalResponder(model, PROMPT, batch_size=16), ResponseStore(folder / f"{tag}.sqlite"))


def run(
    name: str, models: Any, folder: Path, questions: list[str] = QUESTIONS, restrict: bool = False, tag: str = "a"
) -> Any:
    """``name`` at :func:`quick_params`, fitted on the clean questions (the second model as the
    reference; the gold answers) and scoring ``questions`` on the first; with ``restrict``, through
    :class:`DeclaredOnly` responders that supply what it declares and nothing more."""
    detector = get_detector(name, **quick_params(name))
    audited = responder(models[0], folder, f"{tag}-audited")
    reference = responder(models[1], folder, f"{tag}-reference") if detector.requires_reference else None
    if restrict:
        audited = DeclaredOnly(audited, detector.needs)
        reference = DeclaredOnly(reference, detector.reference_needs) if reference is not None else None
    answers = [ANSWERS[QUESTIONS.index(q)] for q in questions]
    detector.fit(CLEAN, reference=reference, answers=answers)
    return detector.score(questions, audited)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True)


def check_one_score_per_question_in_order(name: str, models: Any, folder: Path) -> None:
    """The same scores whatever the questions' order (a rotation, which a fixed reordering of the
    output does not survive)."""
    forward = run(name, models, folder)
    rotation = [1, 2, 0]
    rotated = run(name, models, folder, questions=[QUESTIONS[i] for i in rotation], tag="b")
    assert forward.scores.shape == forward.raw.shape == (len(QUESTIONS),)
    assert np.isfinite(forward.raw).any(), "no finite score: the check would compare nothing"
    _same(rotated.scores, forward.scores[rotation])
    _same(rotated.raw, forward.raw[rotation])


def check_direction_is_the_declared_one(name: str, models: Any, folder: Path) -> None:
    cls = REGISTRY[name]
    assert cls.raw_direction in ("higher = member", "lower = member") and cls.raw_name
    result = run(name, models, folder)
    sign = 1.0 if cls.raw_direction == "higher = member" else -1.0
    assert result.name == name and result.raw_name == cls.raw_name
    _same(result.scores, sign * result.raw)


def check_nan_is_passed_through_and_counted(name: str, models: Any, folder: Path) -> None:
    from generation.records import Question
    from probes.detectors.run import run_detectors

    detector = get_detector(name, **quick_params(name))
    given = detector._result([1.0, np.nan, -2.0])
    assert np.isnan(given.scores[1]) and np.isfinite(given.scores[[0, 2]]).all()
    audited = responder(models[0], folder, "counted")
    reference = responder(models[1], folder, "counted-ref") if detector.requires_reference else None
    questions = [Question(f"q{i}", q, answer=a) for i, (q, a) in enumerate(zip(QUESTIONS, ANSWERS))]
    summary = run_detectors([detector], questions, audited, reference=reference, clean_questions=CLEAN)
    column = summary.table.columns[name]
    assert summary.info["detectors"][name]["n_nan"] == int(np.isnan(column).sum())
    assert summary.info["detectors"][name]["n_nonfinite"] == int((~np.isfinite(column)).sum())


def check_parameters_round_trip(name: str, models: Any, folder: Path) -> None:
    cls = REGISTRY[name]
    for key, param in cls.declared.items():
        assert param.constraint.holds(param.default) or param.default is None, f"{key}'s default breaks its constraint"
    detector = get_detector(name, **quick_params(name))
    again = get_detector(name, **detector.get_params())
    assert again.get_params() == detector.get_params() and set(detector.get_params()) == set(cls.declared)
    assert settings_digest(again) == settings_digest(detector) and repr(again) == repr(detector)
    assert repr(detector).startswith(f"{name}(")


def check_seeded_runs_are_identical(name: str, models: Any, folder: Path) -> None:
    first, second = run(name, models, folder, tag="first"), run(name, models, folder, tag="second")
    _same(first.raw, second.raw)
    _same(first.scores, second.scores)


def check_asks_only_what_it_declares(name: str, models: Any, folder: Path) -> None:
    everything = run(name, models, folder, tag="all")
    declared = run(name, models, folder, restrict=True, tag="declared")
    _same(declared.raw, everything.raw)


CHECKS: tuple[Callable[[str, Any, Path], None], ...] = (
    check_one_score_per_question_in_order,
    check_direction_is_the_declared_one,
    check_nan_is_passed_through_and_counted,
    check_parameters_round_trip,
    check_seeded_runs_are_identical,
    check_asks_only_what_it_declares,
)


def detector_checks() -> list[tuple[str, Callable[[str, Any, Path], None]]]:
    """Every (registered detector, check) pair, for ``pytest.mark.parametrize``."""
    return [(name, check) for name in REGISTRY for check in CHECKS]


__all__ = ["CHECKS", "detector_checks", "quick_params"]
