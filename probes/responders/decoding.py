"""The built-in sampler's decoding loops: one batch of rows, left-padded, each row its own budget
(min(max_new_tokens, context − its prompt)), stopping at its end-of-sequence token or its budget.

* :func:`decode_dynamic` (everywhere): a growing KV cache; each distinct prompt of the batch is
  prefilled once and its cache copied to its rows (n samples of a prompt share one prefill: half
  of a CPU's sampling time at n = 8 went to prefilling copies); finished rows leave the batch
  (their cache rows dropped), so the others never wait on them.
* :func:`decode_static` (SPEC §10, issue 55; for a GPU): a pre-allocated KV cache of bucketed
  shape (rows to a power of two, length to a multiple of :data:`LENGTH_BUCKET`), every step the
  same shapes, so the step can be captured (``torch.compile``, CUDA graphs) once per bucket and
  replayed; finished rows keep computing (their tokens discarded) — nothing a row computes reads
  another row, so its answer is the same either way.

Both record per step the chosen token's log-prob and the full-vocabulary entropy, μ and σ (one
device-to-host copy a step), and draw sampled tokens with :mod:`.counter_sampler`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .base import Generation, GenerationParams
from .counter_sampler import draw_tokens
from .forward_scoring import check_finite, moments

LENGTH_BUCKET = 128  # a static cache's length is a multiple of this (few shapes to compile)


@dataclass
class RowSteps:
    """One row's generated tokens and per-step statistics, as they come."""

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    mus: list[float] = field(default_factory=list)
    sigmas: list[float] = field(default_factory=list)
    finish: str = "length"
    done: bool = False

    def add(self, token: int, logprob: float, entropy: float, mu: float, sigma: float) -> None:
        self.tokens.append(token)
        self.logprobs.append(logprob)
        self.entropies.append(entropy)
        self.mus.append(mu)
        self.sigmas.append(sigma)

    def generation(self, tokenizer: Any) -> Generation:
        as_array = functools.partial(np.array, dtype=np.float64)
        return Generation(
            text=tokenizer.decode(self.tokens, skip_special_tokens=True),
            token_ids=self.tokens,
            logprobs=as_array(self.logprobs),
            entropies=as_array(self.entropies),
            entropy_kind="exact",
            finish_reason=self.finish,
            mu=as_array(self.mus),
            sigma=as_array(self.sigmas),
        )


@dataclass(frozen=True)
class DecodeJob:
    """One batch to decode.

    Attributes:
        prompt_ids: each row's prompt token ids.
        params: decoding parameters.
        seeds: each row's sampler key (:func:`~.base.sample_seed`).
        budgets: each row's token budget.
        pad: the padding token id; eos: the ids a row stops at.
        max_positions: the model's context (None: unbounded); a finished row that the static loop
            keeps computing never reads past it.
    """

    prompt_ids: list[list[int]]
    params: GenerationParams
    seeds: list[int]
    budgets: list[int]
    pad: int
    eos: frozenset[int]
    max_positions: int | None = None


def choose_tokens(logits: Any, params: GenerationParams, keys: Any, t: int) -> Any:
    """``[b]`` next token per row: argmax, or the counter-based draw from the tempered,
    top-p-truncated distribution, keyed by each row's ``keys`` and the step ``t``."""
    if params.greedy:
        return logits.argmax(dim=-1)
    return draw_tokens(logits, keys, t, params.temperature, params.top_p)


def record_step(logits: Any, job: DecodeJob, keys: Any, t: int, rows: list[int], steps: list[RowSteps]) -> Any:
    """Choose step ``t``'s tokens from ``logits`` (``[len(rows), V]``, rows ``rows`` of the batch)
    and record them in ``steps`` (a row that reaches its end or budget is marked done); the
    chosen tokens ``[len(rows)]`` on the device."""
    import torch

    logp = torch.log_softmax(logits, dim=-1)
    mu, sigma = moments(logp)
    nxt = choose_tokens(logits, job.params, keys, t)
    chosen = logp.gather(1, nxt[:, None])[:, 0]
    # one device-to-host transfer per step (float64 holds the ids and the float32 values exactly)
    host = torch.stack([nxt.double(), chosen.double(), mu.double(), sigma.double()]).cpu().numpy()
    live = [k for k, i in enumerate(rows) if not steps[i].done]  # a finished row (static loop) may overflow
    check_finite(torch.from_numpy(host[1:3, live]))  # chosen log-probs and mu, already on the host
    for i, (token, lp, m, s) in zip(rows, host.T.tolist()):
        row = steps[i]
        if row.done:
            continue
        if int(token) in job.eos:
            row.finish, row.done = "stop", True
            continue
        row.add(int(token), lp, -m, m, s)
        if len(row.tokens) >= job.budgets[i]:
            row.finish, row.done = "length", True
    return nxt


def _left_padded(prompt_ids: list[list[int]], pad: int, device: Any) -> tuple[Any, Any, Any]:
    """``[b, width]`` ids, attention mask and position ids of the left-padded prompts."""
    import torch

    width = max(len(x) for x in prompt_ids)
    ids = torch.tensor([[pad] * (width - len(x)) + x for x in prompt_ids], device=device)
    attention = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in prompt_ids], device=device)
    return ids, attention, (attention.cumsum(-1) - 1).clamp(min=0)


