"""Errors raised by the perturbation generator.

Every error a user can cause (a bad questions file, a bad config, a missing API key, an output
file written with other settings) is a :class:`GenerationError` whose message says what to do.
The CLI prints these without a traceback. Problems with *one* question (no numbers to vary, an
LLM answer that never validated) are not errors: they are recorded in that question's set.
"""

from __future__ import annotations

from lara_core.errors import ConfigError, InputError, LaraError

__all__ = ["ConfigError", "EndpointError", "GenerationError", "InputError", "LaraError", "OutputMismatchError"]


class GenerationError(LaraError):
    """Base class of the ``generation`` package's own errors (``ConfigError`` and ``InputError`` are
    the toolkit's, :mod:`lara_core.errors`)."""


class OutputMismatchError(GenerationError):
    """An existing output or journal was made with other settings than this run's."""


class EndpointError(GenerationError):
    """The LLM endpoint refused the job as a whole (bad key, unknown model, missing key)."""
