"""``lara score``: one LaRA contamination score per question against a clean reference."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..lara.protocol import ScoreOptions
from ..operations.score import ScoreSettings, write_scores
from ..questions.reading import read_labels
from ..scores import meta_path
from ._common import add_setting, command_parser, settings_from

SCORE_EXAMPLES = """examples:
  lara score metrics.h5 -o scores.csv                                # clean reference: split clean_ref, else cross-fit
  lara score metrics.h5 -o scores.csv --clean-ref crossfit --labels questions.jsonl
  lara score metrics.h5 -o scores.csv --clean-ref clean_metrics.h5 --save-reference ref.json
  lara score new_metrics.h5 -o scores.csv --clean-ref ref.json --layers late --dc signed
"""

SCORE_HELP = "turn LaRA metrics into one contamination score per question against a clean reference"


def register(sub: Any) -> None:
    score = command_parser(sub, "score", SCORE_HELP, SCORE_EXAMPLES)
    score.add_argument("metrics", type=Path, help="metrics file (lara metrics)")
    score.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="SCORES.csv to write (a .meta.json with the settings is written beside it)",
    )
    score.add_argument(
        "--clean-ref",
        help="split | crossfit | CLEAN_METRICS.h5 | REFERENCE.json (default: split if questions have "
        "split clean_ref, else crossfit over labelled non-members)",
    )
    score.add_argument(
        "--labels", type=Path, help="JSONL with id and label, overriding the labels in the metrics file (crossfit)"
    )
    score.add_argument(
        "--save-reference", type=Path, help="write the reference fitted on the whole clean pool (JSON) for reuse"
    )
    score.add_argument(
        "--metric-set",
        default=",".join(ScoreSettings.metric_set),
        help=f"metrics to aggregate (default: {','.join(ScoreSettings.metric_set)})",
    )
    add_setting(
        score,
        "--layers",
        ScoreSettings,
        "layers",
        "all | early | mid | late | 9-17 | 0,5,10 (default: all block layers)",
    )
    add_setting(score, "--dc", ScoreOptions, "dc", "DC alignment: |z| (default) or +z")
    score.add_argument(
        "--outer-abs", action="store_true", help="wrap every aligned z in |.| (the public code's variant)"
    )
    add_setting(
        score, "--zero-scale", ScoreOptions, "zero_scale", "cells with MAD = 0: divide by eps (default) or leave out"
    )
    add_setting(score, "--eps", ScoreSettings, "eps", f"added to the reference scale (default: {ScoreSettings.eps:g})")
    add_setting(score, "--folds", ScoreSettings, "folds", f"cross-fitting folds (default: {ScoreSettings.folds})")
    add_setting(score, "--seed", ScoreSettings, "seed", f"seed of the fold assignment (default: {ScoreSettings.seed})")
    score.add_argument(
        "--no-variants", action="store_true", help="only the main 'lara' column (no per-metric / per-window columns)"
    )
    score.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    metric_set = tuple(m.strip() for m in args.metric_set.split(","))
    settings = settings_from(ScoreSettings, args, metric_set=metric_set, variants=not args.no_variants)
    labels = read_labels(args.labels) if args.labels else None
    result = write_scores(args.metrics, settings, args.output, labels, args.save_reference)
    info = result.info
    print(
        f"{info['n_questions']} questions scored against a clean reference of {info['n_reference']} "
        f"({info['clean_ref_mode']}: {info.get('reference_source') or info.get('reference_file')}); "
        f"{info['n_cross_fitted']} cross-fitted over {info['folds_used']} folds -> {args.output}"
    )
    if info["n_nan"]:
        print(f"NaN scores: {info['n_nan']} (" + ", ".join(f"{k} {v}" for k, v in info["nan_reasons"].items()) + ")")
    if info["zero_scale_cells"]:
        print(
            f"zero-scale cells (MAD = 0): {len(info['zero_scale_cells'])}, e.g. {', '.join(info['zero_scale_cells'][:4])}"
        )
    print(f"columns: {', '.join(info['columns'])}; settings in {meta_path(args.output)}")
    if args.save_reference:
        print(f"reference saved to {args.save_reference}")
    return 0
