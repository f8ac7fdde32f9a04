"""Errors raised by the perturbation generator.

Every error a user can cause (a bad questions file, a bad config, a missing API key, an output
file written with other settings) is a :class:`GenerationError` whose message says what to do.
The CLI prints these without a traceback. Problems with *one* question (no numbers to vary, an
LLM answer that never validated) are not errors: they are recorded in that question's set.
"""

from __future__ import annotations


class GenerationError(Exception):
    """Base class of every user-facing error of the ``generation`` package."""


class ConfigError(GenerationError, ValueError):
    """A configuration value or key is invalid."""


class InputError(GenerationError, ValueError):
    """The questions file is unusable (missing field, duplicate id, bad JSON)."""


class OutputMismatchError(GenerationError):
    """An existing output or journal was made with other settings than this run's."""


class EndpointError(GenerationError):
    """The LLM endpoint refused the job as a whole (bad key, unknown model, missing key)."""
