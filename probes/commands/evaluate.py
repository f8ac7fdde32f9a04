"""``lara evaluate``: ROC-AUC, TPR@FPR and F1 with CIs, paired comparisons, layer analysis, plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import ProbesError
from ..operations.evaluate import EvaluateInputs, EvaluateSettings, write_evaluation
from ..questions.reading import read_labels, read_question_groups, read_question_texts
from ..scores import jsonable, meta_path
from ._common import add_setting, command_parser, settings_from

EVALUATE_EXAMPLES = """examples:
  lara evaluate scores.csv --labels questions.jsonl -o report/
  lara evaluate scores.csv --labels questions.jsonl --metrics metrics.h5 -o report/ --bootstrap 2000
  lara evaluate lara.csv --labels questions.jsonl --metrics metrics.h5 --reference-metrics ref/metrics.h5 \\
      --activations acts.h5 --reference-activations ref/acts.h5 -o report/   # + the drift map beside LaRA's
  lara evaluate scores.csv -o audit/                                 # no labels: score distributions only
"""

EVALUATE_HELP = "ROC-AUC, TPR@5%%FPR, F1 with bootstrap CIs, paired comparisons, layer analysis, plots"


def register(sub: Any) -> None:
    ev = command_parser(sub, "evaluate", EVALUATE_HELP, EVALUATE_EXAMPLES)
    ev.add_argument("scores", type=Path, help="SCORES.csv (id column + one column per detector, higher = member)")
    ev.add_argument(
        "-o", "--output", type=Path, required=True, help="report directory (report.json, report.md, PNG plots)"
    )
    ev.add_argument(
        "--labels",
        type=Path,
        help="JSONL with id and label (questions or sets file); without it: an audit of score distributions",
    )
    ev.add_argument(
        "--metrics",
        type=Path,
        help="metrics file, for the per-layer profiles, Cohen's d map and window table "
        "with their permutation null (a SCORES.meta.json of `lara score` beside SCORES.csv adds the control-set size)",
    )
    ev.add_argument(
        "--reference-metrics",
        type=Path,
        help="the reference (pre-RL) checkpoint's metrics file of the same questions: "
        "its layer map as a placebo and the depth-profile contrast (with --metrics)",
    )
    ev.add_argument(
        "--activations",
        type=Path,
        help="the audited model's activation store (acts.h5): with --reference-activations, the representation-drift "
        "map of the labelled questions beside LaRA's (no forward pass)",
    )
    ev.add_argument(
        "--reference-activations",
        type=Path,
        help="the reference (pre-RL) checkpoint's activation store of the same texts (with --activations)",
    )
    ev.add_argument("--detectors", help="score columns to report, comma-separated (default: all)")
    ev.add_argument("--baseline", help="column the others are compared with (default: the first)")
    add_setting(
        ev, "--bootstrap", EvaluateSettings, "bootstrap", f"bootstrap resamples (default: {EvaluateSettings.bootstrap})"
    )
    add_setting(ev, "--seed", EvaluateSettings, "seed", f"bootstrap seed (default: {EvaluateSettings.seed})")
    add_setting(ev, "--fpr", EvaluateSettings, "fpr", f"FPR of the TPR figure (default: {EvaluateSettings.fpr})")
    ev.add_argument("--strict", action="store_true", help="TPR among ROC points with FPR < target instead of <=")
    ev.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ev.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..report import render_markdown  # lazy: the report package pulls scipy

    if args.reference_metrics and not args.metrics:
        raise ProbesError("--reference-metrics needs --metrics (the audited model's metrics file)")
    if bool(args.activations) != bool(args.reference_activations):
        raise ProbesError("--activations and --reference-activations go together (the drift between the two models)")
    if args.activations and not args.labels:
        raise ProbesError("the drift map needs --labels (a question file: its texts and labels)")
    settings = settings_from(EvaluateSettings, args, plots=not args.no_plots)
    inputs = EvaluateInputs(
        scores=args.scores,
        labels=read_labels(args.labels) if args.labels else None,
        metrics=args.metrics,
        reference_metrics=args.reference_metrics,
        activations=args.activations,
        reference_activations=args.reference_activations,
        lara_meta=meta_path(args.scores),  # `lara score`'s, when SCORES.csv is its table
        texts=read_question_texts(args.labels) if args.labels else None,  # the blind baseline (SPEC §8.8)
        groups=read_question_groups(args.labels) if args.labels else None,  # its null's matched groups
        provenance={"scores": str(args.scores), "labels": str(args.labels or ""), "metrics": str(args.metrics or "")},
    )
    detectors = [d.strip() for d in args.detectors.split(",")] if args.detectors else None
    report, files = write_evaluation(inputs, settings, args.output, detectors)
    text = render_markdown(jsonable(report))
    print(text.split("## Paired comparison")[0].split("## Layer analysis")[0].rstrip())
    print(f"\nreport: {', '.join(str(f) for f in files)}")
    return 0
