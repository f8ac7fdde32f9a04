"""The toolkit's one config validator: validated dataclasses from plain mappings (parsed YAML),
naming every bad key — for ``cache``, ``generation`` and ``probes`` alike.

Only the field types the configs use are understood: ``str``, ``int``, ``float``, ``bool``,
``Literal[...]``, ``X | None``, ``tuple[str, ...]`` (a YAML list, or a comma-separated string as
the CLI writes lists: ``--set detect.names=ppl,min_k``) and nested dataclasses. Unknown keys are
rejected with the valid keys and a close match; wrong types name the dotted key path.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Mapping, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from .errors import ConfigError

T = TypeVar("T")


def prompt_text(value: str) -> str:
    """A prompt text as a config key or a command-line flag gives it: ``\\n`` is a newline and
    ``\\\\`` a backslash, nothing else is an escape. One rule for both: ``--template "Q: {prompt}\\nA:"``
    in a shell (which keeps the backslash) and ``template: "Q: {prompt}\\nA:"`` in YAML (which turns
    it into a newline itself) give the same prompt. A LaTeX command in a prompt text keeps its
    backslash (``\\boxed``), except those starting with n: write ``\\\\neq``."""
    return re.sub(r"\\(\\|n)", lambda m: "\\" if m.group(1) == "\\" else "\n", value)


def encode_prompt_text(value: str) -> str:
    """The inverse of :func:`prompt_text` for a value written back to a config (a backslash
    doubled), so reading the written config gives the same text again."""
    return value.replace("\\", "\\\\")


def decode_prompt_texts(data: Mapping[str, Any], keys: tuple[str, ...], rule: Any = None) -> dict[str, Any]:
    """``data`` (a parsed config) with :func:`prompt_text` (or ``rule``) applied to the dotted
    ``keys`` that hold strings."""
    import copy

    rule = rule or prompt_text
    out = copy.deepcopy(dict(data))
    for dotted in keys:
        node: Any = out
        *path, last = dotted.split(".")
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(last), str):
            node[last] = rule(node[last])
    return out


def literal_choices(cls: type, field_name: str) -> tuple[str, ...]:
    """The allowed values of a ``Literal`` (or ``Literal | None``) field of a dataclass."""
    hint = get_type_hints(cls)[field_name]
    for candidate in (hint, *get_args(hint)):
        if get_origin(candidate) is Literal:
            return tuple(get_args(candidate))
    raise TypeError(f"{cls.__name__}.{field_name} is not a Literal field")


def from_mapping(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    """Instantiate dataclass ``cls`` from ``data``, validating keys and value types.

    Args:
        cls: a dataclass type.
        data: the mapping (e.g. a YAML section); ``None`` means all defaults.
        where: dotted prefix used in error messages (e.g. ``"extraction"``).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'} must be a mapping of keys to values, got {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(str(key), list(fields), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown config key '{_join(where, key)}'{hint} Valid keys: {', '.join(sorted(fields))}")
    kwargs: dict[str, Any] = {}
    problems: list[str] = []  # every field's problem at once, not the first alone (issue 35: one pass)
    for name, value in data.items():
        try:
            kwargs[name] = _coerce(hints[name], value, _join(where, name))
        except ConfigError as err:
            problems.append(str(err))
    if problems:
        raise ConfigError("; ".join(problems))
    missing = [
        name
        for name, f in fields.items()
        if name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
    ]
    if missing:
        raise ConfigError(f"missing required config key '{_join(where, missing[0])}'")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where or cls.__name__}: {err}") from err


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file into a dict, with a clear error for a missing or malformed file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot parse config file {path}: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at top level, got {type(data).__name__}")
    return data


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _coerce(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(option, value, where)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if len(errors) == 1 else f"'{where}': invalid value {value!r}")
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices:
            raise ConfigError(f"'{where}' must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    if dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, where)
    if origin is tuple:
        (item_type, _ellipsis) = get_args(hint)
        if isinstance(value, str):  # "ppl,min_k" as the CLI writes lists: every list of the configs holds names
            value = [part.strip() for part in value.split(",")]
        elif isinstance(value, int):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"'{where}' must be a list, got {type(value).__name__}")
        return tuple(_coerce(item_type, item, f"{where}[{i}]") for i, item in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"'{where}' must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"'{where}' must be of type int, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"'{where}' must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"'{where}' must be a string, got {value!r}")
        return value
    if hint is typing.Any:
        return value
    raise TypeError(f"unsupported config field type {hint!r} at {where}")
