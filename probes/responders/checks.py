"""What an engine sends back is checked before it becomes a score (SPEC §5, engines).

A served model (or an in-process engine) can answer without the fields a detector needs: a
server that ignores ``logprobs`` sends completions with no tokens or log-probs (PPL NaN, CDD 1.0
from edit distances between empty lists); one that ignores the sampling parameters sends n
copies of its greedy answer; one whose ``echo`` returns a continuation sends log-probs of tokens
past the prompt. Each is refused here in one line that names the engine and what it lacks
(:class:`EngineOutputError`), before anything is stored.

* :func:`check_generations` / :func:`check_scores`: every completion and every scored text: its
  tokens and log-probs came back, in equal numbers, finite and ≤ 0.
* :func:`check_answer_counts`: as many completions came back for each prompt as were asked.
* :class:`SamplingWitness`: whether an engine asked to sample really does. Every chosen token
  being the top-1 of its step is what greedy decoding gives; under genuine sampling at
  temperature T (top-p ≤ 1) its probability is at most Π_t 1/(1 + Σ_{v ≠ top} (p_v/p_top)^{1/T})
  over the steps (the sum over the top-K the engine sent is a lower bound of the one over the
  vocabulary). A run whose sampled tokens are all top-1 while that bound falls below
  ``REFUSE_BELOW`` (1e-6) is refused; one sampled non-top-1 token anywhere settles it.
* :func:`check_echo`: the prompt tokens an ``echo`` sends lie inside the prompt.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Sequence

import numpy as np

from ..errors import ProbesError
from .registry import ENGINES

REFUSE_BELOW = 1e-6  # the largest chance that a sampling engine's tokens are all top-1 before it is called greedy
LOGPROB_SLACK = 1e-4  # a log-prob may exceed 0 by float error only


class EngineOutputError(ProbesError):
    """An engine sent back output a detector cannot use (missing log-probs, greedy copies for samples, a bad echo)."""


def engine_name(identity: dict[str, Any]) -> str:
    """A short name of an engine for messages: ``openai server http://…/v1 (model m)``, ``vllm 0.32.0``…"""
    kind = identity.get("kind", "engine")
    if kind == "openai":
        return f"the server at {identity.get('base_url')} (model {identity.get('model')})"
    if kind in ENGINES:
        return f"{ENGINES[kind].title} {identity.get('version', '')}".strip()
    return f"the {kind} engine"


def check_generations(generations: Sequence[Sequence[Any]], identity: dict[str, Any]) -> None:
    """Refuse completions without their tokens or log-probs, or with broken ones.

    Args:
        generations: per prompt, its :class:`~probes.responders.base.Generation` list.
        identity: the engine's identity (named in the message).
    """
    for row in generations:
        for gen in row:
            problem = _generation_problem(gen)
            if problem:
                raise EngineOutputError(
                    f"{engine_name(identity)} {problem}; the detectors need each generated token's "
                    "log-prob (ask the server for logprobs/top_logprobs, or use another engine)"
                )


def check_answer_counts(generations: Sequence[Sequence[Any]], asked: Sequence[int], identity: dict[str, Any]) -> None:
    """Refuse an engine's answer to a batch that does not hold, for each prompt asked, as many
    completions as asked for (a dropped prompt would shift every later one onto the wrong key).

    Args:
        generations: per prompt, the completions the engine sent.
        asked: per prompt asked, how many completions were asked for.
        identity: the engine's identity (named in the message).
    """
    if len(generations) != len(asked):
        raise EngineOutputError(
            f"{engine_name(identity)} answered {len(generations)} prompts of a batch of {len(asked)}; nothing "
            "of the batch is stored (run again: the answers already stored are kept)"
        )
    for row, n in zip(generations, asked):
        if len(row) != n:
            raise EngineOutputError(
                f"{engine_name(identity)} sent {len(row)} completions for a prompt where {n} were asked; "
                "nothing of the batch is stored (run again: the answers already stored are kept)"
            )


def _generation_problem(gen: Any) -> str | None:
    n = len(gen.token_ids)
    if n == 0 and gen.text.strip():
        return f"sent a completion ({gen.text[:40]!r}…) without its tokens and log-probs"
    if len(gen.logprobs) != n or len(gen.entropies) != n:
        return f"sent {n} tokens with {len(gen.logprobs)} log-probs and {len(gen.entropies)} entropies"
    if n and not (np.isfinite(gen.logprobs).all() and (gen.logprobs <= LOGPROB_SLACK).all()):
        return "sent log-probs that are not finite numbers ≤ 0"
    if n and not (np.isfinite(gen.entropies).all() and (gen.entropies >= -LOGPROB_SLACK).all()):
        return "sent top log-probs whose entropies are not finite and ≥ 0"
    return None


