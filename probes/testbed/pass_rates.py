"""Pass rates of a chat model on verifiable questions: greedy and sampled, with binomial CIs
(SPEC §9: learning is shown by pass rates of members and non-members before and after RL).

A question is a user turn (its text and the instruction to end with "The answer is N") wrapped
in the model's own chat template; a completion passes when the toolkit's verifier
(:func:`probes.accuracy.verifier.judge`) reads the right final answer from it — the same reward GRPO
trains on.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..accuracy.verifier import judge

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sampling:
    """How completions are drawn: ``samples`` per question at ``temperature`` (0: one greedy
    completion), up to ``max_new_tokens`` each, ``batch_size`` completions per forward batch."""

    samples: int = 1
    temperature: float = 0.0
    max_new_tokens: int = 64
    batch_size: int = 64
    seed: int = 0


@dataclass(frozen=True)
class Completions:
    """Rewards [n_questions, samples] (1 right, 0 not), lengths in tokens [n_questions, samples]
    and whether each completion hit the token budget before its end-of-turn token."""

    rewards: np.ndarray
    lengths: np.ndarray
    truncated: np.ndarray

    def pass_rate(self) -> float:
        return float(self.rewards.mean()) if self.rewards.size else float("nan")


def chat_prompts(tokenizer: Any, user_turns: Sequence[str]) -> list[str]:
    """Each user turn wrapped in the tokenizer's chat template, ending with the assistant header."""
    return [
        tokenizer.apply_chat_template([{"role": "user", "content": turn}], tokenize=False, add_generation_prompt=True)
        for turn in user_turns
    ]


def complete(
    model: Any, tokenizer: Any, prompts: Sequence[str], answers: Sequence[Any], sampling: Sampling
) -> Completions:
    """Draw ``sampling.samples`` completions of every prompt and judge each against its answer.

    Args:
        prompts: chat-formatted prompts [n].
        answers: the right final answer of each [n].

    Returns:
        :class:`Completions` with arrays of shape [n, samples].
    """
    import torch  # lazy: torch

    n, s = len(prompts), sampling.samples
    rewards = np.zeros((n, s))
    lengths = np.zeros((n, s), dtype=int)
    truncated = np.zeros((n, s), dtype=bool)
    order = [(i, j) for i in range(n) for j in range(s)]
    generator_seed = sampling.seed
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        for start in range(0, len(order), sampling.batch_size):
            chunk = order[start : start + sampling.batch_size]
            batch = tokenizer(
                [prompts[i] for i, _ in chunk], return_tensors="pt", padding=True, add_special_tokens=False
            )
            torch.manual_seed(generator_seed + start)
            kwargs = (
                {"do_sample": True, "temperature": sampling.temperature, "top_k": 0, "top_p": 1.0}
                if sampling.temperature > 0
                else {"do_sample": False}
            )
            with torch.no_grad():
                out = model.generate(
                    **batch.to(model.device),
                    max_new_tokens=sampling.max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    **kwargs,
                )
            for (i, j), row in zip(chunk, out[:, batch["input_ids"].shape[1] :].tolist()):
                text, used, ended = _completion(tokenizer, row)
                rewards[i, j] = judge(text, answers[i]).reward
                lengths[i, j] = used
                truncated[i, j] = not ended and used >= sampling.max_new_tokens
    finally:
        tokenizer.padding_side = side
    return Completions(rewards, lengths, truncated)


def _completion(tokenizer: Any, ids: list[int]) -> tuple[str, int, bool]:
    """(text up to the first end token, tokens used, whether an end token closed it)."""
    ends = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    for k, token in enumerate(ids):
        if token in ends:
            return tokenizer.decode(ids[:k], skip_special_tokens=True), k + 1, True
    return tokenizer.decode(ids, skip_special_tokens=True), len(ids), False


def wilson(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def summary(completions: Completions) -> dict[str, Any]:
    """Pass rate with its Wilson CI over all completions, plus the share of questions solved at
    least once and the token lengths' median and 95th percentile."""
    r = completions.rewards
    lo, hi = wilson(float(r.sum()), int(r.size))
    return {
        "pass_rate": round(completions.pass_rate(), 4),
        "ci95": [round(lo, 4), round(hi, 4)],
        "completions": int(r.size),
        "questions": int(r.shape[0]),
        "solved_at_least_once": round(float((r.max(axis=1) > 0).mean()), 4) if r.size else None,
        "length_p50": float(np.percentile(completions.lengths, 50)) if r.size else None,
        "length_p95": float(np.percentile(completions.lengths, 95)) if r.size else None,
        "truncated_share": round(float(completions.truncated.mean()), 4) if r.size else None,
    }


def mixed_group_share(rewards: np.ndarray) -> float:
    """Share of questions whose sampled rewards [n, samples] are not all equal: GRPO learns only
    from those (an all-0 or all-1 group has zero advantage)."""
    if rewards.size == 0:
        return float("nan")
    return float((rewards.max(axis=1) != rewards.min(axis=1)).mean())
