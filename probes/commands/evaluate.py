"""``lara evaluate``: ROC-AUC, TPR@FPR and F1 with CIs, paired comparisons, layer analysis, plots."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from ..errors import ProbesError
from ..lara.metrics_file import MetricsFile
from ..pipeline.config import EvaluateSettings
from ..scores import ScoreTable, jsonable, read_labels, read_question_groups, read_question_texts
from ._common import add_setting, command_parser

logger = logging.getLogger(__name__)


EVALUATE_EXAMPLES = """examples:
  lara evaluate scores.csv --labels questions.jsonl -o report/
  lara evaluate scores.csv --labels questions.jsonl --metrics metrics.h5 -o report/ --bootstrap 2000
  lara evaluate scores.csv -o audit/                                 # no labels: score distributions only
"""


def register(sub: Any) -> None:
    ev = command_parser(
        sub,
        "evaluate",
        "ROC-AUC, TPR@5%%FPR, F1 with bootstrap CIs, paired comparisons, layer analysis, plots",
        EVALUATE_EXAMPLES,
    )
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
    from ..report import ReportContext, ReportSettings, build_report, render_markdown, write_report  # lazy: pulls scipy

    table = ScoreTable.read_csv(args.scores)
    metrics = MetricsFile.read(args.metrics) if args.metrics else None
    reference = MetricsFile.read(args.reference_metrics) if args.reference_metrics else None
    if reference is not None and metrics is None:
        raise ProbesError("--reference-metrics needs --metrics (the audited model's metrics file)")
    lara_info = _lara_info(args.scores)
    labels = read_labels(args.labels) if args.labels else None
    texts = read_question_texts(args.labels) if args.labels else None  # the blind baseline (SPEC §8.8)
    groups = read_question_groups(args.labels) if args.labels else None  # its null's matched groups
    if labels is None and metrics is not None and (metrics.labels >= 0).any():
        labels = {i: int(v) for i, v in zip(metrics.ids, metrics.labels) if v >= 0}
        logger.info("labels: taken from %s", args.metrics)
    detectors = [d.strip() for d in args.detectors.split(",")] if args.detectors else None
    try:
        settings = ReportSettings(detectors, args.baseline, args.bootstrap, args.seed, fpr=args.fpr, strict=args.strict)
        inputs = {"scores": str(args.scores), "labels": str(args.labels or ""), "metrics": str(args.metrics or "")}
        context = ReportContext(inputs, texts=texts, groups=groups, reference_metrics=reference, lara_info=lara_info)
        report = build_report(table, labels, metrics if labels is not None else None, settings, context)
    except KeyError as err:
        raise ProbesError(str(err).strip("'\"")) from None
    files = write_report(report, args.output, table, labels, plots=not args.no_plots)
    text = render_markdown(jsonable(report))
    print(text.split("## Paired comparison")[0].split("## Layer analysis")[0].rstrip())
    print(f"\nreport: {', '.join(str(f) for f in files)}")
    return 0


def _lara_info(scores: Path) -> dict[str, Any] | None:
    """The LaRA scoring's meta beside SCORES.csv (``lara score`` writes it), if it is one."""
    meta = scores.with_suffix(".meta.json")
    try:
        info = json.loads(meta.read_text(encoding="utf-8")) if meta.is_file() else None
    except json.JSONDecodeError:
        return None
    return info if isinstance(info, dict) and "n_reference" in info else None
