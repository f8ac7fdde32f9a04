"""The CLI reference (``docs/cli.md``), generated from the parser so it cannot drift: a test
compares the file with :func:`render`. Regenerate it with

    python -m probes.cli_reference > docs/cli.md
"""

from __future__ import annotations

import argparse
import sys

from .cli import build_parser

HEADER = """# CLI reference

Generated from the parser by `python -m probes.cli_reference > docs/cli.md` (a test fails when a
flag changes and this page does not). Every command also prints its options and examples with
`lara COMMAND --help`. User errors — bad input or config, a mismatched file, a full or read-only
disk — print one `error:` line and exit with status 2; `--debug` adds the traceback. `lara verdict`
and `lara run` exit with status 3 when there is no verdict (no mode had a detector with a usable
question: not a negative answer); Ctrl-C exits with 130, finished work kept. Global flags, before
the command: `-v/--verbose`, `-q/--quiet`, `--debug`.

"""


def command_parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """``[("lara run", parser), ("lara testbed build", parser), …]`` in the order ``lara --help`` lists them."""
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                if nested:
                    out += [(f"{name} {n}", s) for n, s in nested[0].choices.items()]
                else:
                    out.append((name, sub))
    return [(f"lara {name}", sub) for name, sub in out]


def anchor(title: str) -> str:
    """GitHub's anchor of a ``## title`` heading (``lara questions import`` → ``lara-questions-import``)."""
    return "-".join(title.lower().split())


def render() -> str:
    parser = build_parser()
    commands = command_parsers(parser)
    helps = _help_lines(parser)
    lines = [HEADER.rstrip("\n") + "\n", "| command | what it does |", "|---|---|"]
    lines += [f"| [`{name}`](#{anchor(name)}) | {helps.get(name, '')} |" for name, _ in commands]
    for name, sub in commands:
        lines += [
            "",
            f"## {name}",
            "",
            helps.get(name, ""),
            "",
            "```text",
            _usage(sub),
            "```",
            "",
            "| option | default | meaning |",
            "|---|---|---|",
        ]
        lines += [_row(a) for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        if sub.epilog:
            lines += ["", "```text", sub.epilog.strip("\n"), "```"]
    return "\n".join(lines).rstrip() + "\n"


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``{"lara run": its one-line help, …}``, nested commands included."""
    out: dict[str, str] = {}

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    out[f"{prefix} {choice.dest}"] = (choice.help or "").replace("%%", "%")
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}")

    walk(parser, "lara")
    return out


def _usage(sub: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(sub.prog, width=100)
    formatter.add_usage(sub.usage, sub._actions, sub._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _row(action: argparse.Action) -> str:
    if action.option_strings:
        name = ", ".join(action.option_strings)
        if action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
    else:
        name = action.metavar or action.dest
    default = (
        "" if action.default in (None, False, argparse.SUPPRESS) or action.default == [] else f"`{action.default}`"
    )
    text = (action.help or "").replace("%%", "%").replace("|", "\\|")
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text += f" (choices: {', '.join(str(c) for c in action.choices)})"
    return f"| `{name}` | {default} | {text} |"


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render())
