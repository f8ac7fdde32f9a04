"""SFT and GRPO for the testbed's small causal LM (CPU-friendly, seeded).

* :func:`supervised_finetune`: next-token cross-entropy on prompt + solution texts, AdamW with
  warm-up and cosine decay.
* :func:`grpo`: Group Relative Policy Optimisation on a fixed question set. Each step samples
  ``group_size`` completions per question, rewards exact final answers (1/0), normalises the
  rewards within each group (advantage = (r − mean) / (std + 1e-4)), and minimises, per
  completion token, −A·ρ + β·KL₃ with ρ = π/π_old (one on-policy update per batch, so ρ = 1 and
  its gradient is the policy gradient) and KL₃ = π_ref/π − log(π_ref/π) − 1 against the frozen
  SFT model; token terms are averaged per completion, then over completions.
* :func:`accuracy`: share of problems whose greedy solution ends in the right answer.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .problems import Problem, parse_answer

logger = logging.getLogger(__name__)

LogFn = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SFTSettings:
    """SFT: optimiser steps, problems per step, peak learning rate, warm-up steps, AdamW decay, and
    ``length_buckets``: each run of that many batches is drawn at once and cut by length (less
    padding on problems of mixed lengths; 1: batches as drawn); ``prompt_loss``: whether the
    question's tokens are trained on too (False: only the solution and EOS, so a long question's
    unpredictable names and numbers do not drown the gradient of copying and computing them)."""

    steps: int
    batch_size: int
    lr: float
    warmup: int = 100
    weight_decay: float = 0.01
    length_buckets: int = 1
    prompt_loss: bool = True


@dataclass(frozen=True)
class GRPOSettings:
    """GRPO: passes over the members, samples per question, questions per step, learning rate,
    KL weight β, sampling temperature, completion length limit."""

    epochs: int
    group_size: int
    questions_per_step: int
    lr: float
    beta: float = 0.02
    temperature: float = 1.0
    max_new_tokens: int = 48


def _pad(rows: Sequence[Sequence[int]], pad: int, left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, T] ids and attention mask of ``rows`` padded to the longest (on the left for generation)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span] = torch.tensor(row)
        mask[i, span] = 1
    return ids, mask


def supervised_finetune(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    settings: SFTSettings,
    seed: int,
    log: LogFn | None = None,
    log_every: int = 50,
) -> None:
    """Train ``model`` in place on the problems' full texts (each followed by EOS)."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    encoded = [tokenizer(p.text())["input_ids"] + [eos] for p in problems]
    skipped = [0 if settings.prompt_loss else _prompt_length(tokenizer, p) for p in problems]
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: _warmup_cosine(s, settings.warmup, settings.steps)
    )
    rng = random.Random(seed)
    torch.manual_seed(seed)
    order: list[int] = []
    model.train()
    start = time.perf_counter()
    batches: list[list[int]] = []
    for step in range(1, settings.steps + 1):
        if not batches:
            while len(order) < settings.batch_size * settings.length_buckets:
                order += rng.sample(range(len(encoded)), len(encoded))
            batches, order = _length_batches(order, encoded, settings.batch_size, settings.length_buckets, rng)
        batch = batches.pop()
        ids, mask = _pad([encoded[i] for i in batch], pad)
        labels = ids.masked_fill(mask == 0, -100)
        for row, i in enumerate(batch):
            labels[row, : skipped[i]] = -100
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        if log is not None and (step % log_every == 0 or step == settings.steps):
            log(
                {
                    "stage": "sft",
                    "step": step,
                    "loss": round(float(loss.detach()), 5),
                    "lr": schedule.get_last_lr()[0],
                    "seconds": round(time.perf_counter() - start, 2),
                }
            )
    model.eval()


def _prompt_length(tokenizer: Any, problem: Problem) -> int:
    """Tokens of the problem's prompt at the start of its full text (the prompt ends before the
    space that opens the solution, so its tokens are a prefix of the text's)."""
    prompt, text = tokenizer(problem.prompt())["input_ids"], tokenizer(problem.text())["input_ids"]
    if text[: len(prompt)] != prompt:
        raise ValueError(f"the prompt's tokens are not a prefix of the text's: {problem.prompt()!r}")
    return len(prompt)


def _length_batches(
    order: list[int], encoded: Sequence[Sequence[int]], batch_size: int, buckets: int, rng: random.Random
) -> tuple[list[list[int]], list[int]]:
    """The next ``buckets`` batches from ``order`` (and what is left of it): with one bucket the
    next batch as drawn; with more, that many batches' problems sorted by length, cut, shuffled."""
    take, rest = order[: batch_size * buckets], order[batch_size * buckets :]
    if buckets == 1:
        return [take], rest
    take = sorted(take, key=lambda i: len(encoded[i]))
    batches = [take[i : i + batch_size] for i in range(0, len(take), batch_size)]
    rng.shuffle(batches)
    return batches, rest


