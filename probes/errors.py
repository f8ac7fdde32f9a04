"""Errors of ``probes`` that the CLI reports as one line (exit status 2)."""

from __future__ import annotations


class ProbesError(Exception):
    """A user-facing problem: bad input, configuration or files that do not belong together."""


class InputError(ProbesError):
    """An input file is missing, malformed or incomplete."""


class ConfigError(ProbesError):
    """An option or config value is invalid."""


class MismatchError(ProbesError):
    """Files that do not belong together (other model, other layers, a reference fitted elsewhere)."""


class NonFiniteError(ProbesError):
    """A model produced NaN/inf where a number must be finite (broken weights, dtype overflow)."""
