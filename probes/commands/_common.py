"""Helpers shared by several commands."""

from __future__ import annotations

from typing import Any

from lara_core.configio import literal_choices


def quiet_library_progress_bars(verbose: bool) -> None:
    """Hide transformers' weight-loading bars (ours shows the extraction) unless verbose."""
    if not verbose:
        import transformers.utils.logging

        transformers.utils.logging.disable_progress_bar()


def command_parser(sub: Any, name: str, help: str, epilog: str | None = None, **extra: Any) -> Any:
    """A ``lara NAME`` subcommand parser whose examples (``epilog``) keep their line breaks."""
    import argparse

    return sub.add_parser(name, help=help, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter, **extra)


def settings_from(settings: type, args: Any, **values: Any) -> Any:
    """The settings dataclass ``settings`` built from the parsed flags named like its fields;
    ``values`` give the fields whose flag is parsed differently (a list, a negated switch)."""
    import dataclasses

    names = [f.name for f in dataclasses.fields(settings) if f.name not in values and hasattr(args, f.name)]
    return settings(**{name: getattr(args, name) for name in names}, **values)


def add_setting(
    parser: Any, flag: str, settings: type, name: str, help: str | None = None, *, default: bool = True, **extra: Any
) -> None:
    """``parser.add_argument(flag, …)`` for the settings dataclass field ``settings.name``: its type
    (``int`` or ``float``, from the field's annotation), its choices (a ``Literal``) and, unless
    ``default`` is False, its default come from the field — the flag and the config key share one
    source of truth. ``extra``: further ``add_argument`` arguments (they win)."""
    import dataclasses

    annotation = str({f.name: f for f in dataclasses.fields(settings)}[name].type)
    kind = {"int": int, "float": float}.get(annotation.removesuffix(" | None"))
    arguments: dict[str, Any] = {**from_settings(settings, name, default), "help": help}
    if kind is not None:
        arguments["type"] = kind
    parser.add_argument(flag, **{**arguments, **extra})


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


def add_model_placement(parser: Any) -> None:
    """``--gpus-per-rank`` and ``--trust-remote-code``: the flags every command loading a model shares."""
    parser.add_argument(
        "--gpus-per-rank",
        type=int,
        metavar="G",
        help="a model larger than one GPU: each process (torchrun rank) "
        "spreads it over G of its node's GPUs (local rank r: GPUs r*G .. r*G+G-1), instead of --device",
    )
    parser.add_argument(
        "--trust-remote-code", action="store_true", default=None, help="run code shipped with the checkpoint"
    )
