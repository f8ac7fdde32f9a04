"""Teacher-forced scoring of one batch of (context, text) token-id pairs on a Hugging Face causal LM,
with a shared prefix encoded once.

When every row of a batch begins with the same tokens (ReCaLL's non-member prefix, a long chat
system turn), those tokens are run once, their KV cache copied to every row, and only each row's
remainder is run over it: the logits of the remainder are those of the whole sequence (the same
causal attention over the same keys), at the cost of the remainder alone. A prefix shorter than
:data:`MIN_SHARED_TOKENS`, or one that reaches into a scored text, is not worth it or not possible:
the batch runs whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import NonFiniteError
from .base import TextScore

MIN_SHARED_TOKENS = 16
SIGNATURE_TOKENS = 16  # rows whose first tokens agree are batched together (:func:`prefix_order`)


def log_probs(logits: Any) -> Any:
    """``[..., V]`` log-softmax of ``logits`` in at least float32 (bf16/fp16 widened, float64 kept)."""
    import torch

    return torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)


def shared_prefix_length(sequences: list[list[int]], limit: int) -> int:
    """The number of leading tokens every sequence shares, at most ``limit``."""
    first = sequences[0]
    n = min([limit, *map(len, sequences)])
    for other in sequences[1:]:
        k = 0
        while k < n and other[k] == first[k]:
            k += 1
        n = k
    return n


def prefix_order(lengths: list[int], sequences: list[list[int]]) -> list[int]:
    """Row indices, longest first, except that rows whose first :data:`SIGNATURE_TOKENS` tokens
    agree with another row's stay together (each group where its longest row falls, longest
    first within it), so a batch tends to share its prefix."""
    signature = [
        tuple(s[:SIGNATURE_TOKENS]) if len(s) >= SIGNATURE_TOKENS else ("row", i) for i, s in enumerate(sequences)
    ]
    groups: dict[Any, list[int]] = {}
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        groups.setdefault(signature[i], []).append(i)
    return [i for rows in groups.values() for i in rows]  # dicts keep the order groups first appear in


def score_batch(
    model: Any, pad: int, device: Any, pairs: list[tuple[list[int], list[int]]], reuse: bool = True
) -> list[TextScore]:
    """``[T]`` log-probs (and the vocabulary's μ, σ) of each text after its context, one forward
    pass over the batch (after one over its shared prefix, where there is one worth it and
    ``reuse``)."""
    import torch

    full = [c + t for c, t in pairs]
    firsts = [max(len(c), 1) for c, _ in pairs]  # the first position with a prediction
    shared = shared_prefix_length(full, min(firsts) - 1) if reuse and len(pairs) > 1 else 0
    shared = shared if shared >= MIN_SHARED_TOKENS else 0
    rest = [x[shared:] for x in full]
    width = max(len(x) for x in rest)
    ids = torch.tensor([x + [pad] * (width - len(x)) for x in rest], device=device)
    attention = torch.tensor([[1] * (shared + len(x)) + [0] * (width - len(x)) for x in rest], device=device)
    if shared:  # the prefix's logits are never read: one row kept, not [1, shared, V]
        prefix = model(input_ids=torch.tensor([full[0][:shared]], device=device), use_cache=True, logits_to_keep=1)
        past = prefix.past_key_values
        if not hasattr(past, "reorder_cache"):  # a legacy tuple cache (remote code): the batch runs whole
            return score_batch(model, pad, device, pairs, reuse=False)
        past.reorder_cache(torch.zeros(len(pairs), dtype=torch.long, device=device))  # the prefix for every row
        positions = torch.arange(shared, shared + width, device=device).expand(len(pairs), -1)
        logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, past_key_values=past).logits
    else:
        logits = model(input_ids=ids, attention_mask=attention).logits  # [b, S, V]
    out = []
    for row, (context, text) in enumerate(pairs):
        first, stop = firsts[row], len(context) + len(text)
        if stop <= first:
            out.append(TextScore(token_ids=[], logprobs=np.zeros(0), mu=np.zeros(0), sigma=np.zeros(0)))
            continue
        # logits[row, j] predicts token shared + j + 1: rows first-1 … stop-2 predict tokens first … stop-1
        window = logits[row, first - 1 - shared : stop - 1 - shared]
        logp = log_probs(window)  # [T, V]
        target = torch.tensor(full[row][first:stop], device=device)
        chosen = logp.gather(1, target[:, None])[:, 0]
        mu, sigma = moments(logp)
        check_finite(mu)
        out.append(
            TextScore(
                token_ids=full[row][first:stop],
                logprobs=chosen.double().cpu().numpy(),
                mu=mu.double().cpu().numpy(),
                sigma=sigma.double().cpu().numpy(),
            )
        )
    return out


def check_finite(*tensors: Any) -> None:
    """Refuse non-finite model outputs at their source: NaN logits mean broken weights or an
    overflow of the compute dtype, and would become NaN scores downstream."""
    import torch

    if not all(bool(torch.isfinite(t).all()) for t in tensors):
        raise NonFiniteError(
            "the model produced non-finite log-probabilities (NaN/inf): its weights hold NaN/inf, or "
            "the compute dtype overflows (try --dtype float32 or bfloat16)"
        )


def moments(logp: Any) -> tuple[Any, Any]:
    """μ = Σ p log p and σ = sqrt(Σ p (log p)² − μ²) over the last axis of log-probs (p = 0 terms
    count 0, never 0·(−inf))."""
    import torch

    p = logp.exp()
    finite = torch.where(p > 0, logp, torch.zeros_like(logp))
    mu = (p * finite).sum(-1)
    sigma = ((p * finite.square()).sum(-1) - mu.square()).clamp(min=0).sqrt()
    return mu, sigma
