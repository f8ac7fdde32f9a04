"""Models and activations from Python: load or wrap a model, pool activations in memory, cache
them to a store, open a store."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from .progress import show_progress

logger = logging.getLogger(__name__)


def load_model(
    model: Any,
    tokenizer: Any = None,
    *,
    base: str | Path | None = None,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
) -> Any:
    """A model ready for every operation of the toolkit (a ``cache.loading.LoadedModel``).

    Args:
        model: a checkpoint directory, a ``.gguf`` file, a PEFT adapter directory or a hub id
            (``str`` / ``Path``, loaded as ``lara`` loads it: an adapter merged into its base), or a model
            already in memory: a Hugging Face ``*ForCausalLM`` (give its ``tokenizer``), a
            TransformerLens ``TransformerBridge`` or an nnsight ``LanguageModel`` (their own
            tokenizers are used), or a ``LoadedModel`` (returned as is).
        tokenizer: the tokenizer of an in-memory Hugging Face model.
        base: an adapter's base (default: the adapter's ``base_model_name_or_path``).
        device, dtype, trust_remote_code: how a directory is loaded (ignored for a model in memory).

    An in-memory model in train mode is put in eval mode (dropout off), with a warning.

    Raises:
        TypeError: ``model`` is of a kind not accepted (the message names those that are).
    """
    from cache.loading import LoadedModel  # lazy: pulls h5py

    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, Path)):
        from cache.config import ModelConfig  # lazy: pulls h5py
        from cache.loading import load_model as load  # lazy: pulls h5py

        config = ModelConfig(
            source=str(model),
            base=None if base is None else str(base),
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
        )
        return load(config)
    from cache.wrap import wrap_model  # lazy: pulls h5py

    return wrap_model(model, tokenizer)


def pool(
    model: Any,
    texts: str | Sequence[str],
    *,
    layers: str | int | Sequence[str | int] = "all",
    prompt_format: str = "raw",
    backend: str = "hf",
    **extraction: Any,
) -> Any:
    """Per-layer mean-pooled activations of ``texts``, in memory (no store):
    ``torch.Tensor [n_texts, n_layers, d_model]`` float32 on the CPU, rows in the given order.

    Args:
        model: anything :func:`load_model` takes.
        texts: the texts; a plain string is one text (``n_texts`` = 1).
        layers: ``"all"`` (every block), block indices (negative ones count from the end),
            ``"embed"``, ``"final_norm"``; the rows' layers are in that order (embed, blocks
            ascending, final_norm).
        prompt_format: ``raw`` (the text as is; BOS only where the tokenizer adds one) or ``chat``.
        backend: ``hf``, ``transformer_lens`` or ``nnsight`` (the same numbers within float error).
        **extraction: other fields of ``cache.ExtractionConfig`` (``max_length``, ``pool_span``…).
    """
    from cache.config import ExtractionConfig  # lazy: pulls h5py
    from cache.pool import pool_texts  # lazy: pulls h5py

    texts = [texts] if isinstance(texts, str) else list(texts)
    config = ExtractionConfig(backend=backend, layers=layer_tokens(layers), prompt_format=prompt_format, **extraction)
    return pool_texts(texts, load_model(model), config)


def cache_activations(
    model: Any,
    texts: str | Sequence[str],
    path: str | Path,
    *,
    layers: str | int | Sequence[str | int] = "all",
    prompt_format: str = "raw",
    backend: str = "hf",
    progress: bool | None = None,
    **extraction: Any,
) -> Any:
    """Pool ``texts`` into the HDF5 store at ``path`` (created, or appended to when it was made
    with the same model and settings; texts already there are skipped) and return the
    :class:`~cache.store.ActivationStore`. Arguments as :func:`pool`; ``progress``: a bar (default:
    on in a notebook or a terminal)."""
    from cache.config import CacheConfig, ExtractionConfig  # lazy: pulls h5py
    from cache.runner import run_cache  # lazy: pulls h5py
    from cache.store import ActivationStore  # lazy: pulls h5py

    loaded = load_model(model)
    texts = [texts] if isinstance(texts, str) else list(texts)
    extraction_config = ExtractionConfig(
        backend=backend, layers=layer_tokens(layers), prompt_format=prompt_format, **extraction
    )
    summary = run_cache(
        texts,
        path,
        CacheConfig(model=loaded.config, extraction=extraction_config),
        loaded=loaded,
        progress=show_progress(progress),
    )
    logger.info("%s", summary.describe())
    return ActivationStore(path)


def open_store(path: str | Path) -> Any:
    """The activation store at ``path``: ``store[text]`` → ``[n_layers, d]``, ``store[[texts]]`` →
    ``[n, n_layers, d]``, ``store.get(texts, layers=[-1], as_torch=True)``."""
    from cache.store import ActivationStore  # lazy: pulls h5py

    return ActivationStore(path)


def layer_tokens(layers: str | int | Sequence[str | int]) -> tuple[str, ...]:
    return (str(layers),) if isinstance(layers, (str, int)) else tuple(str(x) for x in layers)
