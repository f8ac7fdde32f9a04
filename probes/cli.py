"""The ``lara`` command line: assembles the commands of ``probes.commands`` (one module each, its
parser beside its handler).

Commands import their heavy modules only when they run; ``main`` takes ``argv`` so tests call it
directly. User errors (bad input, config, model, mismatched cache) and a full or read-only disk
print one message and exit with status 2; ``--debug`` shows the traceback as well.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
from typing import Sequence

from cache.outputs import disk_error_message
from lara_core.errors import LaraError
from lara_core.version import __version__

from .commands import command_modules

logger = logging.getLogger("probes.cli")

MAIN_EXAMPLES = """examples:
  lara demo                                             # the testbed's RL checkpoint and its SFT control, end to end
  lara run configs/demo.yaml --set generation.similars=3
  lara run configs/eurus-2-7b-prime.yaml                # the LaRA paper's setup (GPU, OpenRouter key)
  lara testbed build --out testbed/ --preset cpu --seed 0
  lara detect ppl,cdd questions.jsonl --model ./checkpoints/rl -o scores.csv
  lara COMMAND --help                                   # each command's options and examples
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    _configure_logging(args.verbose, args.quiet)
    try:
        return int(args.handler(args) or 0)
    except LaraError as err:
        if args.debug:
            logger.exception("failed")
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.OperationalError) as err:  # a full or read-only disk: one line, work kept
        message = disk_error_message(err)
        if message is None:
            raise
        if args.debug:
            logger.exception("failed")
        print(f"error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished rows are kept and the next run resumes from them", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    """The ``lara`` parser: global flags, then every command's own ``register``."""
    parser = argparse.ArgumentParser(
        prog="lara",
        description="LaRA Probes: audit an RL-post-trained language model for benchmark contamination.",
        epilog=MAIN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lara-probes {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of user errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in command_modules():
        module.register(sub)
    return parser


def _configure_logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in (
        "httpx",
        "httpx2",
        "httpcore",
        "openai",
        "transformers",
        "transformer_lens",
        "nnsight",
        "filelock",
        "urllib3",
        "matplotlib",
    ):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
