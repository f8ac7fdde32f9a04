"""LaRA: layer-wise representation metrics of perturbation sets and their detection protocol.

>>> from probes import lara
>>> m = lara.metrics(u, w, phi)            # [3, L] rows zRSM, DC, zRSI; u, w [K+1, L, d], phi [K+1, M, L, d]
>>> s = lara.score(metrics, reference)     # [N] S_LaRA; metrics [N, 3, L], reference [C, 3, L] (clean)
"""

from __future__ import annotations

from .geometry import METRIC_NAMES, BatchMetrics, batch_metrics, metrics
from .layers import WINDOWS, select_layers, window_bounds
from .metrics_file import MetricsFile, compute_metrics
from .protocol import (
    PoolScoring,
    Reference,
    ScoreOptions,
    aggregate,
    align,
    compress,
    score,
    score_against_pool,
)

__all__ = [
    "METRIC_NAMES",
    "WINDOWS",
    "BatchMetrics",
    "MetricsFile",
    "PoolScoring",
    "Reference",
    "ScoreOptions",
    "aggregate",
    "align",
    "batch_metrics",
    "compress",
    "compute_metrics",
    "metrics",
    "score",
    "score_against_pool",
    "select_layers",
    "window_bounds",
]
