"""Reports: ``report.json`` (every figure with CI and n), ``report.md`` (the LaRA seed's Table 1
layout) and PNG plots.

>>> from probes.report import build_report, write_report
>>> report = build_report(table, labels, metrics)      # dict
>>> write_report(report, "report/", table, labels, metrics)
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping

from lara_core.files import write_text_atomically

from ..scores import ScoreTable, align_labels, jsonable
from .build import ReportContext, ReportSettings, build_report, layer_analysis
from .markdown import render_markdown, render_summary

__all__ = [
    "ReportContext",
    "ReportSettings",
    "build_report",
    "layer_analysis",
    "render_markdown",
    "render_summary",
    "write_report",
]

logger = logging.getLogger(__name__)


def write_report(
    report: dict[str, Any],
    out_dir: str | Path,
    table: ScoreTable,
    labels: Mapping[str, int | None] | None = None,
    plots: bool = True,
) -> list[Path]:
    """Write ``report.json``, the plots and ``report.md`` into ``out_dir``; returns the files written."""
    from . import plots as draw  # lazy: the package's front door imports on first use

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = report["detectors_order"]
    y = align_labels(table.ids, labels)[0] if labels is not None else None
    drawn: list[str] = []
    if plots:
        if report.get("verdict"):
            from .verdict_plot import plot_verdict  # lazy: the package's front door imports on first use

            plot_verdict(jsonable(report["verdict"]), out / "verdict.png")
            drawn.append("verdict.png")
        if y is not None:
            draw.plot_roc(table, y, names, out / "roc.png")
            drawn.append("roc.png")
        draw.plot_score_histograms(table, y, names, out / "scores.png")
        drawn.append("scores.png")
        layers = report.get("layers") or {}
        if "profiles" in layers:
            draw.plot_profiles(layers, out / "profiles.png")
            draw.plot_cohens_d(layers, out / "cohens_d.png")
            drawn += ["profiles.png", "cohens_d.png"]
    report = {**report, "plots": drawn}
    write_text_atomically(out / "report.json", json.dumps(jsonable(report), indent=1) + "\n")
    write_text_atomically(out / "report.md", render_markdown(jsonable(report), drawn))
    return [out / "report.json", out / "report.md", *(out / name for name in drawn)]
