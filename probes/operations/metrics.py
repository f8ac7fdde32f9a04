"""The LaRA metrics as an operation (``lara metrics``, the run's metrics stage): zRSM, DC and zRSI
per question and layer (SPEC §3) from a sets file and its activations, written atomically to one
HDF5 file that carries its own provenance."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cache.outputs import check_writable

from ..lara.metrics_file import DEFAULT_CHUNK_MIB, MetricsSummary, compute_metrics


@dataclass(frozen=True)
class MetricsSettings:
    """``lara metrics``: layers used (None = every stored one), ε, paraphrases a member needs."""

    layers: tuple[str, ...] | None = None
    eps: float = 1e-8
    min_paraphrases: int = 2


def write_metrics(
    sets: str | Path,
    activations: str | Path,
    output: str | Path,
    settings: MetricsSettings,
    chunk_mib: float = DEFAULT_CHUNK_MIB,
    progress: bool = False,
) -> MetricsSummary:
    """Compute the metrics of every set of ``sets`` from ``activations`` into ``output`` (refused
    before any work when ``output`` cannot be written)."""
    check_writable(output, "metrics file")
    return compute_metrics(
        sets,
        activations,
        output,
        layers=list(settings.layers) if settings.layers else None,
        eps=settings.eps,
        min_paraphrases=settings.min_paraphrases,
        chunk_mib=chunk_mib,
        progress=progress,
    )
