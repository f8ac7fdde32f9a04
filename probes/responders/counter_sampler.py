"""Counter-based per-row sampling (SPEC §10): the token a row draws at step t is

    argmax over the filtered vocabulary of  logit_v / T + G(key, t, v),   G = −log(−log u),

with u a uniform made by hashing (the row's key, t, v) — Gumbel-max, so the draw follows
softmax(logits / T) over the filtered vocabulary exactly. The row's key is its generator seed
(:func:`probes.responders.base.sample_seed`: the run's seed, the prompt, the completion's index
j). The noise is a pure function of those three numbers: every row of a batch is drawn in one
batched operation, and a row's answer depends on nothing else — not its batch-mates, the batch
size or the order of the rows — by construction, with no generator object per row.

The hash works on 32-bit words held in int64 tensors: two xor-shift-multiply rounds (the
multiplier is under 2³¹, so no product overflows) — exact integer arithmetic, the same on every
device. The top 23 bits give u = (h + ½) / 2²³ ∈ [2⁻²⁴, 1 − 2⁻²⁴], every value exact in float32
(24 significant bits): never 0 or 1, so the noise is always finite. (With 24 bits, h + ½ rounds to
an even float32 above 2²³, and the largest h gave u = 1 and an infinite noise that took a random
token whatever the logits: caught in review before it landed.)

A row's word for a step is 32 bits (its key's two halves and the step hashed together), so two
(row, step) pairs share a noise vector with probability 2⁻³² — a few pairs among millions, each
one coincidence between two unrelated draws.

The key does not hold the temperature, top-p or budget: the same row at another temperature
reads the same noise (common random numbers), and a row with a larger budget continues the one
with a smaller budget token for token.
"""

from __future__ import annotations

from typing import Any

SAMPLER_VERSION = "counter-2"  # recorded by the response store; the answers of two versions never mix
# counter-2: of equally probable tokens at the nucleus edge the lower ids are kept (counter-1 kept
# whichever ``topk`` put first, which a device may order otherwise)
LEGACY_SAMPLER = "generator-1"  # the sampler before it: one torch.Generator per row, torch.multinomial

_MASK = 0xFFFFFFFF
_MULTIPLIER = 0x45D9F3B  # < 2**31: a 32-bit word times it stays under 2**63
_STEP_SALT = 0x9E3779B1
_TOKEN_SALT = 0x85EBCA77
NUCLEUS_CANDIDATES = 256  # tokens searched for a row's top-p nucleus before a full sort
_CPU_CHUNK_ELEMENTS = 1 << 19  # rows × vocabulary hashed at once on a CPU (stays in cache: ~4x faster)
_token_words: dict[tuple[int, str], Any] = {}


def mix32(x: Any) -> Any:
    """A bijective 32-bit hash of each element of an int64 tensor of 32-bit words (a new tensor)."""
    x = ((x >> 16) ^ x) * _MULTIPLIER & _MASK
    x = ((x >> 16) ^ x) * _MULTIPLIER & _MASK
    return (x >> 16) ^ x


def _mix32_(x: Any) -> Any:
    """:func:`mix32` in place (the ``[rows, vocab]`` hot path)."""
    for _ in range(2):
        x.bitwise_xor_(x >> 16).mul_(_MULTIPLIER).bitwise_and_(_MASK)
    return x.bitwise_xor_(x >> 16)


def row_words(keys: Any, step: int) -> Any:
    """``[b]`` one 32-bit word per row for step ``step``, from its 63-bit key (``[b]`` int64)."""
    import torch

    step_word = mix32(torch.tensor((step * _STEP_SALT + 0x7F4A7C15) & _MASK, dtype=torch.int64, device=keys.device))
    low, high = keys & _MASK, (keys >> 32) & _MASK
    return mix32(mix32(low ^ step_word) ^ high)


def token_words(vocab: int, device: Any) -> Any:
    """``[vocab]`` one 32-bit word per token id (cached per vocabulary size and device)."""
    import torch

    cache_key = (vocab, str(device))
    if cache_key not in _token_words:
        ids = torch.arange(vocab, dtype=torch.int64, device=device)
        _token_words[cache_key] = mix32(ids * _TOKEN_SALT & _MASK)
    return _token_words[cache_key]


