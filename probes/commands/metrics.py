"""``lara metrics``: zRSM, DC and zRSI per question and layer from cached activations."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..operations.metrics import MetricsSettings, write_metrics
from ._common import add_setting, command_parser, settings_from

METRICS_EXAMPLES = """examples:
  lara metrics sets.jsonl acts.h5 -o metrics.h5
  lara metrics sets.jsonl acts.h5 -o metrics.h5 --layers 0,1,2,3 --chunk-mib 512
"""

METRICS_HELP = "compute zRSM, DC and zRSI per layer for every perturbation set from its cached activations"


def register(sub: Any) -> None:
    metrics = command_parser(sub, "metrics", METRICS_HELP, METRICS_EXAMPLES)
    metrics.add_argument("sets", type=Path, help="perturbation sets JSONL (lara generate)")
    metrics.add_argument("activations", type=Path, help="activation store holding every text of the sets (lara cache)")
    metrics.add_argument("-o", "--output", type=Path, required=True, help="metrics file to write (HDF5)")
    metrics.add_argument("--layers", help="stored layers to use, e.g. 0,1,2 or embed,0 (default: every stored layer)")
    add_setting(
        metrics,
        "--eps",
        MetricsSettings,
        "eps",
        f"numerical floor of the denominators (default: {MetricsSettings.eps:g})",
    )
    add_setting(
        metrics,
        "--min-paraphrases",
        MetricsSettings,
        "min_paraphrases",
        f"paraphrases a group member needs to be used (default: {MetricsSettings.min_paraphrases})",
    )
    metrics.add_argument(
        "--chunk-mib",
        type=float,
        default=32,
        help="float32 activations read per chunk of questions, in MiB (default: 32)",
    )
    metrics.add_argument("--no-progress", action="store_true", help="no progress bar")
    metrics.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    layers = tuple(x.strip() for x in args.layers.split(",")) if args.layers else None
    settings = settings_from(MetricsSettings, args, layers=layers)
    summary = write_metrics(
        args.sets, args.activations, args.output, settings, chunk_mib=args.chunk_mib, progress=not args.no_progress
    )
    print(summary.describe())
    return 0
