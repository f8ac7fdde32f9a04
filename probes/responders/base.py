"""What a responder is: the model access the output-level detectors need, behind one interface.

Two implementations: :class:`probes.responders.local.LocalResponder` (a Hugging Face causal LM,
full logits) and an OpenAI-compatible endpoint (``logprobs``/``top_logprobs``). Each declares the
:class:`Access` it supplies; each detector declares the access it needs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, Sequence

import numpy as np


class Access(str, Enum):
    """Kinds of model access a detector may need."""

    SAMPLING = "sampling"  # generate text (greedy and sampled)
    TOKEN_IDS = "token_ids"  # the token ids of generated text
    CHOSEN_LOGPROBS = "chosen_logprobs"  # log-prob of each generated token
    ENTROPY_EXACT = "entropy_exact"  # full-vocabulary entropy of each step
    ENTROPY_TOPK = "entropy_topk"  # entropy from the top-K log-probs (an approximation)
    TEXT_LOGPROBS = "text_logprobs"  # teacher-forced log-probs of a given text
    VOCAB_MOMENTS = "vocab_moments"  # full-vocabulary μ, σ of log p at each position (Min-K%++)
    VOCAB_MOMENTS_TOPK = "vocab_moments_topk"  # μ, σ from the top-K log-probs (an approximation)
    FULL_DISTRIBUTION = "full_distribution"  # whole next-token distributions, to compare two models (policy drift)


@dataclass(frozen=True)
class GenerationParams:
    """Decoding parameters; part of every cache key.

    Attributes:
        max_new_tokens: generation budget.
        temperature: 0 = greedy; otherwise sampling at this temperature.
        top_p: nucleus sampling mass (1 = off).
        n: completions per prompt.
        seed: sampling seed (completion j of a prompt uses a generator seeded from (seed, prompt, j);
            with each row's own budget and prompt cut, a completion depends on (model, prompt,
            these parameters, seed, j) only, never on what else is in its batch).
    """

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.temperature == 0 and self.n > 1:
            raise ValueError("greedy decoding (temperature 0) gives one completion; set n = 1 or a temperature")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class Generation:
    """One completion.

    Attributes:
        text: the decoded completion (special tokens dropped).
        token_ids: ``[T]`` generated ids, the end-of-sequence token excluded.
        logprobs: ``[T]`` log-prob of each generated token under the model's (temperature-1)
            next-token distribution.
        entropies: ``[T]`` entropy (nats) of that distribution at each step.
        entropy_kind: ``"exact"`` (full vocabulary) or ``"top-K"`` (an API's top-K log-probs).
        finish_reason: ``"stop"`` (end-of-sequence) or ``"length"`` (budget reached).
        mu, sigma: ``[T]`` mean and std of log p over the vocabulary under p at each step
            (Min-K%++; from an API, over the top-K log-probs renormalised: an approximation).
        prompt_cut: tokens dropped from the start of a prompt longer than the model's context
            (0: the whole prompt was read).
    """

    text: str
    token_ids: list[int]
    logprobs: np.ndarray
    entropies: np.ndarray
    entropy_kind: str = "exact"
    finish_reason: str = "stop"
    mu: np.ndarray | None = None
    sigma: np.ndarray | None = None
    prompt_cut: int = 0

    @property
    def capped(self) -> bool:
        """Whether it stopped at its token budget (a truncated answer)."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "token_ids": list(self.token_ids),
            "logprobs": self.logprobs.tolist(),
            "entropies": self.entropies.tolist(),
            "entropy_kind": self.entropy_kind,
            "finish_reason": self.finish_reason,
            "mu": _list(self.mu),
            "sigma": _list(self.sigma),
            "prompt_cut": self.prompt_cut,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Generation":
        return cls(
            data["text"],
            list(data["token_ids"]),
            np.array(data["logprobs"], dtype=np.float64),
            np.array(data["entropies"], dtype=np.float64),
            data["entropy_kind"],
            data["finish_reason"],
            _array(data.get("mu")),
            _array(data.get("sigma")),
            int(data.get("prompt_cut", 0)),
        )


@dataclass
class TextScore:
    """Teacher-forced log-probs of a text given a context.

    Attributes:
        token_ids: ``[T]`` ids of the scored text.
        logprobs: ``[T]`` log p(x_t | context, x_<t).
        mu, sigma: ``[T]`` mean and std of log p over the vocabulary under p at each position
            (from an API, over the top-K renormalised; None when the responder cannot supply them).
        context_cut / text_cut: tokens dropped from the start of the context, and from the end of
            the text, to fit the model's context (0: read whole).
    """

    token_ids: list[int]
    logprobs: np.ndarray
    mu: np.ndarray | None = None
    sigma: np.ndarray | None = None
    context_cut: int = 0
    text_cut: int = 0

    @property
    def prompt_cut(self) -> int:
        """Tokens dropped to fit the context (context and text together)."""
        return self.context_cut + self.text_cut

    capped = False  # a teacher-forced score reads a given text: it has no budget to hit

    def to_dict(self) -> dict[str, Any]:
        return {
            "token_ids": list(self.token_ids),
            "logprobs": self.logprobs.tolist(),
            "mu": _list(self.mu),
            "sigma": _list(self.sigma),
            "context_cut": self.context_cut,
            "text_cut": self.text_cut,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TextScore":
        return cls(
            list(data["token_ids"]),
            np.array(data["logprobs"], dtype=np.float64),
            _array(data["mu"]),
            _array(data["sigma"]),
            int(data.get("context_cut", 0)),
            int(data.get("text_cut", 0)),
        )


@dataclass(frozen=True)
class Rollout:
    """One sampled answer to compare under two models: the prompt it answered, its ``[T]`` token
    ids, and whether it ``stopped`` at its end-of-sequence token (its last position is then the one
    that chose it; a capped answer has none)."""

    prompt: str
    token_ids: tuple[int, ...]
    stopped: bool = False

    @classmethod
    def of(cls, prompt: str, answer: Generation) -> "Rollout":
        """A sampled :class:`Generation` as a rollout of ``prompt``."""
        return cls(prompt, tuple(answer.token_ids), answer.finish_reason == "stop")

    def key(self) -> str:
        """The rollout as one string (prompt, ids, stopped), to key a store or share out work."""
        return f"{self.prompt}\x00{list(self.token_ids)}\x00{self.stopped}"


def _list(x: np.ndarray | None) -> list[float] | None:
    return None if x is None else x.tolist()


def _array(x: list[float] | None) -> np.ndarray | None:
    return None if x is None else np.array(x, dtype=np.float64)


class Responder(Protocol):
    """The interface detectors use. ``identity`` names the model for cache keys; ``counter``
    counts what it did (:class:`CallCounter`)."""

    access: frozenset[Access]
    identity: dict[str, Any]
    counter: "CallCounter"

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """``params.n`` completions of each prompt (a user message, formatted by the responder)."""

    def complete(self, texts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """``params.n`` plain-text continuations of each text (no prompt template)."""

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(token unit, start, end)`` of each token of ``text`` read as plain text."""

    def score(self, contexts: Sequence[str], texts: Sequence[str]) -> list[TextScore]:
        """Log-probs of each text continuing its context (an empty context scores the text alone)."""

    def format(self, prompt: str) -> str:
        """The prompt text the model sees (chat template or raw template applied)."""

    def question_context(self, lead: str = "") -> str:
        """The formatted prompt's text before the question when the user message is ``lead``
        followed by the question, to score a question in place."""

    def divergence(self, rollouts: Sequence["Rollout"], reference: "Responder") -> list[np.ndarray]:
        """``[T]`` per-position KL(this model ‖ ``reference``) along each rollout's answer, and at the
        end-of-sequence position of those that stopped (local models: needs
        :attr:`Access.FULL_DISTRIBUTION`)."""


@dataclass
class CallCounter:
    """What a responder did: completions generated and texts scored (cache hits excluded), and
    the HTTP requests it sent (served models only)."""

    generated: int = 0
    scored: int = 0
    cache_hits: int = 0
    requests: int = 0


def sample_seed(seed: int, prompt: str, index: int) -> int:
    """A 63-bit seed for completion ``index`` of ``prompt`` (independent of batch composition)."""
    digest = hashlib.sha256(f"{seed}\x00{index}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
