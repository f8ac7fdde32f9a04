"""Fusion as an operation (``lara fuse``, the run's fuse stage): score tables joined, the reference
model's differences (``<det>@ref``, SPEC §8.7) and the fused columns added, written with their meta."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lara_core.files import write_text_atomically

from ..detectors import REGISTRY
from ..fusion import FusionSpec, fuse
from ..scores import AGAINST_REFERENCE, ScoreTable, derived_column, join_tables, split_column
from ..scores import meta_path as scores_meta_path

logger = logging.getLogger(__name__)


@dataclass
class Fused:
    """A fusion's outputs: the table with its new columns, the meta of each fused column, and each
    one described in a line (how, and the zero-scale rule's fallbacks where it was needed)."""

    table: ScoreTable
    meta: dict[str, Any]
    described: dict[str, str]


def fused_table(
    tables: Sequence[ScoreTable],
    specs: Sequence[FusionSpec],
    labels: Mapping[str, int | None] | None = None,
    splits: Mapping[str, str | None] | None = None,
    reference: ScoreTable | None = None,
) -> Fused:
    """``tables`` joined (on the first one's ids), the ``<det>@ref`` columns against ``reference``
    when given, and one column per fusion ``specs``; with each fusion's record (method, detectors,
    how its reference was drawn and what it left out)."""
    table = join_tables(list(tables))
    if reference is not None:
        for column, values in reference_differences(table, reference).items():
            table.add(column, values)
    meta: dict[str, Any] = {}
    described: dict[str, str] = {}
    for spec in specs:
        weights = np.array(spec.weights) if spec.weights else None
        fused = fuse(
            table,
            list(spec.detectors),
            spec.method,
            weights,
            labels,
            dict(splits or {}),
            spec.clean_ref,
            spec.folds,
            spec.seed,
        )
        table.add(spec.column(), fused.values)
        meta[spec.column()] = {"method": spec.method, "detectors": list(spec.detectors), **fused.to_dict()}
        described[spec.column()] = fused.describe()
        logger.info("fusion %s: %s", spec.column(), described[spec.column()])
    return Fused(table, meta, described)


def write_fused(
    table: ScoreTable, meta: Mapping[str, Any], output: str | Path, meta_path: str | Path | None = None
) -> Path:
    """The table (CSV, atomically) and its meta (``{"fusion": …}``, atomically, written last:
    ``OUTPUT.meta.json`` unless ``meta_path``); returns the meta's path."""
    output = Path(output)
    table.write_csv(output)
    meta_file = Path(meta_path) if meta_path is not None else scores_meta_path(output)
    write_text_atomically(meta_file, json.dumps({"fusion": dict(meta)}, indent=1) + "\n")
    return meta_file


def reference_differences(table: ScoreTable, reference: ScoreTable) -> dict[str, np.ndarray]:
    """``<det>@ref`` = s_audited(q) − s_reference(q) of every detector column both tables hold (SPEC §8.7),
    but for the detectors that already compare with the reference (``ref``, ``policy_drift``, ``reward_gain``)."""
    row = {qid: i for i, qid in enumerate(reference.ids)}
    out = {}
    for column, values in table.columns.items():
        if (
            column in reference.columns
            and split_column(column)[1] is None
            and column in REGISTRY
            and not REGISTRY[column].requires_reference
        ):
            theirs = np.array([reference.columns[column][row[i]] if i in row else np.nan for i in table.ids])
            out[derived_column(column, AGAINST_REFERENCE)] = values - theirs
    return out
