"""The toolkit's root error and the two errors every package raises alike.

Every error a user can cause (bad input, a bad config, a missing model, files that do not belong
together) is a :class:`LaraError` whose message says what went wrong and what to do; the CLI
prints it in one line without a traceback. ``cache``, ``generation`` and ``probes`` each have
their own subclass for the rest (``CacheError``, ``GenerationError``, ``ProbesError``) and
re-export these two, so ``cache.errors.ConfigError is probes.errors.ConfigError``.
"""

from __future__ import annotations

import json


class LaraError(Exception):
    """Root of every user-facing error of the toolkit."""


class ConfigError(LaraError, ValueError):
    """A configuration value or key is invalid (the message names the key)."""


class InputError(LaraError, ValueError):
    """An input (texts, questions, a scores file) is unusable; the message says what to fix."""


def json_problem(err: json.JSONDecodeError) -> str:
    """What is wrong with a line of JSON, for a message: ``Invalid control character at column 60``
    (the decoder's own text ends some messages in "at", which a caller adding "at column" doubled)."""
    message = err.msg[: -len(" at")] if err.msg.endswith(" at") else err.msg
    return f"{message} at column {err.colno}"
