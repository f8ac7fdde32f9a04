"""``lara run``'s stages that read every model's scores — fusion, the verdict, the report — each
stage's ledger key beside its body, both ``(run: RunState, model) → …``, and the summary lines
``lara run`` prints; each body calls the operation it shares with its command
(:mod:`probes.operations`). The stages that need the model itself are in :mod:`.stages`, the table
that drives both in :mod:`.stage_table`."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from cache.sources import describe_model
from generation.records import read_sets

from ..operations.accuracy import read_accuracy
from ..operations.evaluate import EvaluateInputs, write_evaluation
from ..operations.fuse import fused_table, write_fused
from ..questions.question_files import provenance_for_report
from ..questions.reading import match_group
from ..report.markdown import render_summary
from ..report.verdict_text import decided, describe_verdict
from ..scorefiles import ScoredFiles, read_scored
from ..scores import CLEAN_SPLIT, ScoreTable, join_tables
from .config import RunConfig
from .layout import RunLayout
from .run_state import RunState

logger = logging.getLogger(__name__)


def score_tables(run: RunState, model: str) -> list[str]:
    """The model's LaRA and detector score tables this run has, in that order."""
    files = run.layout.model(model)
    return [t for t in (files.lara[0], files.detector_scores) if t in run.digests]


def _other_reference(run: RunState, model: str) -> str | None:
    """The reference model's name when ``model`` is another model (None: no reference, or it is the reference)."""
    return run.reference if run.reference and model != run.reference else None


def _reference_table(run: RunState, model: str) -> str | None:
    """The reference model's detector scores, which the audited model's are compared with."""
    reference = _other_reference(run, model)
    return run.layout.model(reference).detector_scores if reference and run.config.detect.names else None


def fuse_key(run: RunState, model: str) -> dict[str, Any]:
    """The fuse stage's key: the score tables, the questions, the fusions, the reference's table."""
    reference = _reference_table(run, model)
    return {
        "tables": {t: run.digests[t] for t in score_tables(run, model)},
        "questions": run.q_digest,
        "fusion": [dataclasses.asdict(f) for f in run.config.fusion],
        "reference": run.digests.get(reference) if reference else None,
    }


def fuse(run: RunState, model: str) -> None:
    """All score columns of the model joined, its ``<det>@ref`` columns (the reference model's
    detector scores subtracted, SPEC §8.7), and the fused columns (:mod:`probes.operations.fuse`)."""
    reference = _reference_table(run, model)
    fused = fused_table(
        [ScoreTable.read_csv(run.layout.path(t)) for t in score_tables(run, model)],
        run.config.fusion,
        run.labels,
        run.splits,
        ScoreTable.read_csv(run.layout.path(reference)) if reference is not None else None,
    )
    scores, scores_meta = run.layout.model(model).scores
    write_fused(fused.table, fused.meta, run.layout.path(scores), run.layout.path(scores_meta))


def judged(run: RunState, model: str) -> bool:
    """Whether the model gets a verdict: controls are scored, or LaRA has clean questions."""
    return run.config.calibrating or (run.config.lara and CLEAN_SPLIT in run.splits.values())


def _verdict_reference(run: RunState, model: str) -> str | None:
    return _other_reference(run, model) if run.config.calibrating else None


def verdict_key(run: RunState, model: str) -> dict[str, Any]:
    """The verdict stage's key: the model's tables, the questions, the verdict settings, the reference's tables."""
    reference = _verdict_reference(run, model)
    key = {
        "tables": run.model_tables(model),
        "questions": run.q_digest,
        "verdict": dataclasses.asdict(run.config.verdict),
        "reference": run.model_tables(reference) if reference else None,
    }
    accuracy = {f: run.digests[f] for f in _accuracy_files(run, model) if f in run.digests}
    if accuracy:  # a run without the accuracy stage keeps its key
        key["accuracy"] = accuracy
    return key


def _accuracy_files(run: RunState, model: str) -> list[str]:
    """The model's accuracy file and its reference model's (where that is another model)."""
    reference = _other_reference(run, model)
    return [run.layout.model(m).accuracy for m in (model, reference) if m is not None]


def _read_accuracies(run: RunState, model: str) -> tuple[Any, Any]:
    """The model's and its reference model's judged answers (None where this run has none; the
    reference's only beside the model's)."""

    files = [f if f in run.digests else None for f in _accuracy_files(run, model)] + [None]
    if files[0] is None:
        return None, None
    return read_accuracy(run.layout.path(files[0])), read_accuracy(run.layout.path(files[1])) if files[1] else None


