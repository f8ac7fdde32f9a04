"""Likelihood detectors: PPL, Min-K%, Min-K%++, ReCaLL (on the model's greedy response by default,
or on the question) and LogProber (on the question)."""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np

from ..errors import ConfigError
from ..responders.base import Access, GenerationParams
from . import stats
from .base import Detector, DetectorResult, builtin_text, register

Target = Literal["response", "question"]
GREEDY_TOKENS = 256  # shared by every detector that reads the greedy answer, so they share it


def greedy_params(max_new_tokens: int) -> GenerationParams:
    return GenerationParams(max_new_tokens=max_new_tokens, temperature=0.0)


def _check_target(target: str) -> None:
    if target not in ("response", "question"):
        raise ConfigError(f"target {target!r}: choose response or question")


def target_logprobs(questions: Sequence[str], responder: Any, target: str, max_new_tokens: int):
    """Per question: (log-probs, μ, σ) of the target text — the greedy response (its recorded
    generation log-probs) or the question itself (teacher-forced inside its prompt format)."""
    _check_target(target)
    if target == "response":
        gens = [g[0] for g in responder.generate(questions, greedy_params(max_new_tokens))]
        return [(g.logprobs, g.mu, g.sigma) for g in gens]
    scored = score_questions(questions, responder)
    return [(s.logprobs, s.mu, s.sigma) for s in scored]


def score_questions(questions: Sequence[str], responder: Any) -> list[Any]:
    """Teacher-forced scores of the questions as the model reads them: after the prompt format's
    text that precedes the question (``"Q: "``, a chat header), which is not scored itself."""
    return responder.score([responder.question_context(q) for q in questions], list(questions))


class _LikelihoodDetector(Detector):
    def __init__(self, target: Target = "response", max_new_tokens: int = GREEDY_TOKENS) -> None:
        self.target = target
        self.max_new_tokens = max_new_tokens

    @property
    def needs(self) -> frozenset[Access]:  # type: ignore[override]
        return frozenset({Access.SAMPLING, Access.CHOSEN_LOGPROBS} if self.target == "response" else {Access.TEXT_LOGPROBS})


@register
class PPL(_LikelihoodDetector):
    name = "ppl"
    raw_name = "perplexity"
    raw_direction = "lower = member"
    summary = "perplexity of the greedy response (or the question): exp(−mean token log-prob)"

    def score(self, questions: Sequence[str], responder: Any) -> DetectorResult:
        return self._result([stats.perplexity(lp) for lp, _, _ in target_logprobs(questions, responder, self.target, self.max_new_tokens)])


@register
class MinK(_LikelihoodDetector):
    name = "min_k"
    raw_name = "min_k_logprob"
    raw_direction = "higher = member"
    summary = "Min-K% Prob: mean of the lowest k of token log-probs (k = 0.2)"

    def __init__(self, k: float = 0.2, target: Target = "response", max_new_tokens: int = GREEDY_TOKENS) -> None:
        super().__init__(target, max_new_tokens)
        self.k = k

    def score(self, questions: Sequence[str], responder: Any) -> DetectorResult:
        rows = target_logprobs(questions, responder, self.target, self.max_new_tokens)
        return self._result([stats.min_k_prob(lp, self.k) for lp, _, _ in rows])


@register
class MinKPlusPlus(MinK):
    name = "min_k_plus_plus"
    raw_name = "min_k_plus_plus_z"
    raw_direction = "higher = member"
    summary = "Min-K%++: lowest k of (log p − μ)/σ over the full vocabulary (k = 0.2)"

    @property
    def needs(self) -> frozenset[Access]:  # type: ignore[override]
        return super().needs | {Access.VOCAB_MOMENTS}

    def score(self, questions: Sequence[str], responder: Any) -> DetectorResult:
        rows = target_logprobs(questions, responder, self.target, self.max_new_tokens)
        if any(mu is None for _, mu, _ in rows):
            raise ConfigError("min_k_plus_plus needs full-vocabulary μ/σ, which this responder did not return")
        return self._result([stats.min_k_plus_plus(lp, mu, sigma, self.k) for lp, mu, sigma in rows])


@register
class ReCaLL(_LikelihoodDetector):
    name = "recall"
    raw_name = "recall_ratio"
    raw_direction = "higher = member"
    summary = "ReCaLL: LL(x | non-member prefix) / LL(x)"

    def __init__(self, prefix: str | None = None, n_prefix: int = 5, target: Target = "question",
                 max_new_tokens: int = GREEDY_TOKENS) -> None:
        super().__init__(target, max_new_tokens)
        self.prefix = prefix
        self.n_prefix = n_prefix

    @property
    def needs(self) -> frozenset[Access]:  # type: ignore[override]
        extra = {Access.SAMPLING} if self.target == "response" else set()
        return frozenset({Access.TEXT_LOGPROBS} | extra)

    def fit(self, clean_questions: Sequence[str] = ()) -> "ReCaLL":
        """The prefix: ``prefix`` if given, else the first ``n_prefix`` known-clean questions, else a
        built-in text that no benchmark contains."""
        if self.prefix is not None:
            self.prefix_ = self.prefix
        elif clean_questions:
            self.prefix_ = "\n\n".join(list(clean_questions)[: self.n_prefix])
        else:
            self.prefix_ = builtin_text("noise_prefix.v1.txt").strip()
        return self

    def score(self, questions: Sequence[str], responder: Any) -> DetectorResult:
        _check_target(self.target)
        prefix = getattr(self, "prefix_", None)
        if prefix is None:
            prefix = self.fit().prefix_
        if self.target == "question":
            contexts = [responder.question_context(q) for q in questions]
            plain = responder.score(contexts, list(questions))
            conditioned = responder.score([prefix + "\n\n" + c for c in contexts], list(questions))
            pairs = [(c.logprobs, p.logprobs) for c, p in zip(conditioned, plain)]
        else:
            gens = [g[0] for g in responder.generate(questions, greedy_params(self.max_new_tokens))]
            contexts = [responder.format(q) for q in questions]
            prefixed = [responder.format(prefix + "\n\n" + q) for q in questions]
            plain = responder.score(contexts, [g.text for g in gens])
            conditioned = responder.score(prefixed, [g.text for g in gens])
            pairs = [(c.logprobs, p.logprobs) for c, p in zip(conditioned, plain)]
        return self._result([stats.recall_ratio(c, p) for c, p in pairs])


@register
class LogProber(Detector):
    name = "logprober"
    raw_name = "logprober_safe_score"
    raw_direction = "lower = member"
    summary = "LogProber: log(−integral of the sorted cumulative token log-probs of the question)"
    needs = frozenset({Access.TEXT_LOGPROBS})

    def __init__(self, threshold: float = 1.0) -> None:
        self.threshold = threshold

    def score(self, questions: Sequence[str], responder: Any) -> DetectorResult:
        # the question as the model reads it; its first token is left out (SPEC §5, seed §2.2)
        scored = score_questions(questions, responder)
        safe = np.array([stats.logprober_safe_score(s.logprobs[1:]) for s in scored])
        return self._result(safe, contaminated=safe < self.threshold)
