"""``lara run``'s stages that read every model's scores — fusion, the verdict, the report — each
stage's ledger key beside its body, and the summary lines ``lara run`` prints; the stages that
need the model itself are in :mod:`.stages`, the table that drives both in :mod:`.stage_table`."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from cache.sources import describe_model

from ..lara.metrics_file import MetricsFile
from ..operations.fuse import fused_table, write_fused
from ..questions.importing import provenance_for_report
from ..scorefiles import ScoredFiles, read_scored
from ..scores import (
    ScoreTable,
    join_tables,
    match_group,
)
from .config import RunConfig
from .layout import RunLayout

logger = logging.getLogger(__name__)


def fuse_key(tables: dict[str, str], questions: str, config: RunConfig, reference: str | None) -> dict[str, Any]:
    """The fuse stage's key: the score tables, the questions, the fusions, the reference's table."""
    return {
        "tables": tables,
        "questions": questions,
        "fusion": [dataclasses.asdict(f) for f in config.fusion],
        "reference": reference,
    }


def fuse(
    run_dir: Path,
    name: str,
    config: RunConfig,
    tables: list[str],
    labels: dict[str, int | None] | None,
    splits: dict[str, str | None],
    reference_table: str | None,
) -> None:
    """All score columns of the model joined, its ``<det>@ref`` columns (the reference model's
    ``reference_table`` subtracted, SPEC §8.7), and the fused columns (:mod:`probes.operations.fuse`)."""
    fused = fused_table(
        [ScoreTable.read_csv(run_dir / t) for t in tables],
        config.fusion,
        labels,
        splits,
        ScoreTable.read_csv(run_dir / reference_table) if reference_table is not None else None,
    )
    layout = RunLayout(run_dir)
    scores, scores_meta = layout.model(name).scores
    write_fused(fused.table, fused.meta, layout.path(scores), layout.path(scores_meta))


def verdict_key(
    tables: dict[str, str], questions: str, config: RunConfig, reference: dict[str, str] | None
) -> dict[str, Any]:
    """The verdict stage's key: the model's tables, the questions, the verdict settings, the reference's tables."""
    return {
        "tables": tables,
        "questions": questions,
        "verdict": dataclasses.asdict(config.verdict),
        "reference": reference,
    }


def verdict(
    run_dir: Path,
    name: str,
    config: RunConfig,
    tables: list[str],
    labels: dict[str, int | None] | None,
    splits: dict[str, str | None],
    reference: str | None,
) -> None:
    """``RUN/<model>/verdict.json``: the label-free verdict (SPEC §8) on the model's detector scores
    and controls (and LaRA's scores), against the reference model's when there is one; and
    ``RUN/<model>/questions.csv``, its per-question decisions (SPEC §8.10)."""
    from ..operations.verdict import VerdictInputs, write_verdict  # lazy: pulls scipy
    from ..report.verdict_text import describe_verdict

    layout = RunLayout(run_dir)
    files = layout.model(name)

    def scored(model: str) -> ScoredFiles:
        # the controls are read only when this run scored them, and only those its detect stage bound
        return read_scored(layout.path(layout.model(model).detector_scores), use_controls=config.calibrating)

    lara = [ScoreTable.read_csv(run_dir / t) for t in tables]
    if config.detect.names:
        audited = scored(name)
        audited.scores = join_tables([audited.scores, *lara])
    else:
        audited = ScoredFiles(join_tables(lara), None)
    c = config.calibration
    inputs = VerdictInputs(
        audited,
        reference=scored(reference) if reference else None,
        labels=labels or {},
        splits=splits,
        verdict_controls=c.controls if c.most > c.controls else None,
        self_reference=name == config.reference_name(),
    )
    result = write_verdict(inputs, config.verdict, layout.path(files.verdict), layout.path(files.questions))
    logger.info("%s", describe_verdict(result, f"verdict on {name}"))


