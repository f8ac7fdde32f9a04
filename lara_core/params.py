"""Declared parameters (scikit-learn's ``_parameter_constraints`` habit): each detector class
states its hyperparameters' types and ranges once, in ``parameters``, and each engine its arguments
(``probes.responders.registry.EngineEntry.parameters``, checked there); one validator checks a set of values
against them wherever a detector or an engine is chosen — the run config when it is read, the
CLI's ``--param`` / ``--engine-arg``, the Python API — and refuses with one line naming the key::

    detect.params.cdd.n: must be an integer ≥ 1, got "20"

Rules that tie two parameters together (Min-kNN's k ≤ n) or read a file (a template's
placeholders) stay in the detector's ``check_params``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import ConfigError


@dataclass(frozen=True)
class Param:
    """One hyperparameter, declared once as a class attribute of its detector: its default and its
    constraint (``n = Param(50, COUNT)``). The detector's ``__init__`` takes it by keyword, checks it
    and stores it; ``parameters`` and the docs' tables are read from these."""

    default: Any
    constraint: "Constraint"


@dataclass(frozen=True)
class Interval:
    """A number, an integer when ``integer``, between ``low`` and ``high`` (None: unbounded),
    each end included when named in ``closed`` (``"both"``, ``"left"``, ``"right"``, ``"neither"``)."""

    integer: bool
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        if not self.integer and not math.isfinite(value):
            return False
        left = self.low is None or (value >= self.low if self.closed in ("both", "left") else value > self.low)
        right = self.high is None or (value <= self.high if self.closed in ("both", "right") else value < self.high)
        return left and right

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            return (
                f"{kind} in {'[' if self.closed in ('both', 'left') else '('}{self.low:g}, {self.high:g}"
                f"{']' if self.closed in ('both', 'right') else ')'}"
            )
        if self.low is not None:
            return f"{kind} {'≥' if self.closed in ('both', 'left') else '>'} {self.low:g}"
        if self.high is not None:
            return f"{kind} {'≤' if self.closed in ('both', 'right') else '<'} {self.high:g}"
        return kind


@dataclass(frozen=True)
class Options:
    """One of a few strings."""

    values: tuple[str, ...]

    def holds(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def describe(self) -> str:
        return "one of " + ", ".join(self.values)


@dataclass(frozen=True)
class Text:
    """A string (``optional``: or null, for the detector's built-in default)."""

    optional: bool = False

    def holds(self, value: Any) -> bool:
        return isinstance(value, str) or (self.optional and value is None)

    def describe(self) -> str:
        return "a string" + (" or null" if self.optional else "")


@dataclass(frozen=True)
class Flag:
    """true or false."""

    def holds(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Exactly:
    """One value (a sentinel such as −1 for "the whole vocabulary")."""

    value: Any

    def holds(self, value: Any) -> bool:
        return type(value) is type(self.value) and value == self.value

    def describe(self) -> str:
        return shown_value(self.value)


@dataclass(frozen=True)
class AnyOf:
    """A value any one of ``choices`` holds."""

    choices: tuple[Any, ...]

    def holds(self, value: Any) -> bool:
        return any(c.holds(value) for c in self.choices)

    def describe(self) -> str:
        return " or ".join(c.describe() for c in self.choices)


Constraint = Interval | Options | Text | Flag | Exactly | AnyOf

# the constraints most detectors share
COUNT = Interval(integer=True, low=1)
POSITIVE = Interval(integer=False, low=0, closed="neither")
SHARE = Interval(integer=False, low=0, high=1, closed="right")  # (0, 1]
SEED = Interval(integer=True, low=0)


def check_values(detector: str, params: Mapping[str, Any], declared: Mapping[str, Constraint], key: str = "") -> None:
    """Refuse (:class:`ConfigError`, one line) parameters that are not declared, or a value that breaks
    its constraint. ``key``: how the user wrote the detector's parameters (``detect.params.``)."""
    unknown = [name for name in params if name not in declared]
    if unknown:
        raise ConfigError(
            f"{key}{detector}: detector {detector!r} has no parameter {', '.join(unknown)}; its parameters: "
            f"{', '.join(declared) or 'none'}"
        )
    for name, value in params.items():
        if not declared[name].holds(value):
            raise ConfigError(f"{key}{detector}.{name}: must be {declared[name].describe()}, got {shown_value(value)}")


def shown_value(value: Any) -> str:
    """A value as the user wrote it: strings in double quotes (``"20"``), the rest as JSON would."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
