"""Likelihood detectors: PPL, Min-K%, Min-K%++, zlib, ReCaLL (on the model's greedy response by
default, or on the question) and LogProber (on the question)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from lara_core.params import COUNT, SHARE, Interval, Options, Param, Text

from ..errors import ConfigError
from ..responders.base import Access, GenerationParams
from . import stats
from .base import Detector, DetectorResult, builtin_text, register

if TYPE_CHECKING:
    from ..responders.base import Responder

Target = Literal["response", "question"]
GREEDY_TOKENS = 1024  # SPEC §5 (the Self-Critique seed's budget); shared by every detector that reads the greedy answer


def greedy_params(max_new_tokens: int) -> GenerationParams:
    return GenerationParams(max_new_tokens=max_new_tokens, temperature=0.0)


def _check_target(target: str) -> None:
    if target not in ("response", "question"):
        raise ConfigError(f"target {target!r}: choose response or question")


@dataclass
class TargetText:
    """The text a likelihood detector reads and its token log-probs (``[T]``; μ, σ ``[T]`` or None)."""

    text: str
    logprobs: np.ndarray
    mu: np.ndarray | None = None
    sigma: np.ndarray | None = None


def read_targets(
    questions: Sequence[str], responder: Responder, target: str, max_new_tokens: int
) -> tuple[list[TargetText], list[list[Any]]]:
    """Per question the target text — the greedy response (its recorded generation log-probs) or
    the question itself (teacher-forced inside its prompt format) — and, per question, what was
    read (the generation or the text score)."""
    _check_target(target)
    if target == "response":
        gens = [g[0] for g in responder.generate(questions, greedy_params(max_new_tokens))]
        return [TargetText(g.text, g.logprobs, g.mu, g.sigma) for g in gens], [[g] for g in gens]
    scored = score_questions(questions, responder)
    return [TargetText(q, s.logprobs, s.mu, s.sigma) for q, s in zip(questions, scored)], [[s] for s in scored]


def score_questions(questions: Sequence[str], responder: Responder, lead: str | Sequence[str] = "") -> list[Any]:
    """Teacher-forced scores of the questions as the model reads them: after the prompt format's
    text that precedes the question (``"Q: "``, a chat header) and ``lead`` (one for all, or one
    per question), which are not scored themselves."""
    leads = [lead] * len(questions) if isinstance(lead, str) else list(lead)
    return responder.score([responder.question_context(x) for x in leads], list(questions))


def same_tokens(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The log-probs of two scores of one text over exactly the same tokens: the longest common
    run of token ids at the end of both. A text read after nothing has no prediction for its
    first token while the same text after a prefix has one, and a first token that absorbs the
    preceding character (``": What"`` vs ``"\n\nWhat"``) differs; those are left out of both.
    None when no token is common."""
    n = 0
    while n < min(len(a.token_ids), len(b.token_ids)) and a.token_ids[-1 - n] == b.token_ids[-1 - n]:
        n += 1
    return (a.logprobs[len(a.logprobs) - n :], b.logprobs[len(b.logprobs) - n :]) if n else None


class _LikelihoodDetector(Detector):
    target: Target = Param("response", Options(("response", "question")))
    max_new_tokens: int = Param(GREEDY_TOKENS, COUNT)

    @property
    def needs(self) -> frozenset[Access]:  # type: ignore[override]
        return frozenset(
            {Access.SAMPLING, Access.CHOSEN_LOGPROBS} if self.target == "response" else {Access.TEXT_LOGPROBS}
        )

    def _targets(self, questions: Sequence[str], responder: Responder) -> tuple[list[TargetText], list[list[Any]]]:
        return read_targets(questions, responder, self.target, self.max_new_tokens)


class _RescoringDetector(_LikelihoodDetector):
    """A detector that scores its target by teacher forcing under two conditions (with and without
    a prefix, under two models): it needs text log-probs, and generation for the response target."""

    @property
    def needs(self) -> frozenset[Access]:  # type: ignore[override]
        extra = {Access.SAMPLING} if self.target == "response" else set()
        return frozenset({Access.TEXT_LOGPROBS} | extra)


@register
class PPL(_LikelihoodDetector):
    name = "ppl"
    raw_column = "perplexity", "lower = member"
    statistic = "exp(−mean token log-prob) of the greedy response (`target=question`: of the question)"  # docs/detectors.md's table
    summary = "perplexity of the greedy response (or the question): exp(−mean token log-prob)"

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        rows, gens = self._targets(questions, responder)
        return self._result([stats.perplexity(r.logprobs) for r in rows], responses=gens)


@register
class MinK(_LikelihoodDetector):
    name = "min_k"
    raw_column = "min_k_logprob", "higher = member"
    statistic = "mean of the lowest ⌊k·n⌋ token log-probs (k = 0.2, at least one)"  # docs/detectors.md's table
    summary = "Min-K% Prob: mean of the lowest k of token log-probs (k = 0.2)"

    k: float = Param(0.2, SHARE)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        rows, gens = self._targets(questions, responder)
        return self._result([self._statistic(r) for r in rows], responses=gens)

    def _statistic(self, row: TargetText) -> float:
        """The lowest-k statistic of one scored target (Min-K%: of its token log-probs)."""
        return stats.min_k_prob(row.logprobs, self.k)