def evaluate_key(
    scores: str,
    questions: str,
    metrics: str | None,
    verdict: str | None,
    config: RunConfig,
    reference_metrics: str | None = None,
) -> dict[str, Any]:
    """The evaluate stage's key: the scores, the questions, the metrics (the audited model's and the
    reference model's, the layer map's placebo), the verdict, the settings."""
    return {
        "scores": scores,
        "questions": questions,
        "metrics": metrics,
        "verdict": verdict,
        "reference_metrics": reference_metrics,
        "evaluate": dataclasses.asdict(config.evaluate),
    }


def evaluate(
    run_dir: Path,
    name: str,
    config: RunConfig,
    labels: dict[str, int | None] | None,
    metrics_rel: str | None,
    questions: list,
    has_verdict: bool,
    reference_metrics_rel: str | None = None,
) -> None:
    from ..report import ReportContext, ReportSettings, build_report, write_report  # lazy: pulls scipy

    e, layout = config.evaluate, RunLayout(run_dir)
    files = layout.model(name)
    model = dict(config.models())[name]
    table = ScoreTable.read_csv(layout.path(files.scores[0]))
    metrics = MetricsFile.read(layout.path(metrics_rel)) if metrics_rel and labels is not None else None
    reference = MetricsFile.read(layout.path(reference_metrics_rel)) if metrics and reference_metrics_rel else None
    lara_meta = layout.path(files.lara[1])
    lara_info = json.loads(lara_meta.read_text(encoding="utf-8")) if metrics and lara_meta.is_file() else None
    verdict_json = json.loads(layout.path(files.verdict).read_text(encoding="utf-8")) if has_verdict else None
    inputs = {
        "model": name,
        "weights": describe_model(model.source, model.revision, model.base),  # digests of a GGUF file, an adapter
        "scores": files.scores[0],
        "questions": str(config.questions),
        "questions_provenance": provenance_for_report(config.questions),
    }
    report = build_report(
        table,
        labels,
        metrics,
        ReportSettings(baseline=e.baseline, n_bootstrap=e.bootstrap, seed=e.seed, fpr=e.fpr, strict=e.strict),
        ReportContext(
            inputs=inputs,
            verdict=verdict_json,
            texts={q.id: q.question for q in questions},
            groups={q.id: match_group(q.extra) for q in questions},
            reference_metrics=reference,
            lara_info=lara_info,
            self_reference=name == config.reference_name(),
        ),
    )
    write_report(report, layout.path(files.report), table, labels, plots=e.plots)


def section(run_dir: Path, name: str, config: RunConfig) -> str:
    """The model's detection table (or score audit) from its report.md, under a heading."""
    layout = RunLayout(run_dir)
    text = layout.path(layout.model(name).report_md).read_text(encoding="utf-8")
    body = (
        text.split("## Paired comparison")[0]
        .split("## Layer analysis")[0]
        .split("## Plots")[0]
        .split("## Verdict figure")[0]
    )
    body = body.replace("# LaRA Probes report", "").strip()
    role = "audited model" if name == config.name else "control"
    source = dict(config.models())[name].source
    return f"# {name} ({role}: {source})\n\n{body}"


def verdict_line(run_dir: Path, name: str, config: RunConfig) -> str:
    """The model's verdict as text (``lara run`` prints them first)."""
    from ..report.verdict_text import describe_verdict

    role = "audited model" if name == config.name else "control"
    return describe_verdict(_read_verdict(run_dir, name), f"Verdict on {name} ({role})")


def verdict_decided(run_dir: Path, name: str) -> bool:
    """Whether the model's verdict decided (False: no verdict)."""
    from ..report.verdict_text import decided

    return decided(_read_verdict(run_dir, name))


def _read_verdict(run_dir: Path, name: str) -> dict[str, Any]:
    layout = RunLayout(run_dir)
    return json.loads(layout.path(layout.model(name).verdict).read_text(encoding="utf-8"))
