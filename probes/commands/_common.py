"""Helpers shared by several commands."""

from __future__ import annotations

from typing import Any

from lara_core.configio import literal_choices


def quiet_library_progress_bars(verbose: bool) -> None:
    """Hide transformers' weight-loading bars (ours shows the extraction) unless verbose."""
    if not verbose:
        import transformers.utils.logging

        transformers.utils.logging.disable_progress_bar()


def from_settings(cls: type, name: str, default: bool = True) -> dict[str, Any]:
    """``choices`` (when the field is a ``Literal``) and ``default`` of the settings dataclass field
    ``cls.name``, for ``add_argument``: a flag takes both from the one source of truth."""
    import dataclasses

    out: dict[str, Any] = {}
    try:
        out["choices"] = list(literal_choices(cls, name))
    except TypeError:
        pass
    if default:
        out["default"] = {f.name: f for f in dataclasses.fields(cls)}[name].default
    return out