def _warmup_cosine(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Complete ``prompts`` (greedy when ``temperature`` is 0).

    Returns:
        prompt_ids [B, P] (left-padded), prompt_mask [B, P], completion_ids [B, T ≤ max_new_tokens]
        where every token after the first EOS is the pad id.
    """
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    ids, mask = _pad([tokenizer(p)["input_ids"] for p in prompts], pad, left=True)
    if seed is not None:
        torch.manual_seed(seed)
    sampling = (
        dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else dict(do_sample=False)
    )
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos,
        pad_token_id=pad,
        **sampling,
    )
    completion = out[:, ids.shape[1] :]
    return ids, mask, completion.masked_fill(completion_mask(completion, eos) == 0, pad)


def completion_mask(completion: torch.Tensor, eos: int) -> torch.Tensor:
    """[B, T] 1 for the completion's tokens up to and including its first EOS."""
    is_eos = (completion == eos).long()
    before = (is_eos.cumsum(1) - is_eos) == 0
    return before.long()


def decode_completions(tokenizer: Any, completion: torch.Tensor) -> list[str]:
    mask = completion_mask(completion, tokenizer.eos_token_id)
    return [tokenizer.decode(row[m.bool()].tolist(), skip_special_tokens=True) for row, m in zip(completion, mask)]


def accuracy(
    model: Any, tokenizer: Any, problems: Sequence[Problem], max_new_tokens: int = 48, batch_size: int = 64
) -> float:
    """Share of ``problems`` whose greedy completion states the right final answer."""
    if not problems:
        return float("nan")
    right = 0
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        _, _, completion = generate(model, tokenizer, [p.prompt() for p in chunk], max_new_tokens)
        right += sum(
            parse_answer(text) == p.answer for text, p in zip(decode_completions(tokenizer, completion), chunk)
        )
    return right / len(problems)


def _completion_logprobs(
    model: Any, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion: torch.Tensor, comp_mask: torch.Tensor
) -> torch.Tensor:
    """[B, T] log-probabilities of the completion tokens under ``model``."""
    ids = torch.cat([prompt_ids, completion], dim=1)
    mask = torch.cat([prompt_mask, comp_mask], dim=1)
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, prompt_ids.shape[1] - 1 : -1]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)


def grpo(
    policy: Any,
    reference: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    settings: GRPOSettings,
    seed: int,
    log: LogFn | None = None,
) -> None:
    """Train ``policy`` in place with GRPO on ``problems`` (reward: exact final answer).

    ``log`` gets one record per step, including the step's ``problems`` (so a caller can check
    which problems were trained on)."""
    eos = tokenizer.eos_token_id
    optimiser = torch.optim.AdamW(policy.parameters(), lr=settings.lr, weight_decay=0.0)
    reference.eval()
    rng = random.Random(seed)
    start = time.perf_counter()
    step = 0
    for epoch in range(1, settings.epochs + 1):
        order = rng.sample(range(len(problems)), len(problems))
        rewards_epoch: list[float] = []
        for first in range(0, len(order), settings.questions_per_step):
            step += 1
            batch = [problems[i] for i in order[first : first + settings.questions_per_step]]
            prompts = [p.prompt() for p in batch for _ in range(settings.group_size)]
            policy.eval()
            prompt_ids, prompt_mask, completion = generate(
                policy, tokenizer, prompts, settings.max_new_tokens, settings.temperature, seed=seed * 1_000_003 + step
            )
            texts = decode_completions(tokenizer, completion)
            answers = [p.answer for p in batch for _ in range(settings.group_size)]
            rewards = torch.tensor([float(parse_answer(t) == a) for t, a in zip(texts, answers)])
            grouped = rewards.view(len(batch), settings.group_size)
            advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1)
            rewards_epoch += rewards.tolist()
            comp_mask = completion_mask(completion, eos)
            with torch.no_grad():
                ref_lp = _completion_logprobs(reference, prompt_ids, prompt_mask, completion, comp_mask)
            policy.train()
            lp = _completion_logprobs(policy, prompt_ids, prompt_mask, completion, comp_mask)
            ratio = torch.exp(lp - lp.detach())
            log_ref_ratio = (ref_lp - lp).clamp(
                -5.0, 5.0
            )  # a rare token far likelier under the reference must not swamp a step
            kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1
            per_token = -advantages.unsqueeze(1) * ratio + settings.beta * kl
            m = comp_mask.float()
            loss = ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).mean()
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            optimiser.step()
            if log is not None:
                log(
                    {
                        "stage": "grpo",
                        "epoch": epoch,
                        "step": step,
                        "problems": batch,
                        "reward": round(float(rewards.mean()), 4),
                        "kl": round(float((kl.detach() * m).sum() / m.sum().clamp(min=1)), 5),
                        "loss": round(float(loss.detach()), 5),
                        "seconds": round(time.perf_counter() - start, 2),
                    }
                )
        logger.info(
            "GRPO epoch %d/%d: mean reward %.3f", epoch, settings.epochs, sum(rewards_epoch) / len(rewards_epoch)
        )
    policy.eval()
