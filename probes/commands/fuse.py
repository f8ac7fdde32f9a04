"""``lara fuse``: several detector columns fused into one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..fusion import FusionSpec
from ..operations.fuse import fused_table, write_fused
from ..questions.reading import read_labels, read_splits
from ..scores import ScoreTable
from ._common import add_setting, command_parser

FUSE_EXAMPLES = """examples:
  lara fuse scores.csv lara_scores.csv --detectors self_critique,lara --labels questions.jsonl -o fused.csv
  lara fuse scores.csv --detectors self_critique,lara --method rank-mix --weights 0.65,0.35 -o fused.csv
  lara fuse scores.csv --detectors ppl,cdd,min_knn --method stacking --labels questions.jsonl -o fused.csv
"""

FUSE_HELP = "fuse detector scores (robust-z mean, rank mix, cross-validated stacking) into one column"


def register(sub: Any) -> None:
    fuse = command_parser(sub, "fuse", FUSE_HELP, FUSE_EXAMPLES)
    fuse.add_argument("scores", type=Path, nargs="+", help="one or more score CSVs, joined on id")
    fuse.add_argument("-o", "--output", type=Path, required=True, help="CSV: the joined columns plus the fused one")
    fuse.add_argument("--detectors", required=True, help="comma-separated columns to fuse, e.g. self_critique,lara")
    add_setting(fuse, "--method", FusionSpec, "method", f"(default: {FusionSpec.method})")
    fuse.add_argument(
        "--weights", help="comma-separated weights (robust-z, rank-mix); rank-mix of two: β,1−β e.g. 0.65,0.35"
    )
    fuse.add_argument("--labels", type=Path, help="questions JSONL with label (stacking, crossfit) and split (split)")
    add_setting(
        fuse,
        "--clean-ref",
        FusionSpec,
        "clean_ref",
        "robust-z reference: split clean_ref, labelled "
        "non-members (cross-fitted), or all rows (an unsupervised audit); default: split, else crossfit",
        default=False,
    )
    add_setting(fuse, "--folds", FusionSpec, "folds", f"cross-fitting / stacking folds (default: {FusionSpec.folds})")
    add_setting(fuse, "--seed", FusionSpec, "seed")
    fuse.add_argument("--name", help="name of the fused column (default: the detectors joined by '+')")
    fuse.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import numpy as np

    names = [n.strip() for n in args.detectors.split(",") if n.strip()]
    spec = FusionSpec(
        tuple(names),
        args.name,
        args.method,
        tuple(float(w) for w in args.weights.split(",")) if args.weights else (),
        args.clean_ref,
        args.folds,
        args.seed,
    )
    labels = read_labels(args.labels) if args.labels else None
    splits = read_splits(args.labels) if args.labels else {}
    fused = fused_table([ScoreTable.read_csv(p) for p in args.scores], [spec], labels, splits)
    meta_path = write_fused(fused.table, fused.meta, args.output)
    values = fused.table.columns[spec.column()]
    print(
        f"{spec.column()}: {fused.described[spec.column()]}; {int(np.isfinite(values).sum())} of {len(values)} questions fused "
        f"-> {args.output} (settings in {meta_path})"
    )
    return 0
