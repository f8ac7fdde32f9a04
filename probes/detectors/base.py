"""Detector classes and their registry (the single source of truth for names, directions, access
needs and defaults; the CLI's choices and the README table come from it).

Estimator style: hyperparameters are stored unchanged by ``__init__``; ``fit`` (optional, e.g.
ReCaLL's prefix from clean questions) returns ``self``; ``score`` returns one value per question,
oriented higher = member, plus the raw statistic under its own name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from generation.config import default_prompts_dir
from lara_core.params import Constraint, Param, check_values

from ..errors import ConfigError, MismatchError
from ..responders.base import Access, GenerationParams

if TYPE_CHECKING:
    from ..responders.base import Responder


@dataclass
class DetectorResult:
    """Scores of one detector.

    Attributes:
        name: the detector (score column name).
        scores: ``[N]`` higher = member.
        raw: ``[N]`` the natural statistic (``raw_name``), in its own direction.
        raw_name: e.g. ``ppl``, ``min_knn_distance``.
        extra: further per-question values (e.g. a decision rule's verdicts).
        notes: approximations used, counts.
        n_responses: ``[N]`` generated responses each question's statistic read.
        capped: ``[N]`` of them, those that stopped at their token budget (SPEC §5 records them:
            a capped answer is a truncated one).
        prompt_cut: ``[N]`` prompts (or scored contexts) of the question cut to fit the model's
            context.
    """

    name: str
    scores: np.ndarray
    raw: np.ndarray
    raw_name: str
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    n_responses: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    capped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    prompt_cut: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_capped(self) -> int:
        return int(self.capped.sum())

    def responses_summary(self, ids: Sequence[str] = ()) -> dict[str, Any]:
        """Generated responses read, how many stopped at the token budget (``finish_reason``
        length) and how many prompts were cut; with ``ids`` (one per question), which questions."""
        out: dict[str, Any] = {
            "n": int(self.n_responses.sum()),
            "capped": self.n_capped,
            "prompt_cut": int(self.prompt_cut.sum()),
        }
        if len(ids):
            out["capped_ids"] = [i for i, c in zip(ids, self.capped) if c]
            out["prompt_cut_ids"] = [i for i, c in zip(ids, self.prompt_cut) if c]
        return out


class Detector:
    """Base class. Subclasses set the class attributes and implement :meth:`score`."""

    name: ClassVar[str]
    raw_column: ClassVar[tuple[str, str]]  # the natural statistic's name and direction, e.g. ("ppl", "lower = member")
    raw_name: ClassVar[str]  # raw_column's two halves, set by register()
    raw_direction: ClassVar[str]  # "higher = member" or "lower = member"
    needs: ClassVar[frozenset[Access]]
    summary: ClassVar[str]
    statistic: ClassVar[str]  # what it computes, as docs/detectors.md's table shows it (:mod:`.table`)
    capped_by_design: ClassVar[bool] = False  # its responses stop at the budget on purpose (CDD's 100 tokens)
    requires_reference: ClassVar[bool] = (
        False  # compares with a reference model (``ref``, ``policy_drift``, ``reward_gain``)
    )
    reference_needs: ClassVar[frozenset[Access]] = frozenset({Access.TEXT_LOGPROBS})  # what it asks of that reference
    requires_answers: ClassVar[bool] = (
        False  # reads each question's known answer (``reward_gain``); controls need theirs
    )
    # its score is already audited minus reference of one statistic of the same text (``ref``, ``reward_gain``): in the
    # verdict's reference mode it is its own difference (the reference scores 0 against itself: subtracting that is a no-op)
    reference_difference: ClassVar[bool] = False
    samples_at_temperature: ClassVar[bool] = (
        False  # samples answers at its ``temperature`` (the run's sampling temperature applies)
    )
    parameters: ClassVar[dict[str, Constraint]] = {}  # every hyperparameter's type and range, from its Param
    declared: ClassVar[dict[str, Param]] = {}  # every hyperparameter's declaration (own first, then inherited)
    family: ClassVar[str] = "likelihood & completion"  # its panel of the report's roc.png

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Collect the class's :class:`~.params.Param` attributes (its own first, then its bases')."""
        super().__init_subclass__(**kwargs)
        declared: dict[str, Param] = {}
        for klass in cls.__mro__:
            for key, value in vars(klass).items():
                if isinstance(value, Param) and key not in declared:
                    declared[key] = value
        cls.declared = declared
        cls.parameters = {key: p.constraint for key, p in declared.items()}

    def __init__(self, **params: Any) -> None:
        """Hyperparameters by keyword, each checked against its declaration (unknown, wrong type or
        out of range: :class:`ConfigError`, one line), stored unchanged; the rest take their defaults."""
        check_values(getattr(self, "name", type(self).__name__), params, self.parameters)
        for key, declaration in self.declared.items():
            setattr(self, key, params.get(key, declaration.default))

    def check_params(self) -> None:
        """Refuse what ties hyperparameters together or reads a file (:class:`ConfigError`), before
        any work; each one's own type and range is declared in ``parameters`` and checked first."""

    def sampling_params(self) -> GenerationParams:
        """Its sampled answers' settings, from its own declared parameters: ``n``, ``temperature``,
        ``top_p`` (1 when it declares none), ``seed`` and the token budget (``max_new_tokens``;
        CDD's ``max_tokens``)."""
        values = {key: getattr(self, key) for key in ("temperature", "top_p", "n", "seed") if key in self.declared}
        budget = "max_new_tokens" if "max_new_tokens" in self.declared else "max_tokens"
        return GenerationParams(max_new_tokens=getattr(self, budget), **values)

    def _require(self, ok: bool, parameter: str, rule: str) -> None:
        if not ok:
            raise ConfigError(f"detector {self.name!r}: {parameter} = {getattr(self, parameter)!r}, but {rule}")

    def fit(
        self,
        clean_questions: Sequence[str] = (),
        reference: Responder | None = None,
        answers: Sequence[Any] | None = None,
    ) -> "Detector":
        """Learn what the detector needs before scoring: known-clean questions, a reference model's
        responder, the scored questions' known answers. Returns ``self``. The base keeps what the
        detector declares it uses: the reference responder (``reference_``) when it compares with
        one, the answers (``answers_``) when it reads them; the rest is ignored."""
        if self.requires_reference:
            self.reference_ = reference
        if self.requires_answers:
            self.answers_ = list(answers) if answers is not None else None
        return self

    @classmethod
    def usable_answer(cls, answer: Any) -> bool:
        """Whether this detector can use a question's known answer (given; one that judges answers
        also needs it readable)."""
        return has_answer(answer)

    @classmethod
    def answers_met(cls, answers: Sequence[Any]) -> bool:
        """Whether its need for answers is met: it reads none, or some question has one it can use."""
        return not cls.requires_answers or any(cls.usable_answer(a) for a in answers)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        """``min_knn(n=8, k=3, temperature=0.7, …)``: the registry name and every hyperparameter."""
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def get_params(self) -> dict[str, Any]:
        """Hyperparameters as given (every declared one)."""
        return {name: getattr(self, name) for name in self.declared}

    def _result(
        self,
        raw: Sequence[float],
        *,
        notes: Sequence[str] = (),
        responses: Sequence[Sequence[Any]] | None = None,
        **extra: Any,
    ) -> DetectorResult:
        """Orient ``raw``. ``responses``: per question, what its statistic read — generations
        (counted, those capped, those whose prompt was cut) and text scores (those cut)."""
        raw_arr = np.asarray(raw, dtype=np.float64)
        scores = raw_arr if self.raw_direction == "higher = member" else -raw_arr
        responses = responses if responses is not None else [[] for _ in raw_arr]
        if len(responses) != len(raw_arr):
            raise ValueError(f"{self.name}: responses for {len(responses)} questions, scores for {len(raw_arr)}")
        return DetectorResult(
            self.name,
            scores,
            raw_arr,
            self.raw_name,
            {k: np.asarray(v) for k, v in extra.items()},
            list(notes),
            n_responses=_count(responses, lambda x: hasattr(x, "finish_reason")),
            capped=_count(responses, lambda x: getattr(x, "capped", False)),
            prompt_cut=_count(responses, lambda x: getattr(x, "prompt_cut", 0) > 0),
        )


def has_answer(answer: Any) -> bool:
    """Whether a question's known answer is given (not None, not blank): the one rule for every check."""
    return answer is not None and str(answer).strip() != ""


def _count(responses: Sequence[Sequence[Any]], test: Any) -> np.ndarray:
    """``[N]`` per question, how many of what it read pass ``test``."""
    return np.array([sum(bool(test(x)) for x in row) for row in responses], dtype=np.int64)


REGISTRY: dict[str, type[Detector]] = {}


def register(cls: type[Detector]) -> type[Detector]:
    column = getattr(cls, "raw_column", None)
    if not (isinstance(column, tuple) and len(column) == 2):
        raise ValueError(
            f"{cls.__name__}: declare its natural statistic as raw_column = (name, 'higher = member' or 'lower = member')"
        )
    cls.raw_name, cls.raw_direction = column
    if cls.raw_direction not in ("higher = member", "lower = member"):
        raise ValueError(
            f"{cls.__name__}: raw_column's direction must be 'higher = member' or 'lower = member', "
            f"not {cls.raw_direction!r}"
        )
    if not getattr(cls, "statistic", ""):
        raise ValueError(f"{cls.__name__}: say what it computes in `statistic` (docs/detectors.md's table shows it)")
    taken = REGISTRY.get(cls.name)
    if taken is not None and (taken.__module__, taken.__qualname__) != (
        cls.__module__,
        cls.__qualname__,
    ):  # a reload is fine
        raise ValueError(
            f"detector name {cls.name!r} is taken by {taken.__module__}.{taken.__qualname__}; "
            f"give {cls.__module__}.{cls.__qualname__} another name"
        )
    REGISTRY[cls.name] = cls
    return cls


def order_registry(order: Sequence[str]) -> None:
    """Put :data:`REGISTRY` in the declared ``order`` (in place), refusing a registered detector the
    order leaves out and a name in it that no imported module registered."""
    unlisted = [name for name in REGISTRY if name not in order]
    missing = [name for name in order if name not in REGISTRY]
    if unlisted or missing:
        raise ValueError(
            "probes.detectors.ORDER and the registry differ: "
            + "; ".join(
                part
                for part in (
                    f"registered but not in ORDER: {', '.join(unlisted)}" if unlisted else "",
                    f"in ORDER but never registered (is its module imported?): {', '.join(missing)}" if missing else "",
                )
                if part
            )
        )
    ordered = {name: REGISTRY[name] for name in order}
    REGISTRY.clear()
    REGISTRY.update(ordered)


def get_detector(name: str, /, *, params_key: str = "", **params: Any) -> Detector:
    """A detector by registry name, with ``params`` as its hyperparameters, checked once, where it is
    built (its ``__init__``: declared types and ranges; then ``check_params``: what ties them
    together). ``params_key``: how the user wrote them, prefixed to the message (``detect.params.``)."""
    known_detector(name)
    try:
        detector = REGISTRY[name](**params)
    except ConfigError as error:
        raise ConfigError(f"{params_key}{error}" if params_key else str(error)) from None
    try:
        detector.check_params()
    except ConfigError as error:
        raise ConfigError(f"{params_key}{name}: {error}" if params_key else str(error)) from None
    return detector


def known_detector(name: str) -> None:
    """Refuse (:class:`ConfigError`, one line) a name no detector has, with the closest one."""
    if name not in REGISTRY:
        close = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown detector {name!r}.{hint} Available: {', '.join(sorted(REGISTRY))}")


def check_access(detector: Detector, responder: Responder) -> list[str]:
    """Refuse a responder that lacks what the detector needs; returns notes on approximations used.

    Top-K quantities (API log-probs) stand in for the full-vocabulary ones, each recorded as an
    approximation: the entropy (the top-K part of −Σ p log p, a lower bound) and Min-K%++'s μ/σ
    (moments of log p under p renormalised over the top K; SPEC §5 allows it on API backends).
    """
    missing = set(detector.needs) - set(responder.access)
    notes = []
    if Access.ENTROPY_EXACT in missing and Access.ENTROPY_TOPK in responder.access:
        missing.discard(Access.ENTROPY_EXACT)
        notes.append(
            f"{detector.name}: entropies from the endpoint's top-K log-probs (a lower bound of the exact entropy)"
        )
    if Access.VOCAB_MOMENTS in missing and Access.VOCAB_MOMENTS_TOPK in responder.access:
        missing.discard(Access.VOCAB_MOMENTS)
        notes.append(
            f"{detector.name}: μ/σ of log p from the endpoint's top-K log-probs renormalised over the top K "
            "(an approximation of the full-vocabulary moments)"
        )
    if missing:
        raise ConfigError(
            f"detector {detector.name!r} needs {', '.join(sorted(m.value for m in missing))}, which this responder "
            f"({responder.identity.get('kind')}) cannot supply; run it on a local model (--model DIR)"
        )
    return notes


def check_reference(detector: Detector, responder: Responder, reference: Responder) -> None:
    """Refuse, before any work, a detector that compares with a reference model when there is none,
    when it cannot be compared token for token, or when the reference cannot score text."""
    if not detector.requires_reference:
        return
    if reference is None:
        raise ConfigError(
            f"detector {detector.name!r} needs a reference model (e.g. the checkpoint before RL): "
            "lara detect ... --reference DIR, or in lara run a controls: entry with reference: true"
        )
    lacking = set(detector.reference_needs) - set(reference.access)
    if lacking:
        raise ConfigError(
            f"detector {detector.name!r} needs {', '.join(sorted(a.value for a in lacking))} of the reference "
            "model, which it cannot supply; give a local checkpoint"
        )
    if not set(detector.reference_needs) - {Access.SAMPLING}:
        return  # it only reads the reference's sampled answers (reward gain): any model, any tokenizer, served or local
    ours, theirs = (
        getattr(responder, "vocabulary_fingerprint", None),
        getattr(reference, "vocabulary_fingerprint", None),
    )
    if ours is None or theirs is None:
        raise ConfigError(
            f"detector {detector.name!r} compares log-probs of the same tokens under two models, so both "
            "must be local checkpoints whose tokenizers can be compared (--model DIR --reference DIR)"
        )
    if ours != theirs:
        raise MismatchError(
            f"the reference model's tokenizer differs from the audited model's (vocabulary {theirs[:12]}… "
            f"vs {ours[:12]}…); {detector.name!r} compares the same tokens, so use a reference of the same "
            "family (e.g. the audited model's pre-RL base)"
        )


def builtin_text(name: str) -> str:
    """A text shipped with the toolkit's prompt templates (``configs/prompts``)."""

    return (default_prompts_dir() / name).read_text(encoding="utf-8")


def template_text(spec: str) -> str:
    """A built-in template file name, or a path to the user's own."""
    path = Path(spec)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    try:
        return builtin_text(spec)
    except FileNotFoundError:
        raise ConfigError(f"template {spec!r} is neither a file nor a built-in template") from None
