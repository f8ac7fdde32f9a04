"""The report as data: every figure with its CI and n (what ``report.json`` holds)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import numpy as np

from lara_core.version import __version__

from ..detectors import REGISTRY
from ..evaluation import compare, evaluate, tpr_key
from ..lara.metrics_file import MetricsFile
from ..scores import ScoreTable, align_labels
from ..verdicts.blind import blind_baseline
from .layers import layer_analysis

logger = logging.getLogger(__name__)

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)


@dataclass(frozen=True)
class ReportSettings:
    """How a report computes its figures (``lara evaluate``'s options, the run's ``evaluate``).

    Attributes:
        detectors: the score columns evaluated, in order (None: every one).
        baseline: the paired comparisons' baseline column (None: the first).
        n_bootstrap / seed / ci: the stratified bootstrap of every interval.
        fpr: the false-positive rate of TPR@FPR.
        strict: refuse a column with non-finite scores instead of ranking ±inf and leaving NaN out.
    """

    detectors: Sequence[str] | None = None
    baseline: str | None = None
    n_bootstrap: int = 1000
    seed: int = 0
    ci: float = 0.95
    fpr: float = 0.05
    strict: bool = False


@dataclass(frozen=True)
class ReportContext:
    """What a report reads beside the scores, labels and metrics (every part optional).

    Attributes:
        inputs: provenance recorded as is (model, weights, files).
        verdict: the label-free verdict (SPEC §8), which leads the report.
        texts: question id → text: the blind text-only baseline of SPEC §8.8 (labelled reports).
        groups: question id → matched group: the blind baseline's null swaps labels within them
            (default: clusters of near-identical texts); they also constrain the layer map's
            permutation null.
        reference_metrics: the reference checkpoint's metrics: its placebo map and the
            depth-profile contrast.
        lara_info: the LaRA scoring's meta (the control-set size, SPEC §4.5 item 5).
        self_reference: the audited model is the reference model (the detectors that compare with
            one are constant by construction).
        drift: the representation-drift map against the reference (:func:`probes.lara.drift.store_drift_map`),
            shown beside LaRA's layer map.
    """

    inputs: Mapping[str, Any] | None = None
    verdict: Mapping[str, Any] | None = None
    texts: Mapping[str, str] | None = None
    groups: Mapping[str, str | None] | None = None
    reference_metrics: MetricsFile | None = None
    lara_info: Mapping[str, Any] | None = None
    self_reference: bool = False
    drift: Mapping[str, Any] | None = None


def build_report(
    table: ScoreTable,
    labels: Mapping[str, int | None] | None = None,
    metrics: MetricsFile | None = None,
    settings: ReportSettings = ReportSettings(),
    context: ReportContext = ReportContext(),
) -> dict[str, Any]:
    """Evaluate every detector column of ``table`` against ``labels`` (or, without labels, describe
    the score distributions only: an audit), plus the layer analysis when ``metrics`` is given, the
    verdict first and the blind baseline where ``context`` gives them. A column constant by
    construction gets no figure, only ``{"not_applicable": reason, "why", "n", "n_nonfinite"}``:
    with ``context.self_reference`` every detector that compares with a reference
    (``requires_reference``), and any column whose finite scores are all equal."""
    names = list(settings.detectors) if settings.detectors else list(table.columns)
    missing = [n for n in names if n not in table.columns]
    if missing:
        raise KeyError(f"no score column {', '.join(missing)}; columns: {', '.join(table.columns)}")
    report: dict[str, Any] = {
        "kind": "lara-report",
        "toolkit_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs": dict(context.inputs or {}),
        "settings": {
            "n_bootstrap": settings.n_bootstrap,
            "seed": settings.seed,
            "ci": settings.ci,
            "fpr": settings.fpr,
            "strict": settings.strict,
            "tpr_key": tpr_key(settings.fpr),
            "bootstrap": "stratified, percentile intervals",
        },
        "detectors_order": names,
        "distributions": {n: _distribution(table.columns[n]) for n in names},
    }
    verdict, texts = context.verdict, context.texts
    if verdict is not None:
        report["verdict"] = dict(verdict)
        flagged = (verdict.get("questions") or {}).get("flagged") or []
        if texts and flagged:
            report["texts"] = {i: texts[i] for i in flagged if i in texts}  # the flagged questions' texts
    if labels is None:
        report["mode"] = "audit"
        report["counts"] = {"n_scored": len(table.ids)}
        return report
    report.update(_evaluation(table, labels, names, settings, context.self_reference))
    if metrics is not None:
        report["layers"] = layer_analysis(
            metrics,
            labels,
            n_bootstrap=settings.n_bootstrap,
            seed=settings.seed,
            ci=settings.ci,
            groups=context.groups,
            reference=context.reference_metrics,
            lara_info=context.lara_info,
        )
    if context.drift is not None:
        report["drift"] = dict(context.drift)
    if texts:
        groups = context.groups
        ids = [i for i in table.ids if labels.get(i) is not None and labels[i] >= 0 and i in texts]
        report["blind"] = blind_baseline(
            [texts[i] for i in ids],
            np.array([labels[i] for i in ids]),
            seed=settings.seed,
            n_bootstrap=settings.n_bootstrap,
            groups=[groups.get(i) for i in ids] if groups else None,
        )
    return report


def _evaluation(
    table: ScoreTable,
    labels: Mapping[str, int | None],
    names: Sequence[str],
    settings: ReportSettings,
    self_reference: bool,
) -> dict[str, Any]:
    """The labelled part: counts, each column's figures and the paired comparisons."""
    y, unmatched = align_labels(table.ids, labels)
    known = y >= 0
    counts = {
        "n_scored": len(table.ids),
        "n_labelled": int(known.sum()),
        "members": int((y == 1).sum()),
        "non_members": int((y == 0).sum()),
        **unmatched,
    }
    yk = y[known].astype(bool)
    opts = {"n_bootstrap": settings.n_bootstrap, "seed": settings.seed, "ci": settings.ci}
    columns = {name: table.columns[name][known] for name in names}
    results = _evaluate_all(yk, columns, self_reference, fpr=settings.fpr, strict=settings.strict, **opts)
    base = settings.baseline or names[0]
    if base not in table.columns:
        raise KeyError(f"baseline {base!r} is not a score column; columns: {', '.join(table.columns)}")
    base_values = table.columns[base][known]
    base_reason = not_applicable(base, base_values, self_reference)
    comparisons = _comparisons(yk, columns, (base, base_values, base_reason), results, **opts)
    return {"mode": "evaluation", "counts": counts, "detectors": results, "comparisons": comparisons}


