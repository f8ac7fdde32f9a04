"""One module per ``lara`` command: each holds its parser (``register(sub)``) and its handler side
by side; ``probes.cli`` only assembles them, in the order of ``COMMANDS``."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

COMMANDS = (
    "run",
    "testbed",
    "questions",
    "cache",
    "generate",
    "metrics",
    "score",
    "evaluate",
    "detect",
    "fuse",
    "verdict",
    "info",
    "serve",
)


def command_modules() -> list[ModuleType]:
    """The command modules, in the order their commands are listed."""
    return [import_module(f"{__name__}.{name}") for name in COMMANDS]