def check_scores(scores: Sequence[Any], sizes: Sequence[int], identity: dict[str, Any]) -> None:
    """Refuse teacher-forced scores that came back without tokens or log-probs.

    Args:
        scores: the :class:`~probes.responders.base.TextScore` of each text.
        sizes: each text's size in words (or tokens): one of two or more has at least one token
            with a prediction, so must be scored (a one-word text after nothing may have none).
    """
    for score, size in zip(scores, sizes, strict=True):
        n = len(score.token_ids)
        if len(score.logprobs) != n:
            problem = f"sent {n} prompt tokens with {len(score.logprobs)} log-probs"
        elif n == 0 and size >= 2 and not score.prompt_cut:
            problem = f"sent no prompt tokens or log-probs for a text of {size} words"
        elif n and not (np.isfinite(score.logprobs).all() and (score.logprobs <= LOGPROB_SLACK).all()):
            problem = "sent prompt log-probs that are not finite numbers ≤ 0"
        else:
            continue
        raise EngineOutputError(
            f"{engine_name(identity)} {problem}; teacher-forced scores need the prompt's log-probs "
            "(echo with logprobs on /v1/completions, or prompt_logprobs)"
        )


def check_echo(tokens: Sequence[str], offsets: Sequence[int], prompt: str, identity: dict[str, Any]) -> None:
    """Refuse an ``echo`` whose tokens do not lie inside the prompt they echo: offsets that go
    backwards or reach past its end (a continuation, as a server that reads ``max_tokens: 0`` as
    "no limit" sends)."""
    if len(tokens) != len(offsets):
        raise EngineOutputError(f"{engine_name(identity)} echoed {len(tokens)} tokens with {len(offsets)} offsets")
    past = [i for i, (t, a) in enumerate(zip(tokens, offsets)) if a >= len(prompt) and t]
    if past:
        raise EngineOutputError(
            f"{engine_name(identity)} echoed {len(past)} token(s) past the end of the prompt (a continuation: "
            "it does not honour max_tokens 0 with echo), so prompt log-probs cannot be read from it; "
            "serve the model with vLLM or score it locally"
        )
    if any(b < a for a, b in zip(offsets, offsets[1:])) or (offsets and offsets[0] < 0):
        raise EngineOutputError(
            f"{engine_name(identity)} echoed token offsets that go backwards or start before the prompt"
        )


def greedy_log_bound(chosen: np.ndarray, tops: np.ndarray, temperature: float, top_p: float = 1.0) -> float | None:
    """log of an upper bound on the chance that sampling at ``temperature`` (nucleus ``top_p``)
    picks the top-1 token at every step, or None when some chosen token is not the top-1 (the
    engine sampled).

    Per step, with r_v = (p_v / p_top)^{1/T} over the top-K sent: without a nucleus the top-1's
    chance is 1/Σ_vocab r_v ≤ 1/(1 + Σ_{top-K, v ≠ top} r_v). With one, a step whose top-1 may
    reach ``top_p`` alone (1/Σ r ≥ top_p) may keep only it (bound 1); otherwise the nucleus holds
    the second token too, and the renormalised top-1 chance is ≤ 1/(1 + r_2).

    Args:
        chosen: ``[T]`` log-prob of each chosen token (temperature 1).
        tops: ``[T, K]`` the top-K log-probs of each step (−inf padded).
    """
    if len(chosen) == 0 or tops.shape[1] < 2:
        return 0.0
    best = tops.max(axis=1)
    if (chosen < best - 1e-5).any():
        return None
    others = np.sort(tops, axis=1)[:, ::-1][:, 1:]  # every top-K value but the largest, descending
    ratios = np.exp((others - best[:, None]) / temperature)  # (p_v / p_top)^{1/T}; −inf gives 0
    if top_p >= 1.0:
        return float(-np.log1p(ratios.sum(axis=1)).sum())
    may_be_alone = 1.0 / (1.0 + ratios.sum(axis=1)) >= top_p
    return float(np.where(may_be_alone, 0.0, -np.log1p(ratios[:, 0])).sum())


class SamplingWitness:
    """Evidence, over a run, that an engine asked to sample does sample (see the module docstring)."""

    def __init__(self, identity: dict[str, Any]) -> None:
        self.identity = identity
        self.sampled = False  # a non-top-1 token was seen
        self.log_bound = 0.0
        self._lock = threading.Lock()

    def add(self, chosen: np.ndarray, tops: np.ndarray, temperature: float, top_p: float = 1.0) -> None:
        """One sampled completion: its chosen log-probs ``[T]`` and top-K log-probs ``[T, K]``."""
        if self.sampled or temperature <= 0:
            return
        bound = greedy_log_bound(chosen, tops, temperature, top_p)
        with self._lock:
            if bound is None:
                self.sampled = True
                return
            self.log_bound += bound
            if self.log_bound < math.log(REFUSE_BELOW):
                raise EngineOutputError(
                    f"{engine_name(self.identity)} was asked to sample at temperature {temperature:g} but every token it sent "
                    f"is its step's most likely one (chance under sampling < {REFUSE_BELOW:g}): it ignores the sampling "
                    "parameters (temperature, seed, n) and sends copies of its greedy answer; use a server that samples "
                    "(vLLM, SGLang) or a local model"
                )