@register
class MinKPlusPlus(MinK):
    name = "min_k_plus_plus"
    raw_column = "min_k_plus_plus_z", "higher = member"
    statistic = "lowest k of (log p − μ)/σ, μ and σ over the full vocabulary (an API: over the top K, flagged)"  # docs/detectors.md's table
    summary = "Min-K%++: lowest k of (log p − μ)/σ over the full vocabulary (k = 0.2)"

    @property
    def needs(self) -> frozenset[Access]:  # type: ignore[override]
        return super().needs | {Access.VOCAB_MOMENTS}

    def _statistic(self, row: TargetText) -> float:
        """Min-K%++: of the token log-probs standardised by the vocabulary's μ/σ at each step."""
        if row.mu is None:
            raise ConfigError("min_k_plus_plus needs the vocabulary's μ/σ, which this responder did not return")
        return stats.min_k_plus_plus(row.logprobs, row.mu, row.sigma, self.k)


@register
class Zlib(_LikelihoodDetector):
    name = "zlib"
    raw_column = "zlib_ratio", "lower = member"
    statistic = (
        "mean token NLL of the greedy response / its zlib-compressed length in bytes"  # docs/detectors.md's table
    )
    summary = "zlib: mean token NLL of the greedy response (or the question) / its zlib-compressed length in bytes"

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        rows, gens = self._targets(questions, responder)
        return self._result([stats.zlib_ratio(r.logprobs, r.text) for r in rows], responses=gens)


@register
class ReCaLL(_RescoringDetector):
    name = "recall"
    raw_column = "recall_ratio", "higher = member"
    statistic = "LL(x ∣ non-member prefix) / LL(x) over the same tokens of x, the greedy response by default"  # docs/detectors.md's table
    summary = "ReCaLL: LL(x | non-member prefix) / LL(x) over the same tokens of x"

    prefix: str | None = Param(None, Text(optional=True))
    n_prefix: int = Param(5, COUNT)

    def fit(
        self,
        clean_questions: Sequence[str] = (),
        reference: Responder | None = None,
        answers: Sequence[Any] | None = None,
    ) -> "ReCaLL":
        """The prefix pool: ``prefix`` if given, else known-clean questions (the first
        ``n_prefix`` that are not the scored question), else a built-in text no benchmark holds."""
        self.clean_ = list(clean_questions)
        return self

    def prefix_for(self, question: str) -> str | None:
        """The non-member prefix of ``question``: never one that contains it (None then)."""
        if self.prefix is not None:
            prefix = self.prefix
        elif getattr(self, "clean_", None):
            prefix = "\n\n".join([c for c in self.clean_ if question not in c][: self.n_prefix])
        else:
            prefix = builtin_text("noise_prefix.v1.txt").strip()
        return prefix if prefix and question not in prefix else None

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        _check_target(self.target)
        prefixes = [self.prefix_for(q) for q in questions]
        usable = [i for i, p in enumerate(prefixes) if p is not None]
        leads = [prefixes[i] + "\n\n" for i in usable]
        read: list[list[Any]] = [[] for _ in questions]
        if self.target == "question":
            texts = [questions[i] for i in usable]
            plain = score_questions(texts, responder)
            conditioned = score_questions(texts, responder, leads)
        else:
            gens = [
                g[0] for g in responder.generate([questions[i] for i in usable], greedy_params(self.max_new_tokens))
            ]
            for i, g in zip(usable, gens):
                read[i].append(g)
            texts = [g.text for g in gens]
            plain = responder.score([responder.format(questions[i]) for i in usable], texts)
            conditioned = responder.score(
                [responder.format(lead + questions[i]) for lead, i in zip(leads, usable)], texts
            )
        raw = np.full(len(questions), np.nan)
        mismatched = 0
        for i, c, p in zip(usable, conditioned, plain):
            read[i] += [p, c]
            pair = same_tokens(c, p)
            mismatched += pair is None
            if pair is not None:
                raw[i] = stats.recall_ratio(*pair)
        notes = []
        if len(usable) < len(questions):
            notes.append(
                f"recall: {len(questions) - len(usable)} question(s) left unscored (NaN): the given prefix contains them"
            )
        if mismatched:
            notes.append(
                f"recall: {mismatched} text(s) share no token with and without the prefix; left unscored (NaN)"
            )
        return self._result(raw, notes=notes, responses=read)


@register
class LogProber(Detector):
    name = "logprober"
    raw_column = "logprober_safe_score", "lower = member"
    statistic = "log(−∫ cumulative sorted log-probs) of the question (decision: < 1)"  # docs/detectors.md's table
    summary = "LogProber: log(−integral of the sorted cumulative token log-probs of the question)"
    needs = frozenset({Access.TEXT_LOGPROBS})

    threshold: float = Param(1.0, Interval(integer=False))

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        # the question as the model reads it: every token that has a prediction (SPEC §5)
        scored = score_questions(questions, responder)
        safe = np.array([stats.logprober_safe_score(s.logprobs) for s in scored])
        return self._result(safe, contaminated=safe < self.threshold, responses=[[s] for s in scored])
