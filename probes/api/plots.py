"""Plots from Python: each takes ``ax=`` (matplotlib Axes to draw on; a new figure otherwise)
and returns the ``Figure``; the report's PNGs are drawn by the same functions."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .audit import _table
from .results import Detection, Verdict


def plot_roc(
    scores: Detection | Any,
    labels: Mapping[str, int | None] | None = None,
    detectors: Sequence[str] | None = None,
    ax: Any = None,
) -> Any:
    """ROC curves of score columns (a :class:`Detection` or a ``pandas.DataFrame`` indexed by id)
    against ``labels`` (default: the questions' own), members positive: with ``ax``, all in that
    panel; without, one panel per family of detectors, as in the report."""
    from ..report.plots import plot_roc as draw  # lazy: pulls h5py, scipy

    table, y, names = _inputs(scores, labels, detectors)
    return draw(table, y, names, ax=ax)


def plot_scores(
    scores: Detection | Any,
    labels: Mapping[str, int | None] | None = None,
    detectors: Sequence[str] | None = None,
    ax: Any = None,
) -> Any:
    """Histograms of each score column, members vs non-members (all questions when unlabelled);
    ``ax``: one Axes per column."""
    from ..report.plots import plot_score_histograms as draw  # lazy: pulls h5py, scipy

    table, y, names = _inputs(scores, labels, detectors)
    return draw(table, y if (y >= 0).any() else None, names, ax=ax, entry="plot_scores")


def plot_verdict(verdict: Verdict, ax: Any = None) -> Any:
    """Each detector's within-AUC with its CI, per mode, for all audited questions and each
    subset (``ax``: one Axes per panel)."""
    from ..report.verdict_plot import plot_verdict as draw  # lazy: pulls h5py, scipy

    return draw(verdict.to_dict(), ax=ax)


def _inputs(
    scores: Any, labels: Mapping[str, int | None] | None, detectors: Sequence[str] | None
) -> tuple[Any, np.ndarray, list[str]]:
    frame = scores.scores if isinstance(scores, Detection) else scores
    labels = labels if labels is not None else scores.labels if isinstance(scores, Detection) else {}
    y = np.array([-1 if labels.get(i) is None else int(labels[i]) for i in frame.index])
    return _table(frame), y, list(detectors or frame.columns)
