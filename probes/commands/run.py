"""``lara run`` and ``lara demo``: the whole audit from one YAML config."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._common import command_parser, quiet_library_progress_bars
from .verdict import NO_VERDICT_EXIT

RUN_EXAMPLES = """examples:
  lara run configs/demo.yaml                                     # stages already done are skipped
  lara run configs/demo.yaml --set generation.similars=3         # redoes generate and what depends on it
  lara run configs/demo.yaml --set detect.names=[ppl,cdd] --set run_dir=runs/quick
  lara run audit.yaml --set model.source=/models/my-rl-ckpt --set model.dtype=bfloat16

Exit status: 0 when every model has a verdict (or none is asked for), 2 on an error, 3 when a model
has no verdict (no mode had a detector with a usable question: NaN scores, too few controls).

A run directory holds config.resolved.yaml, run.log, ledger/ (stage records), sets.jsonl and, per
model, acts.h5, metrics.h5, lara.csv, detectors.csv, scores.csv and report/. Kill it at any point
and run the same command again: finished stages are skipped, the stage in flight resumes.
"""

RUN_HELP = "the whole audit from one YAML config: generate, cache, LaRA, detectors, fusion, report"


def register(sub: Any) -> None:
    run = command_parser(sub, "run", RUN_HELP, RUN_EXAMPLES)
    run.add_argument("config", type=Path, help="run config (YAML; see configs/demo.yaml)")
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key by its dotted path, repeatable (value read as YAML)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.set_defaults(handler=handle)

    demo = command_parser(
        sub,
        "demo",
        "the main job on the built-in default: lara run configs/demo.yaml",
        "examples:\n  lara demo\n  lara demo --set detect.names=[ppl,cdd] --set run_dir=runs/quick\n",
    )
    demo.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="as for lara run")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(handler=handle_demo)


def handle(args: argparse.Namespace) -> int:
    from ..pipeline import load_run_config, run_pipeline  # lazy: pulls h5py

    quiet_library_progress_bars(args.verbose)
    config = load_run_config(args.config, args.sets)
    result = run_pipeline(config, progress=not args.no_progress)
    if not result.main:  # a torchrun rank other than 0: rank 0 prints the job's results
        return 0
    if result.verdicts:
        print(result.verdicts + "\n")
    print(result.summary)
    print(
        f"\nstages run: {len(result.ran)}, up to date: {len(result.skipped)}; run directory: {result.run_dir} "
        f"(reports: {', '.join(str(p / 'report.md') for p in result.reports.values())})"
    )
    if result.undecided:
        print(
            f"error: no verdict on {', '.join(result.undecided)}: no mode had a detector with a usable question "
            "(see the counts left out above); this is not a negative answer",
            file=sys.stderr,
        )
        return NO_VERDICT_EXIT
    return 0


def handle_demo(args: argparse.Namespace) -> int:
    from ..pipeline.demo import demo_config_path  # lazy: pulls h5py

    args.config = demo_config_path()
    return handle(args)
