"""A run config as it is read: ``--set key=value`` overrides by dotted path (values read as YAML)
and the relative paths made absolute — against the config file's directory for the file's own
values, against the current directory for those given with ``--set``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Sequence

import yaml

from ..errors import ConfigError

# keys holding file-system paths, resolved against the config file's directory
PATH_KEYS = (
    "questions",
    "questions.include_path",
    "questions_source.include_path",
    "run_dir",
    "model.source",
    "model.base",
    "score.clean_ref",
    "detect.store",
)
MODEL_KEYS = ("model.source", "model.base")  # a path, or a hub id
SCORE_MODES = ("split", "crossfit")


def parse_set(
    items: Sequence[str], flag: str = "--set", example: str = "generation.similars=3"
) -> list[tuple[list[str], Any]]:
    """``["a.b=1", …]`` → ``[(["a", "b"], 1), …]``; values parsed as YAML (``flag`` and
    ``example``: how a refusal names the flag)."""
    out = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE, e.g. {flag} {example}")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"{flag} {item!r}: the value is not valid YAML ({err})") from err
        out.append((key.strip().split("."), value))
    return out


def apply_sets(data: dict[str, Any], sets: Sequence[tuple[list[str], Any]]) -> dict[str, Any]:
    """``data`` with every (dotted path, value) set, creating sections on the way."""
    data = copy.deepcopy(data)
    for path, value in sets:
        node = data
        for depth, key in enumerate(path[:-1]):
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {'.'.join(path)}: '{'.'.join(path[: depth + 1])}' is not a section")
            node = child
        node[path[-1]] = value
    return data


def resolve_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy of a config mapping with its path keys (and each control's source and base) made absolute
    against ``base``, the config file's directory."""
    data = copy.deepcopy(data)
    for dotted in PATH_KEYS:
        _resolve_one(data, dotted.split("."), base)
    for control in data.get("controls") or []:
        if isinstance(control, dict):
            _resolve_one(control, ["source"], base, model_source=True)
            _resolve_one(control, ["base"], base, model_source=True)
    return data


def _resolve_one(node: Any, keys: list[str], base: Path, model_source: bool = False) -> None:
    for key in keys[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return
    value = node.get(keys[-1])
    resolved = _resolve_value(".".join(keys), value, base, model_source)
    if resolved is not None:
        node[keys[-1]] = resolved


def _resolve_value(dotted: str, value: Any, base: Path, model_source: bool = False) -> str | None:
    """``value`` made absolute against ``base`` if it is a relative path, else None.

    A model source is a path only if it starts with ``.`` or exists under ``base`` (otherwise it
    may be a hub id such as ``org/name``); a clean reference ``split``/``crossfit`` is a mode.
    """
    if not isinstance(value, str) or not value or Path(value).is_absolute() or value.startswith("~"):
        return None
    if dotted == "score.clean_ref" and value in SCORE_MODES:
        return None
    if (model_source or dotted in MODEL_KEYS) and not (value.startswith(".") or (base / value).exists()):
        return None
    return str((base / value).resolve())


def absolute_if_path(keys: list[str], value: Any) -> Any:
    """A ``--set`` value made absolute against the current directory when its key holds a path."""
    dotted = ".".join(keys)
    if dotted in PATH_KEYS:
        resolved = _resolve_value(dotted, value, Path.cwd())
        return value if resolved is None else resolved
    return value
