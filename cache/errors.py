"""Errors raised by the activation cache.

Every error a user can cause (bad input, bad config, a missing model, a cache written for
another model) is a :class:`CacheError` whose message says what went wrong and what to do.
The CLI prints these without a traceback.
"""

from __future__ import annotations


class CacheError(Exception):
    """Base class of every user-facing error of the ``cache`` package."""


class ConfigError(CacheError, ValueError):
    """A configuration value or key is invalid."""


class InputError(CacheError, ValueError):
    """The texts to cache are unusable (empty text, bad encoding, too long under ``on_long: error``)."""


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