def distinct_prompts(prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    """The batch's distinct prompts (first-seen order) and, per row, the index of its prompt among them."""
    first: dict[tuple[int, ...], int] = {}
    owner = [first.setdefault(tuple(x), len(first)) for x in prompt_ids]
    return [list(x) for x in first], owner


def prefill_shared(model: Any, job: DecodeJob, device: Any) -> tuple[Any, Any, Any, Any]:
    """Prefill each distinct prompt once, then copy its KV cache, mask and positions to its rows:
    the last position's logits ``[b, V]``, the cache, the attention mask ``[b, width]`` and the
    position ids ``[b, width]``. The padded width is the longest prompt's, as a prefill of every
    row would have it: only the rows a matrix product holds differ, a floating-point difference
    of the kind another batch size makes."""
    import torch

    distinct, owner = distinct_prompts(job.prompt_ids)
    ids, attention, positions = _left_padded(distinct, job.pad, device)
    out = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1)
    logits, past = out.logits[:, -1, :], out.past_key_values
    if len(distinct) < len(owner):
        index = torch.tensor(owner, device=device)
        past.reorder_cache(index)  # an index_select on the batch dimension: rows copied
        logits, attention, positions = logits[index], attention[index], positions[index]
    return logits, past, attention, positions


def decode_dynamic(model: Any, job: DecodeJob, device: Any) -> list[RowSteps]:
    """The batch with a growing KV cache, each distinct prompt prefilled once; finished rows leave it."""
    import torch

    logits, past, attention, positions = prefill_shared(model, job, device)
    keys = torch.tensor(job.seeds, dtype=torch.int64, device=device)  # [b] each row's sampler key
    steps = [RowSteps() for _ in job.prompt_ids]
    active = list(range(len(steps)))  # rows still generating, in batch order
    t = 0  # the decoding step: tokens every active row has drawn so far
    while True:
        nxt = record_step(logits.float(), job, keys, t, active, steps)
        keep = [k for k, i in enumerate(active) if not steps[i].done]
        if not keep:
            break
        if len(keep) < len(active):  # finished rows leave the batch
            index = torch.tensor(keep, device=device)
            past.reorder_cache(index)
            nxt, attention, positions, keys = nxt[index], attention[index], positions[index], keys[index]
            active = [active[k] for k in keep]
        attention = torch.cat([attention, attention.new_ones((len(active), 1))], dim=1)
        positions = positions[:, -1:] + 1
        t += 1
        out = model(
            input_ids=nxt[:, None],
            attention_mask=attention,
            position_ids=positions,
            past_key_values=past,
            use_cache=True,
        )
        logits, past = out.logits[:, -1, :], out.past_key_values
    return steps


def static_shape(n_rows: int, width: int, budget: int) -> tuple[int, int]:
    """(rows, cache length) of a static batch: rows to the next power of two, the length (prompt
    width + the largest budget) to the next multiple of :data:`LENGTH_BUCKET`."""
    rows = 1 << max(0, (n_rows - 1).bit_length())
    length = -(-(width + budget) // LENGTH_BUCKET) * LENGTH_BUCKET
    return rows, length


def decode_static(
    model: Any, job: DecodeJob, device: Any, step_fn: Any = None, caches: dict | None = None
) -> list[RowSteps]:
    """The batch with a pre-allocated cache of bucketed shape and a fixed-shape step
    (``step_fn(**inputs)``, default the model itself: a compiled or graph-captured step where the
    caller gives one). Filler rows (to the bucket's size) repeat row 0 and are discarded.
    ``caches``: one cache per bucket, kept by the caller and reset between batches (its tensors
    keep their addresses, as a captured graph needs)."""
    import torch
    from transformers import StaticCache

    n = len(job.prompt_ids)
    ids, attention, positions = _left_padded(job.prompt_ids, job.pad, device)
    rows, length = static_shape(n, ids.shape[1], max(job.budgets))
    fill = torch.zeros(rows - n, dtype=torch.long, device=device)
    ids, attention, positions = (torch.cat([x, x[fill]]) for x in (ids, attention, positions))
    keys = torch.tensor(job.seeds + [job.seeds[0]] * (rows - n), dtype=torch.int64, device=device)
    mask = torch.ones((rows, length), dtype=attention.dtype, device=device)  # generated positions: attended
    mask[:, : attention.shape[1]] = attention  # prompt padding: not
    caches = {} if caches is None else caches
    cache = caches.get((rows, length))
    if cache is None:
        cache = caches[(rows, length)] = StaticCache(config=model.config, max_cache_len=length)
    else:
        cache.reset()
    out = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    step = step_fn or model
    steps = [RowSteps() for _ in range(rows)]
    everyone, t, filled = list(range(rows)), 0, job_with_fillers(job, rows)
    positions = positions[:, -1:]
    last = (job.max_positions or 1 << 62) - 1
    while True:
        nxt = record_step(out.logits[:, -1, :].float(), filled, keys, t, everyone, steps)
        if all(s.done for s in steps[:n]) or ids.shape[1] + t + 1 >= length:
            break
        positions = (positions + 1).clamp(max=last)  # a live row never reaches the limit (its budget)
        t += 1
        out = step(
            input_ids=nxt[:, None].clone(),
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
    return steps[:n]


def job_with_fillers(job: DecodeJob, rows: int) -> DecodeJob:
    """``job`` with filler rows (budget 1: done at once) up to ``rows``."""
    extra = rows - len(job.budgets)
    if extra == 0:
        return job
    return DecodeJob(
        job.prompt_ids, job.params, job.seeds, job.budgets + [1] * extra, job.pad, job.eos, job.max_positions
    )
