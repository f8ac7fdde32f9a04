"""Pool per-layer mean activations of texts, batch by batch: the loop the cache runner writes to a
store, and :func:`pool_texts`, which returns them in memory (no store)."""

from __future__ import annotations

import logging
from typing import Any, Collection, Iterable, Iterator

import numpy as np

from .backends import Extractor, create_extractor
from .batching import collate, default_batch_tokens, plan_batches
from .config import ExtractionConfig
from .errors import ConfigError, InputError, NonFiniteError
from .fingerprint import text_hash
from .layers import LayerSelection, resolve_layers
from .loading import LoadedModel
from .prompts import EncodedText, PromptEncoder

logger = logging.getLogger(__name__)


def as_text_list(texts: Iterable[str], what: str = "texts") -> list[str]:
    """``texts`` as a list; a bare string is refused (it would be pooled one character per row)."""
    if isinstance(texts, (str, bytes)):
        raise InputError(
            f"{what} must be a list of strings, got one string ({texts[:40]!r}); pass [text] for a single text"
        )
    return list(texts)


def check_texts(texts: list[str]) -> None:
    """Refuse an empty list, a non-string or an empty text (naming its index)."""
    if not texts:
        raise InputError("no texts to cache")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"text {i} is a {type(text).__name__}, not a string")
        if not text.strip():
            raise InputError(f"text {i} is empty; remove empty texts before caching")


def layer_selection(loaded: LoadedModel, ex: ExtractionConfig) -> LayerSelection:
    """The blocks ``ex.layers`` names on this model (negative indices count from the end)."""
    selection = resolve_layers(ex.layers, loaded.layout.n_blocks)
    if selection.final_norm and loaded.layout.final_norm_path is None:
        raise ConfigError(
            "layer 'final_norm' was asked for but this model's final norm could not be located; "
            "pass --final-norm-path or drop 'final_norm'"
        )
    return selection


def make_encoder(loaded: LoadedModel, ex: ExtractionConfig) -> PromptEncoder:
    """The prompt encoder of ``ex`` on this model's tokenizer (context limit from the model)."""
    return PromptEncoder(
        loaded.tokenizer,
        prompt_format=ex.prompt_format,
        pool_span=ex.pool_span,
        max_length=_max_length(ex.max_length, loaded),
        on_long=ex.on_long,
        system_prompt=ex.system_prompt,
        add_generation_prompt=ex.add_generation_prompt,
    )


def pooled_batches(
    work: list[int],
    encoded: list[EncodedText],
    keys: list[str],
    extractor: Extractor,
    selection: LayerSelection,
    loaded: LoadedModel,
    ex: ExtractionConfig,
    texts: list[str],
    done: Collection[str] = (),
) -> Iterator[tuple[list[int], np.ndarray]]:
    """``(indices, pooled [batch, n_layers, d] float32)`` for the texts ``work`` (indices into
    ``encoded``/``keys``/``texts``), in the batch plan's order (a pure function of the texts); a
    batch whose keys are all in ``done`` is skipped, so a resumed run computes the same batches."""
    budget = ex.max_batch_tokens or default_batch_tokens(loaded.device.type)
    plan = plan_batches([len(encoded[i]) for i in work], [keys[i] for i in work], ex.batch_size, budget)
    for batch in ([work[j] for j in b] for b in plan):
        if all(keys[i] in done for i in batch):
            continue
        tokens = collate([encoded[i] for i in batch], loaded.tokenizer.pad_token_id, ex.padding_side)
        pooled = extractor.pool(tokens, selection).numpy()
        check_finite_rows(pooled, [texts[i] for i in batch], loaded)
        yield batch, pooled


def pool_texts(
    texts: Iterable[str],
    loaded: LoadedModel,
    extraction: ExtractionConfig | None = None,
    *,
    extractor: Extractor | None = None,
) -> Any:
    """Per-layer mean activations of ``texts`` in memory: ``torch.Tensor [n_texts, n_layers, d_model]``
    float32 on the CPU, rows in the given order (a repeated text is computed once), layers in
    the order of :func:`layer_selection` (``embed``, blocks ascending, ``final_norm``). The same
    rows ``run_cache`` stores (before the store's dtype)."""
    import torch

    ex = extraction or ExtractionConfig()
    texts = as_text_list(texts)
    check_texts(texts)
    unique = list(dict.fromkeys(texts))
    selection = layer_selection(loaded, ex)
    encoded = make_encoder(loaded, ex).encode(unique)
    extractor = extractor or create_extractor(ex.backend, loaded, own_model=False)
    rows = np.zeros((len(unique), len(selection.labels), loaded.layout.d_model), dtype=np.float32)
    keys = [text_hash(t) for t in unique]
    for batch, pooled in pooled_batches(
        list(range(len(unique))), encoded, keys, extractor, selection, loaded, ex, unique
    ):
        rows[batch] = pooled
    where = {t: i for i, t in enumerate(unique)}
    return torch.from_numpy(rows[[where[t] for t in texts]])


def check_finite_rows(pooled: np.ndarray, texts: list[str], loaded: LoadedModel) -> None:
    """Refuse non-finite activations at their source (``pooled``: ``[batch, n_layers, d]``): a NaN
    row would make every metric of its question NaN downstream."""
    bad = ~np.isfinite(pooled).all(axis=(1, 2))
    if bad.any():
        first = texts[int(np.argmax(bad))]
        raise NonFiniteError(
            f"the model produced non-finite activations (NaN/inf) for {int(bad.sum())} of {len(texts)} texts "
            f"in a batch (first: {first[:60]!r}); nothing of that batch was stored. The compute dtype "
            f"({loaded.dtype}) overflows or the model is broken: try --dtype float32 or bfloat16"
        )


def _max_length(requested: int | None, loaded: LoadedModel) -> int | None:
    limit = loaded.max_positions
    model_max = getattr(loaded.tokenizer, "model_max_length", None)
    if limit is None and isinstance(model_max, int) and model_max < 1_000_000:
        limit = model_max
    if requested is None:
        return limit
    if limit is not None and requested > limit:
        logger.warning("max_length %d is above the model's context of %d; using %d", requested, limit, limit)
        return limit
    return requested
