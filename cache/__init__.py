"""Per-layer mean-pooled activations of texts, stored in HDF5 with full provenance.

Light to import: torch, transformers, TransformerLens and nnsight load only when a model is
loaded or a backend is built.

>>> from cache import CacheConfig, ModelConfig, run_cache, ActivationStore
>>> run_cache(["What is 2 + 3?"], "acts.h5", CacheConfig(model=ModelConfig(source="/models/qwen")))
>>> ActivationStore("acts.h5").get(["What is 2 + 3?"]).shape   # [1, n_layers, d_model]
"""

from __future__ import annotations

from typing import Any

from .config import CacheConfig, ExtractionConfig, ModelConfig
from .errors import (
    ArchitectureError,
    CacheError,
    ConfigError,
    InputError,
    ModelLoadError,
    StoreFormatError,
    StoreMismatchError,
)
from .fingerprint import text_hash
from .store import ActivationStore

__all__ = [
    "ActivationStore",
    "ArchitectureError",
    "CacheConfig",
    "CacheError",
    "ConfigError",
    "ExtractionConfig",
    "InputError",
    "ModelConfig",
    "ModelLoadError",
    "StoreFormatError",
    "StoreMismatchError",
    "load_model",
    "run_cache",
    "text_hash",
]

_LAZY = {"run_cache": ("runner", "run_cache"), "load_model": ("loading", "load_model")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
