"""``lara score``: a metrics file and a clean reference in, a score table out.

Where the clean reference comes from (``clean_ref``):

* ``"split"`` — the questions of the metrics file whose ``split`` is ``clean_ref``;
* ``"crossfit"`` — the labelled non-members (label 0), k-fold cross-fitted (SPEC §4.2);
* a metrics file (``.h5``) of separate clean questions, measured on the same model;
* a saved reference (``.json``, from ``--save-reference``);
* ``None`` (auto) — ``split`` when such questions exist, else ``crossfit`` when labels exist.

A question that is part of the reference is scored with a reference that leaves its fold out
(or, for a saved reference, which cannot be refitted, is left unscored: NaN with a warning).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from lara_core.files import write_text_atomically

from ..errors import ConfigError, InputError, MismatchError
from ..scores import CLEAN_SPLIT, ScoreTable
from .layers import available_windows
from .metrics_file import MetricsFile, check_same_model
from .protocol import PoolScoring, Reference, ScoreOptions, against_reference, reference_provenance, score_against_pool

logger = logging.getLogger(__name__)

MAIN_COLUMN = "lara"


@dataclass
class ScoringResult:
    """A score table plus what is needed to reproduce and judge it.

    Attributes:
        table: ``lara`` (and variant) columns, one row per question of the metrics file.
        reference: the reference fitted on the whole clean pool (what ``--save-reference`` writes).
        info: mode, reference size, folds, zero-scale cells, options, NaN counts, provenance.
    """

    table: ScoreTable
    reference: Reference
    info: dict[str, Any] = field(default_factory=dict)

    def write_info(self, path: str | Path) -> None:
        write_text_atomically(path, json.dumps(self.info, indent=1, default=str) + "\n")


def score_metrics(
    metrics: MetricsFile,
    clean_ref: str | Path | None = None,
    options: ScoreOptions = ScoreOptions(),
    labels: Mapping[str, int | None] | None = None,
    n_folds: int = 5,
    seed: int = 0,
    variants: bool = True,
) -> ScoringResult:
    """Score every question of ``metrics`` (see the module docstring for ``clean_ref``).

    Args:
        metrics: the questions to score.
        clean_ref: reference source; see the module docstring.
        options: aggregation options (metric set, layers, DC mode, …).
        labels: ``{id: label}`` overriding the labels stored in the metrics file (crossfit mode).
        n_folds: folds of the cross-fitting.
        seed: seed of the fold assignment.
        variants: also write per-metric (``lara_zrsm``…) and per-window (``lara_early``…) columns.
    """
    if n_folds < 2:
        raise ConfigError(f"cross-fitting needs at least 2 folds, got {n_folds}")
    mode = _mode(metrics, clean_ref, labels)
    n_blocks = metrics.n_blocks
    options.layer_index(metrics.layer_labels, n_blocks)  # validate the selection before any work
    info: dict[str, Any] = {"clean_ref_mode": mode, "options": asdict(options), "n_folds": n_folds, "seed": seed}
    if mode == "saved":
        reference = Reference.load(clean_ref)  # type: ignore[arg-type]
        scoring = _against_saved(metrics, reference, options, Path(clean_ref))  # type: ignore[arg-type]
        info["reference_file"] = str(clean_ref)
    else:
        pool_metrics, pool_keys, source = _pool(metrics, mode, clean_ref, labels)
        provenance = reference_provenance(
            mode=mode,
            source=source,
            weights_fingerprint=metrics.weights_fingerprint,
            metrics_file=str(metrics.path) if metrics.path else None,
        )
        scoring = score_against_pool(
            metrics.metrics,
            metrics.question_hashes,
            pool_metrics,
            pool_keys,
            options,
            n_folds=n_folds,
            seed=seed,
            layer_labels=metrics.layer_labels,
            provenance=provenance,
        )
        reference = scoring.reference
        info["reference_source"] = source
    table = ScoreTable(list(metrics.ids))
    table.add(MAIN_COLUMN, scoring.scores(options, metrics.layer_labels, n_blocks))
    if variants:
        for name, variant in _variants(options, metrics.layer_labels, n_blocks).items():
            table.add(name, scoring.scores(variant, metrics.layer_labels, n_blocks))
    zero = reference.zero_scale_cells(options.eps)
    _warn_zero_scale(zero, options)
    nan = ~np.isfinite(table.columns[MAIN_COLUMN])
    info.update(
        {
            "n_questions": len(metrics),
            "n_reference": reference.n,
            "n_cross_fitted": int((scoring.folds >= 0).sum()),
            "folds_used": scoring.n_folds,
            "zero_scale_cells": zero,
            "n_nan": int(nan.sum()),
            "nan_reasons": _reason_counts(metrics, nan),
            "columns": list(table.columns),
            "metrics_file": str(metrics.path) if metrics.path else None,
            "weights_fingerprint": metrics.weights_fingerprint,
            "sets_sha256": (metrics.provenance.get("sets") or {}).get("sha256"),
        }
    )
    return ScoringResult(table=table, reference=reference, info=info)


def _warn_zero_scale(zero: list[str], options: ScoreOptions) -> None:
    """Say which (metric, layer) cells have a clean-reference scale of 0, and what happens to them."""
    if zero:
        logger.warning(
            "%d (metric, layer) cell(s) have a clean-reference scale of 0 (MAD = 0), e.g. %s; they are divided by "
            "eps=%g%s",
            len(zero),
            ", ".join(zero[:4]),
            options.eps,
            " and left out (zero_scale=drop)"
            if options.zero_scale == "drop"
            else "; use --zero-scale drop to leave them out",
        )


def _mode(metrics: MetricsFile, clean_ref: str | Path | None, labels: Mapping[str, int | None] | None) -> str:
    if clean_ref is None:
        if CLEAN_SPLIT in metrics.splits:
            logger.info(
                "clean reference: the %d questions with split '%s'", metrics.splits.count(CLEAN_SPLIT), CLEAN_SPLIT
            )
            return "split"
        if _non_member_mask(metrics, labels).any():
            logger.info("clean reference: the labelled non-members, cross-fitted")
            return "crossfit"
        raise InputError(
            'no clean reference: mark known-clean questions with "split": "clean_ref" in the questions file, '
            "give --clean-ref FILE (metrics of clean questions, or a saved reference .json), "
            "or give --labels for cross-fitting over the non-members"
        )
    text = str(clean_ref)
    if text in ("split", "crossfit"):
        return text
    path = Path(text)
    if not path.is_file():
        raise InputError(f"--clean-ref {text}: not 'split', 'crossfit' or an existing file")
    return "saved" if path.suffix.lower() == ".json" else "file"


def _non_member_mask(metrics: MetricsFile, labels: Mapping[str, int | None] | None) -> np.ndarray:
    if labels is not None:
        return np.array([labels.get(i) == 0 for i in metrics.ids])
    return metrics.labels == 0


def _pool(metrics: MetricsFile, mode: str, clean_ref: Any, labels: Mapping[str, int | None] | None):
    """Clean pool metrics [C, 3, L], their question hashes and a description."""
    if mode == "split":
        mask = np.array([s == CLEAN_SPLIT for s in metrics.splits])
        if not mask.any():
            raise InputError(
                f"no question of {metrics.path} has split '{CLEAN_SPLIT}'; mark clean questions or use another --clean-ref"
            )
        members = mask & (metrics.labels == 1)
        if members.any():
            raise InputError(
                f"{int(members.sum())} question(s) with split '{CLEAN_SPLIT}' are labelled members (label 1); a clean reference must be clean"
            )
        return (
            metrics.metrics[mask],
            [h for h, m in zip(metrics.question_hashes, mask) if m],
            f"split {CLEAN_SPLIT} ({int(mask.sum())} questions)",
        )
    if mode == "crossfit":
        mask = _non_member_mask(metrics, labels)
        if not mask.any():
            raise InputError("cross-fitting needs labelled non-members (label 0); none found")
        return (
            metrics.metrics[mask],
            [h for h, m in zip(metrics.question_hashes, mask) if m],
            f"non-members, cross-fitted ({int(mask.sum())} questions)",
        )
    other = MetricsFile.read(clean_ref)
    check_same_model(metrics, other)
    return other.metrics, list(other.question_hashes), f"{clean_ref} ({len(other)} questions)"


def _against_saved(metrics: MetricsFile, reference: Reference, options: ScoreOptions, path: Path) -> PoolScoring:
    if reference.layer_labels != metrics.layer_labels:
        raise MismatchError(
            f"{path} was fitted on layers {', '.join(reference.layer_labels)}; {metrics.path} holds {', '.join(metrics.layer_labels)}"
        )
    fitted_on = reference.provenance.get("weights_fingerprint")
    if fitted_on and metrics.weights_fingerprint and fitted_on != metrics.weights_fingerprint:
        raise MismatchError(
            f"{path} was fitted on another model's activations (weights {fitted_on[:12]}…, these metrics "
            f"{metrics.weights_fingerprint[:12]}…); fit a reference on the audited model"
        )
    scoring = against_reference(metrics.metrics, reference, options)
    fitted = set(reference.question_hashes)
    inside = np.array([h in fitted for h in metrics.question_hashes])
    if inside.any():
        logger.warning(
            "%d question(s) are part of the saved reference %s and are left unscored (NaN): a sample is never "
            "scored by a reference that contains it; score them with --clean-ref split/crossfit/FILE.h5 to cross-fit",
            int(inside.sum()),
            path,
        )
        scoring.zhat[inside] = np.nan
    return scoring


def _variants(options: ScoreOptions, layer_labels, n_blocks: int | None) -> dict[str, ScoreOptions]:
    """Per-metric columns over the chosen layers and per-window columns over all metrics."""
    out: dict[str, ScoreOptions] = {}
    for metric in options.metric_set:
        out[f"{MAIN_COLUMN}_{metric.lower()}"] = ScoreOptions(**{**asdict(options), "metric_set": (metric,)})
    for window in available_windows(layer_labels, n_blocks):
        out[f"{MAIN_COLUMN}_{window}"] = ScoreOptions(**{**asdict(options), "layers": window})
    return out


def _reason_counts(metrics: MetricsFile, nan: np.ndarray) -> dict[str, int]:
    counts: dict[str, int] = {}
    for reason, is_nan in zip(metrics.reasons, nan):
        if is_nan:
            key = reason.split(":")[0] if reason else "in_saved_reference"
            counts[key] = counts.get(key, 0) + 1
    return counts
