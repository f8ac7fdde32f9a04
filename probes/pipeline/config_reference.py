"""The config reference (``docs/configs.md``), generated from the :class:`RunConfig` dataclass tree
so it cannot drift: every key with its type, default and the description its class documents. A
test compares the file with :func:`render`. Regenerate it with

    python -m probes.pipeline.config_reference > docs/configs.md
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from typing import Any

from .config import RunConfig

HEADER = """# Config reference (`lara run CONFIG.yaml`)

Generated from the config dataclasses by `python -m probes.pipeline.config_reference >
docs/configs.md` (a test fails when a key changes and this page does not). A config is YAML;
unknown or misspelled keys are errors that name the key, the close match and the valid keys;
relative paths are relative to the config file; any key can be overridden with `--set
dotted.key=VALUE` (the value read as YAML). [`configs/demo.yaml`](../configs/demo.yaml) is a
commented example; how a run uses these settings: [`lara run`](run.md).
"""


def render() -> str:
    lines = [HEADER.rstrip("\n")]
    for title, cls in _sections(RunConfig, ""):
        lines += ["", f"## `{title}`" if title else "## top level", ""]
        doc = _summary(cls)
        if doc:
            lines += [doc, ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        descriptions = _attribute_docs(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            nested = _dataclass_of(hints[f.name])
            kind = (
                f"see [`{_join(title, f.name)}`](#{_anchor(_join(title, f.name))})"
                if nested
                else _type_name(hints[f.name])
            )
            lines.append(f"| `{f.name}` | {kind} | {_default(f, bool(nested))} | {descriptions.get(f.name, '')} |")
    return "\n".join(lines).rstrip() + "\n"


def _sections(cls: type, prefix: str) -> list[tuple[str, type]]:
    """``[(dotted key, dataclass)]``: this class, then every nested dataclass (``controls[]`` for a list of them)."""
    out = [(prefix, cls)]
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        nested = _dataclass_of(hints[f.name])
        if nested is not None:
            out += _sections(nested, _join(prefix, f.name) + ("[]" if _is_sequence(hints[f.name]) else ""))
    return out


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _dataclass_of(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp):
        return tp  # type: ignore[return-value]
    for arg in typing.get_args(tp):
        found = _dataclass_of(arg)
        if found is not None:
            return found
    return None


def _is_sequence(tp: Any) -> bool:
    return typing.get_origin(tp) in (tuple, list)


def _type_name(tp: Any) -> str:
    text = str(tp).replace("typing.", "").replace("NoneType", "None").replace("<class '", "").replace("'>", "")
    return "`" + re.sub(r"\b[\w.]+\.(\w+)", r"\1", text).replace("|", "\\|") + "`"


def _default(f: dataclasses.Field, nested: bool) -> str:
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
        return "required"
    if nested and f.default is dataclasses.MISSING:
        return "(its defaults)"
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    if value is None:
        return "none"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{value!r}`".replace("|", "\\|")


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split()) if doc and not doc.startswith(cls.__name__ + "(") else ""


def _attribute_docs(cls: type) -> dict[str, str]:
    """``{field: text}`` from the ``Attributes:`` sections of the class's docstring and its bases'
    (a subclass's fields documented by itself, the inherited ones by the base)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if "__doc__" in vars(klass) and klass is not object:
            out.update(_own_attribute_docs(klass))
    return out


def _own_attribute_docs(cls: type) -> dict[str, str]:
    """``{field: text}`` from one class docstring's ``Attributes:`` section (``a / b: text`` names several)."""
    doc = cls.__doc__ and inspect.cleandoc(cls.__doc__) or ""
    if "Attributes:" not in doc:
        return {}
    out: dict[str, str] = {}
    current: list[str] = []
    for line in doc.split("Attributes:", 1)[1].splitlines():
        match = re.match(r"^\s{4}([\w /,]+):\s*(.*)$", line)
        if match and not line.startswith(" " * 8):
            current = [n.strip() for n in re.split(r"[/,]", match.group(1)) if n.strip()]
            for name in current:
                out[name] = match.group(2).strip()
        elif line.strip() and current:
            for name in current:
                out[name] = (out[name] + " " + line.strip()).strip()
        elif not line.strip():
            current = []
    return {k: v.replace("|", "\\|") for k, v in out.items()}


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render())
