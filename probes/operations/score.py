"""The LaRA score as an operation (``lara score``, the run's score stage): one contamination score
per question of a metrics file against a clean reference (SPEC §4), written atomically with its
meta (the settings, the reference's size and source, the NaN counts)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

from ..errors import ConfigError
from ..lara.metrics_file import MetricsFile
from ..lara.protocol import ScoreOptions
from ..lara.scoring import ScoringResult, score_metrics
from ..scores import meta_path


@dataclass(frozen=True)
class ScoreSettings:
    """``lara score``: the clean reference and the aggregation (SPEC §4)."""

    clean_ref: str | None = None
    metric_set: tuple[str, ...] = ("zRSM", "DC", "zRSI")
    layers: str = "all"
    dc: Literal["abs", "signed"] = "abs"
    outer_abs: bool = False
    zero_scale: Literal["eps", "drop"] = "eps"
    eps: float = 1e-8
    folds: int = 5
    seed: int = 0
    variants: bool = True

    def __post_init__(self) -> None:
        self.options()  # the aggregation's values checked when the config is read, not at the score stage

    def options(self) -> Any:
        """The aggregation as the library takes it (``probes.lara.protocol.ScoreOptions``)."""

        try:
            return ScoreOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(ScoreOptions)})
        except ConfigError as err:
            raise ConfigError(f"score: {err}") from None


def write_scores(
    metrics: str | Path,
    settings: ScoreSettings,
    output: str | Path,
    labels: Mapping[str, int | None] | None = None,
    save_reference: str | Path | None = None,
) -> ScoringResult:
    """Score every question of the metrics file ``metrics``; write the table to ``output``, its meta
    beside it (``.meta.json``) and, with ``save_reference``, the reference fitted on the whole clean
    pool. ``labels`` override the metrics file's (the cross-fitted reference's non-members)."""
    result = score_metrics(
        MetricsFile.read(metrics),
        settings.clean_ref,
        settings.options(),
        labels=labels,
        n_folds=settings.folds,
        seed=settings.seed,
        variants=settings.variants,
    )
    result.table.write_csv(output)
    result.write_info(meta_path(output))
    if save_reference is not None:
        result.reference.save(save_reference)
    return result