def not_applicable(name: str, values: np.ndarray, self_reference: bool = False) -> str | None:
    """Why column ``name`` (scores ``values``) is constant by construction, or None: ``"self-reference"``
    when the audited model is the reference of a detector that compares with one, ``"constant: every
    score X"`` when every finite score is X (no threshold separates anything)."""
    if self_reference:
        if name in REGISTRY and REGISTRY[name].requires_reference:
            return "self-reference"
    finite = values[np.isfinite(values)]
    if len(finite) and bool((finite == finite[0]).all()):
        return f"constant: every score {float(finite[0]):g}"
    return None


def _evaluate_all(
    yk: np.ndarray, columns: Mapping[str, np.ndarray], self_reference: bool, **opts: Any
) -> dict[str, Any]:
    """``evaluate`` of every column, an error record where it refuses, ``not_applicable`` where constant."""
    results: dict[str, Any] = {}
    for name, values in columns.items():
        counts = {"n": len(values), "n_nonfinite": int((~np.isfinite(values)).sum())}
        reason = not_applicable(name, values, self_reference)
        if reason is not None:
            why = (
                "the audited model is this detector's reference model: it compares the model with itself"
                if reason == "self-reference"
                else "every finite score is the same: no threshold separates anything"
            )
            results[name] = {"not_applicable": reason, "why": why + " (no AUC, TPR or F1)", **counts}
            logger.info("%s: not applicable (%s)", name, reason)
            continue
        try:
            results[name] = evaluate(yk, values, **opts)
        except ValueError as err:
            results[name] = {"error": str(err), **counts}
            logger.warning("%s: %s", name, err)
    return results


def _comparisons(
    yk: np.ndarray,
    columns: Mapping[str, np.ndarray],
    baseline: tuple[str, np.ndarray, str | None],
    results: Mapping[str, Any],
    **opts: Any,
) -> dict[str, Any]:
    """ΔAUC of every column against the baseline ``(name, scores, not-applicable reason)``; none
    with a column, or against a baseline, that is not applicable."""
    base, base_values, base_reason = baseline
    out: dict[str, Any] = {"baseline": base, "against": {}}
    if base_reason is not None:
        out["not_applicable"] = f"baseline {base}: {base_reason}"
        return out
    for name, values in columns.items():
        if name == base:
            continue
        if "not_applicable" in results[name]:
            out["against"][name] = {"not_applicable": results[name]["not_applicable"]}
            continue
        try:
            out["against"][name] = compare(yk, values, base_values, **opts)
        except ValueError as err:
            out["against"][name] = {"error": str(err)}
    return out


def _distribution(values: np.ndarray) -> dict[str, Any]:
    finite = values[np.isfinite(values)]
    out: dict[str, Any] = {"n": len(values), "n_nonfinite": int(len(values) - len(finite))}
    if len(finite):
        out["mean"] = float(finite.mean())
        out["std"] = float(finite.std(ddof=1)) if len(finite) > 1 else None
        out["quantiles"] = {f"{q:g}": float(v) for q, v in zip(QUANTILES, np.quantile(finite, QUANTILES))}
    return out
