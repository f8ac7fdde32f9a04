"""Errors of ``probes`` that the CLI reports as one line (exit status 2)."""

from __future__ import annotations

from lara_core.errors import ConfigError, InputError, LaraError

__all__ = ["ConfigError", "InputError", "LaraError", "MismatchError", "NonFiniteError", "ProbesError"]


class ProbesError(LaraError):
    """Base class of the ``probes`` package's own errors (``ConfigError`` and ``InputError`` are the
    toolkit's, :mod:`lara_core.errors`): files that do not belong together, non-finite numbers."""


class MismatchError(ProbesError):
    """Files that do not belong together (other model, other layers, a reference fitted elsewhere)."""


class NonFiniteError(ProbesError):
    """A model produced NaN/inf where a number must be finite (broken weights, dtype overflow)."""
