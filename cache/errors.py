"""Errors raised by the activation cache.

Every error a user can cause (bad input, bad config, a missing model, a cache written for
another model) is a :class:`CacheError` whose message says what went wrong and what to do.
The CLI prints these without a traceback.
"""

from __future__ import annotations

from lara_core.errors import ConfigError, InputError, LaraError

__all__ = [
    "ArchitectureError",
    "CacheError",
    "ConfigError",
    "InputError",
    "LaraError",
    "ModelLoadError",
    "NonFiniteError",
    "StoreFormatError",
    "StoreMismatchError",
]


class CacheError(LaraError):
    """Base class of the ``cache`` package's own errors (``ConfigError`` and ``InputError`` are the
    toolkit's, :mod:`lara_core.errors`)."""


class ModelLoadError(CacheError):
    """The model or tokenizer could not be found, reached, or loaded."""


class ArchitectureError(CacheError):
    """The decoder blocks or final norm of a model could not be located and validated."""


class StoreMismatchError(CacheError):
    """An activation file was written with another model, backend, layer set or pooling."""


class StoreFormatError(CacheError):
    """A file is not an activation store this version can read."""


class NonFiniteError(CacheError):
    """The model produced NaN/inf activations (compute dtype overflow, broken weights)."""
