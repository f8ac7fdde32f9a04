"""The evaluation as an operation (``lara evaluate``, the run's evaluate stage): the score table,
its labels and (optionally) the LaRA metrics, the reference model's metrics and the verdict read;
ROC-AUC, TPR@FPR, F1 with their intervals, the layer analysis and the blind baseline computed
(:mod:`probes.report`); ``report.json``, ``report.md`` and the plots written atomically."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import InputError
from ..lara.drift import store_drift_map
from ..lara.metrics_file import MetricsFile
from ..scores import ScoreTable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluateSettings:
    """``lara evaluate``."""

    bootstrap: int = 1000
    seed: int = 0
    fpr: float = 0.05
    strict: bool = False
    plots: bool = True
    baseline: str | None = None


@dataclass
class EvaluateInputs:
    """What an evaluation reads.

    Attributes:
        scores: the score table (id column, one column per method, higher = member).
        labels: question id → 1 / 0 / None; without them (and none in ``metrics``) the report is an
            audit of the score distributions.
        metrics: the audited model's LaRA metrics file: the layer analysis (labelled reports).
        reference_metrics: the reference model's, the layer map's placebo (with ``metrics``).
        lara_meta: the LaRA score's meta (``lara.meta.json``): the control-set size, read with
            ``metrics`` when it exists and is one.
        verdict: the verdict's JSON, which leads the report.
        texts / groups: question id → text / matched group: the blind baseline and its null.
        provenance: recorded as is in the report's ``inputs``.
        self_reference: the audited model is the reference model.
        activations / reference_activations: the two models' activation stores of the same texts:
            the representation-drift map beside LaRA's (SPEC §10; with labels and ``texts``).
    """

    scores: Path
    labels: Mapping[str, int | None] | None = None
    metrics: Path | None = None
    reference_metrics: Path | None = None
    lara_meta: Path | None = None
    verdict: Path | None = None
    texts: Mapping[str, str] | None = None
    groups: Mapping[str, str | None] | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    self_reference: bool = False
    activations: Path | None = None
    reference_activations: Path | None = None


def write_evaluation(
    inputs: EvaluateInputs, settings: EvaluateSettings, output: str | Path, detectors: Sequence[str] | None = None
) -> tuple[dict[str, Any], list[Path]]:
    """Evaluate ``detectors`` (None: every column) into the directory ``output``; returns the report
    and the files written. Raises :class:`InputError` for a column that is not in the table."""
    from ..report import ReportContext, ReportSettings, build_report, write_report  # lazy: pulls scipy

    if inputs.reference_metrics is not None and inputs.metrics is None:
        raise InputError("the reference model's metrics need the audited model's metrics file")
    if (inputs.activations is None) != (inputs.reference_activations is None):
        raise InputError("the drift map needs both activation stores: the audited model's and the reference's")
    table = ScoreTable.read_csv(inputs.scores)
    metrics = MetricsFile.read(inputs.metrics) if inputs.metrics is not None else None
    labels = inputs.labels
    if labels is None and metrics is not None and (metrics.labels >= 0).any():
        labels = {i: int(v) for i, v in zip(metrics.ids, metrics.labels) if v >= 0}
        logger.info("labels: taken from %s", inputs.metrics)
    if labels is None:
        metrics = None  # the layer analysis needs labels
    context = ReportContext(
        inputs=dict(inputs.provenance),
        verdict=json.loads(inputs.verdict.read_text(encoding="utf-8")) if inputs.verdict is not None else None,
        texts=inputs.texts,
        groups=inputs.groups,
        reference_metrics=(
            MetricsFile.read(inputs.reference_metrics)
            if metrics is not None and inputs.reference_metrics is not None
            else None
        ),
        lara_info=_lara_info(inputs.lara_meta) if metrics is not None else None,
        self_reference=inputs.self_reference,
        drift=_drift(inputs, labels, settings.seed),
    )
    report_settings = ReportSettings(
        detectors,
        settings.baseline,
        settings.bootstrap,
        settings.seed,
        fpr=settings.fpr,
        strict=settings.strict,
    )
    try:
        report = build_report(table, labels, metrics, report_settings, context)
    except KeyError as err:
        raise InputError(str(err).strip("'\"")) from None
    return report, write_report(report, output, table, labels, plots=settings.plots)


def _lara_info(meta: Path | None) -> dict[str, Any] | None:
    """The LaRA scoring's meta (``lara score`` writes it beside its table), if ``meta`` is one."""
    try:
        info = json.loads(meta.read_text(encoding="utf-8")) if meta is not None and meta.is_file() else None
    except json.JSONDecodeError:
        return None
    return info if isinstance(info, dict) and "n_reference" in info else None


def _drift(inputs: EvaluateInputs, labels: Mapping[str, int | None] | None, seed: int) -> dict[str, Any] | None:
    """The drift map of the labelled questions between the two activation stores (None without them)."""
    if inputs.activations is None or inputs.reference_activations is None or labels is None:
        return None
    if not inputs.texts:
        raise InputError("the drift map needs the questions' texts (--labels with a question file)")
    from cache.store import ActivationStore  # lazy: pulls h5py

    stores = []
    for path in (inputs.activations, inputs.reference_activations):
        if not Path(path).is_file():
            raise InputError(f"no activation store at {path}: give the acts.h5 a `lara cache` (or `lara run`) wrote")
        stores.append(ActivationStore(path))
    try:
        return store_drift_map(stores[0], stores[1], inputs.texts, labels, inputs.groups, seed=seed)
    except ValueError as err:
        raise InputError(str(err)) from None
