"""How far a model's token distribution moved from a reference's along given completions (policy
drift, SPEC §5): at every position of a completion, the full-vocabulary KL(π_audited(·|ctx) ‖
π_reference(·|ctx)) of the two models' next-token distributions (temperature 1), the context being
the prompt and the completion so far.

Both models read the very same token ids (the audited model's prompt, formatted and fitted to its
context as for generation, then the completion's ids as generated), so they must share a tokenizer
(checked before any work). Memory: ``[batch, tokens, vocab]`` logits of both models up to the
responder's ``score_budget_mib``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import ConfigError
from .forward_scoring import log_probs

if TYPE_CHECKING:
    from .base import Responder, Rollout


def local_of(responder: Responder) -> Any:
    """The :class:`~probes.responders.local.LocalResponder` under store and rank wrappers."""
    while not hasattr(responder, "model") and hasattr(responder, "responder"):
        responder = responder.responder
    if not hasattr(responder, "model"):
        raise ConfigError(
            "comparing two models token by token (policy drift, the rollout shifts) needs local checkpoints: "
            "give the audited model and the reference as directories (--model DIR --reference DIR)"
        )
    return responder


def policy_kl(
    audited: Responder,
    reference: Responder,
    rollouts: Sequence[Rollout],
) -> list[np.ndarray]:
    """``[T]`` per-position KL(audited ‖ reference) in nats along each rollout's answer: one position
    per token, plus, for an answer that stopped at its end-of-sequence token, the position that
    chose it (so an answer that stops at once still has a drift). An answer cut to fit the
    context keeps the positions that fit (and loses its end)."""
    import torch

    audited, reference = local_of(audited), local_of(reference)
    pairs = []
    for rollout in rollouts:
        context, _ = audited._fit_prompt(audited.encode_prompt(rollout.prompt))
        fitted = audited._fit_pair(list(context), list(rollout.token_ids))
        pairs.append((fitted[0], fitted[1], rollout.stopped and not fitted[3]))
    if audited.model is reference.model:  # a model against itself: every term p·(log p − log p) is 0
        return [np.zeros(max(0, stop - first)) for first, stop in (_span(*pair) for pair in pairs)]
    vocab = audited.model.get_output_embeddings().weight.shape[0]
    budget = max(1, int(audited.score_budget_mib * 2**20 // (vocab * 4 * 2)))  # two models' logits at once
    order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
    out: list[np.ndarray | None] = [None] * len(pairs)
    with torch.inference_mode():
        for batch in _batches(order, [len(c) + len(t) for c, t, _ in pairs], budget):
            for i, kl in zip(batch, _batch_kl(audited, reference, [pairs[i] for i in batch])):
                out[i] = kl
    return out  # type: ignore[return-value]


def _span(context: list[int], text: list[int], ended: bool) -> tuple[int, int]:
    """The positions ``[first, stop)`` of a rollout whose KL is taken: its answer's tokens and,
    if it ended, the end-of-sequence position (logits at i − 1 predict token i)."""
    return max(len(context), 1), len(context) + len(text) + ended


def _batches(order: list[int], lengths: list[int], budget_tokens: int) -> list[list[int]]:
    """Consecutive groups of ``order`` whose padded size (longest × count) fits ``budget_tokens``."""
    batches: list[list[int]] = []
    for i in order:
        if batches and max(lengths[j] for j in batches[-1] + [i]) * (len(batches[-1]) + 1) <= budget_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _batch_kl(
    audited: Responder, reference: Responder, pairs: list[tuple[list[int], list[int], bool]]
) -> list[np.ndarray]:
    import torch

    device = audited.loaded.device
    pad = audited.tokenizer.pad_token_id
    full = [c + t for c, t, _ in pairs]
    width = max(len(x) for x in full)
    ids = torch.tensor([x + [pad] * (width - len(x)) for x in full], device=device)
    attention = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in full], device=device)
    logits_a = audited.model(input_ids=ids, attention_mask=attention).logits
    logits_r = reference.model(
        input_ids=ids.to(reference.loaded.device), attention_mask=attention.to(reference.loaded.device)
    ).logits
    out = []
    for row, (context, text, ended) in enumerate(pairs):
        first, stop = _span(context, text, ended)
        if stop <= first:
            out.append(np.zeros(0))
            continue
        logp_a = log_probs(logits_a[row, first - 1 : stop - 1])  # [T (+1), V], at least float32
        logp_r = log_probs(logits_r[row, first - 1 : stop - 1]).to(device=logp_a.device, dtype=logp_a.dtype)
        p_a = logp_a.exp()
        terms = torch.where(p_a > 0, p_a * (logp_a - logp_r), torch.zeros_like(p_a))  # 0·log 0 = 0
        out.append(terms.sum(-1).double().cpu().numpy())
    return out