def verdict(run: RunState, model: str) -> None:
    """``RUN/<model>/verdict.json``: the label-free verdict (SPEC §8) on the model's detector scores
    and controls (and LaRA's scores), against the reference model's when there is one; and
    ``RUN/<model>/questions.csv``, its per-question decisions (SPEC §8.10)."""
    from ..operations.verdict import VerdictInputs, write_verdict  # lazy: pulls scipy

    config, layout = run.config, run.layout
    files = layout.model(model)
    reference = _verdict_reference(run, model)

    def scored(name: str) -> ScoredFiles:
        # the controls are read only when this run scored them, and only those its detect stage bound
        return read_scored(layout.path(layout.model(name).detector_scores), use_controls=config.calibrating)

    lara = [ScoreTable.read_csv(layout.path(files.lara[0]))] if files.lara[0] in run.digests else []
    if config.detect.names:
        audited = scored(model)
        audited.scores = join_tables([audited.scores, *lara])
    else:
        audited = ScoredFiles(join_tables(lara), None)
    c = config.calibration
    inputs = VerdictInputs(
        audited,
        reference=scored(reference) if reference else None,
        labels=run.labels or {},
        splits=run.splits,
        verdict_controls=c.controls if c.most > c.controls else None,
        self_reference=model == config.reference_name(),
        sets=read_sets(layout.sets) if config.detect.names else None,
        detectors={d.name: d for d in run.detector_objects()},
    )
    inputs.accuracy, inputs.reference_accuracy = _read_accuracies(run, model)
    result = write_verdict(inputs, config.verdict, layout.path(files.verdict), layout.path(files.questions))
    logger.info("%s", describe_verdict(result, f"verdict on {model}"))


def _placebo(run: RunState, model: str) -> str | None:
    """The reference model's LaRA metrics, the audited model's layer map's placebo."""
    reference = _other_reference(run, model)
    return run.layout.model(reference).metrics if reference and run.config.lara else None


def _metrics_of(run: RunState, model: str) -> str | None:
    return run.layout.model(model).metrics if run.config.lara else None


def _drift_stores(run: RunState, model: str) -> tuple[str, str] | None:
    """The two activation stores of the drift map (SPEC §10): the model's and the reference's, when
    the run has LaRA, labels and a reference other than the model."""
    reference = _other_reference(run, model)
    if not (reference and run.config.lara and run.labels is not None):
        return None
    return run.layout.model(model).acts, run.layout.model(reference).acts


def evaluate_key(run: RunState, model: str) -> dict[str, Any]:
    """The evaluate stage's key: the scores, the questions, the metrics (the audited model's and the
    reference model's, the layer map's placebo), the two activation stores of the drift map, the
    verdict, the settings."""
    files, placebo, metrics = run.layout.model(model), _placebo(run, model), _metrics_of(run, model)
    stores = _drift_stores(run, model)
    key = {
        "scores": run.digests[files.scores[0]],
        "questions": run.q_digest,
        "metrics": run.digests[metrics] if metrics else None,
        "verdict": run.digests[files.verdict] if judged(run, model) else None,
        "reference_metrics": run.digests[placebo] if placebo else None,
        "evaluate": dataclasses.asdict(run.config.evaluate),
    }
    if stores:  # only then: a run without a drift map keeps its key
        here = all(run.layout.path(s).is_file() for s in stores)  # left behind: the map waits for them
        key["drift_stores"] = [run.digests[s] for s in stores] if here else "absent"
    return key


def evaluate(run: RunState, model: str) -> None:
    """``RUN/<model>/report/``: the model's report (:mod:`probes.operations.evaluate`)."""
    config, layout = run.config, run.layout
    files, metrics, placebo = layout.model(model), _metrics_of(run, model), _placebo(run, model)
    source = dict(config.models())[model]
    stores = _drift_stores(run, model)
    if stores and not all(layout.path(s).is_file() for s in stores):
        logger.warning("%s: an activation store was left behind (a moved run directory): no drift map", model)
        stores = None
    inputs = EvaluateInputs(
        scores=layout.path(files.scores[0]),
        labels=run.labels,
        metrics=layout.path(metrics) if metrics and run.labels is not None else None,
        reference_metrics=layout.path(placebo) if metrics and placebo else None,
        lara_meta=layout.path(files.lara[1]),
        verdict=layout.path(files.verdict) if judged(run, model) else None,
        texts={q.id: q.question for q in run.questions},
        groups={q.id: match_group(q.extra) for q in run.questions},
        provenance={
            "model": model,
            "weights": describe_model(source.source, source.revision, source.base),  # a GGUF file's, an adapter's
            "scores": files.scores[0],
            "questions": str(config.questions),
            "questions_provenance": provenance_for_report(config.questions),
        },
        self_reference=model == config.reference_name(),
        activations=layout.path(stores[0]) if stores else None,
        reference_activations=layout.path(stores[1]) if stores else None,
    )
    write_evaluation(inputs, config.evaluate, layout.path(files.report))


def section(run_dir: Path, name: str, config: RunConfig) -> str:
    """The head of the model's report — its verdict, the questions it names and its detection table
    (or score audit) — rendered from the report's data (``report.json``), under a heading."""
    layout = RunLayout(run_dir)
    report = json.loads(layout.path(layout.model(name).report_json).read_text(encoding="utf-8"))
    body = render_summary(report)
    role = "audited model" if name == config.name else "control"
    source = dict(config.models())[name].source
    return f"# {name} ({role}: {source})\n\n{body}"


def verdict_line(run_dir: Path, name: str, config: RunConfig) -> str:
    """The model's verdict as text (``lara run`` prints them first)."""

    role = "audited model" if name == config.name else "control"
    return describe_verdict(_read_verdict(run_dir, name), f"Verdict on {name} ({role})")


def verdict_decided(run_dir: Path, name: str) -> bool:
    """Whether the model's verdict decided (False: no verdict)."""

    return decided(_read_verdict(run_dir, name))


def _read_verdict(run_dir: Path, name: str) -> dict[str, Any]:
    layout = RunLayout(run_dir)
    return json.loads(layout.path(layout.model(name).verdict).read_text(encoding="utf-8"))