def uniforms(keys: Any, step: int, vocab: int) -> Any:
    """``[b, vocab]`` float32 uniforms in [2⁻²⁴, 1 − 2⁻²⁴]: u[i, v] from (keys[i], step, v) alone."""
    import torch

    words = row_words(keys, step)[:, None] ^ token_words(vocab, keys.device)[None, :]
    return (_mix32_(words) >> 9).to(torch.float32).add_(0.5).mul_(2.0**-23)


def gumbel_noise(keys: Any, step: int, vocab: int) -> Any:
    """``[b, vocab]`` standard Gumbel noise −log(−log u) of :func:`uniforms`."""
    return uniforms(keys, step, vocab).log_().neg_().log_().neg_()


def _sorted_nucleus(probs: Any, top_p: float) -> Any:
    """``[b, V]`` bool: each row's nucleus by a full descending sort."""
    import torch

    sorted_p, index = probs.sort(dim=-1, descending=True, stable=True)  # equal ones: lower id first
    keep_sorted = sorted_p.cumsum(-1) - sorted_p < top_p  # the smallest prefix reaching top_p
    return torch.zeros_like(keep_sorted).scatter(-1, index, keep_sorted)


def nucleus(probs: Any, top_p: float) -> Any:
    """``[b, V]`` bool: the smallest most-probable set of each row whose mass reaches ``top_p``
    (a token is in when the mass of the tokens before it, most probable first and of equal ones
    the lower id first, is under top_p: a stable sort's order, so the set never depends on how a
    device's sort or ``topk`` orders ties).

    Found among each row's :data:`NUCLEUS_CANDIDATES` most probable tokens (``topk``, put in that
    order), and by a full sort only for the rows whose nucleus does not end inside them or ends
    among tokens tied with the last candidate (``topk`` may have left out an equal one of lower
    id): the same set as sorting every row — the prefix sums are the same numbers in the same
    order — at a fraction of the cost on a 50,000-token vocabulary (a full sort was a third of a
    CPU's sampling time)."""
    import torch

    k = min(NUCLEUS_CANDIDATES, probs.shape[-1])
    top, index = probs.topk(k, dim=-1)
    index, by_id = index.sort(dim=-1)  # candidates by id, then most probable first (stable)
    top, order = top.gather(-1, by_id).sort(dim=-1, descending=True, stable=True)
    index = index.gather(-1, order)
    keep_top = top.cumsum(-1) - top < top_p
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, index, keep_top)
    # the last candidate's value reached: the nucleus may go on past the candidates, or topk may
    # have chosen among tokens equal to it otherwise than by id
    wider = (keep_top & (top == top[:, -1:])).any(-1)
    if bool(wider.any()):
        keep[wider] = _sorted_nucleus(probs[wider], top_p)
    return keep


def filtered_logits(logits: Any, temperature: float, top_p: float) -> Any:
    """``[b, V]`` logits / T, with the tokens outside the nucleus (:func:`nucleus`; top_p 1 = off)
    set to −inf."""
    import torch

    scaled = logits / temperature
    if top_p >= 1.0:
        return scaled
    return scaled.masked_fill(~nucleus(torch.softmax(scaled, dim=-1), top_p), float("-inf"))


def draw_tokens(logits: Any, keys: Any, step: int, temperature: float, top_p: float = 1.0) -> Any:
    """``[b]`` the token each row draws at ``step`` from ``logits`` (``[b, V]``, float32), its
    key ``keys`` (``[b]`` int64, on the logits' device): Gumbel-max over the filtered logits.
    On a GPU all rows at once; on a CPU in blocks of rows that stay in cache."""
    import torch

    filtered = filtered_logits(logits, temperature, top_p)
    rows, vocab = filtered.shape
    block = rows if filtered.device.type != "cpu" else max(1, _CPU_CHUNK_ELEMENTS // vocab)
    chosen = [
        (filtered[s : s + block] + gumbel_noise(keys[s : s + block], step, vocab)).argmax(dim=-1)
        for s in range(0, rows, block)
    ]
    return chosen[0] if len(chosen) == 1 else torch.cat(chosen)
