"""PNG plots of a report, drawn with matplotlib's object API (no pyplot global state, no display).

* ``roc.png`` — ROC curves of every detector on one axis, AUC in the legend;
* ``scores.png`` — score histograms per detector, members vs non-members (or all, in an audit);
* ``profiles.png`` — per-layer zRSM/DC/zRSI profiles (mean of sign(m)·log(1+|m|)), members vs
  non-members, with bootstrap CI bands;
* ``cohens_d.png`` — Cohen's d heat map, metric × layer.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..evaluate import auc, roc_points
from ..scores import ScoreTable

MEMBER_COLOR = "#c0392b"
NON_MEMBER_COLOR = "#2e6da4"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def plot_roc(table: ScoreTable, labels: np.ndarray, names: Sequence[str], path: Path) -> None:
    """ROC curves; ``labels`` [N] 1/0/−1 (−1 and non-finite scores left out)."""
    fig = _figure(5.5, 5.0)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="chance")
    for name in names:
        s = table.columns[name]
        keep = (labels >= 0) & np.isfinite(s)
        y = labels[keep].astype(bool)
        if y.all() or not y.any():
            continue
        points = roc_points(y[None], s[keep][None])
        ax.plot(points.fpr[0], points.tpr[0], linewidth=1.6, label=f"{name} (AUC {auc(points)[0]:.2f})")
    ax.set_xlabel("false-positive rate (non-members flagged)")
    ax.set_ylabel("true-positive rate (members flagged)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_title("ROC curves")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def plot_score_histograms(table: ScoreTable, labels: np.ndarray | None, names: Sequence[str], path: Path) -> None:
    """One panel per detector; members and non-members overlaid on shared bins."""
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig = _figure(4.2 * cols, 3.0 * rows)
    for k, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, k + 1)
        s = table.columns[name]
        finite = np.isfinite(s)
        if not finite.any():
            ax.set_title(f"{name}: no finite scores", fontsize=9)
            continue
        bins = np.histogram_bin_edges(s[finite], bins=min(30, max(5, int(np.sqrt(finite.sum())) * 2)))
        if labels is None:
            ax.hist(s[finite], bins=bins, color="grey", alpha=0.8, label="all")
        else:
            for value, color, label in ((1, MEMBER_COLOR, "members"), (0, NON_MEMBER_COLOR, "non-members")):
                part = s[finite & (labels == value)]
                if len(part):
                    ax.hist(part, bins=bins, color=color, alpha=0.5, label=f"{label} ({len(part)})")
        n_bad = int((~finite).sum())
        ax.set_title(name + (f" ({n_bad} non-finite)" if n_bad else ""), fontsize=9)
        ax.set_xlabel("score (higher = member)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def plot_profiles(layers: dict[str, Any], path: Path) -> None:
    """Per-layer mean of each compressed metric with CI bands, members vs non-members."""
    labels = layers["layer_labels"]
    x = np.arange(len(labels))
    fig = _figure(13.0, 3.8)
    for i, metric in enumerate(layers["metric_names"]):
        ax = fig.add_subplot(1, 3, i + 1)
        for group, color, label in (("members", MEMBER_COLOR, "members"), ("non_members", NON_MEMBER_COLOR, "non-members")):
            p = layers["profiles"][metric][group]
            mean, lo, hi = (np.array(p[k], dtype=float) for k in ("mean", "ci_low", "ci_high"))
            ax.plot(x, mean, color=color, marker="o", markersize=3, linewidth=1.5, label=f"{label} (n={layers[group]})")
            ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_title(metric)
        ax.set_xlabel("layer")
        ax.set_ylabel("mean of sign(m)·log(1+|m|)", fontsize=8)
        _layer_ticks(ax, labels)
        ax.legend(fontsize=7)
    fig.suptitle("Per-layer profiles with 95% bootstrap CI bands", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


def plot_cohens_d(layers: dict[str, Any], path: Path) -> None:
    """Heat map of Cohen's d (members − non-members), metrics × layers, centred at 0."""
    labels = layers["layer_labels"]
    names = layers["metric_names"]
    d = np.array([[np.nan if v is None else v for v in layers["cohens_d"][m]["value"]] for m in names], dtype=float)
    vmax = float(np.nanmax(np.abs(d))) if np.isfinite(d).any() else 1.0
    fig = _figure(max(5.0, 0.35 * len(labels) + 2.0), 2.8)
    ax = fig.add_subplot()
    image = ax.imshow(d, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
    ax.set_yticks(range(len(names)), names)
    _layer_ticks(ax, labels)
    ax.set_xlabel("layer")
    if len(labels) <= 32:
        for (i, j), value in np.ndenumerate(d):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if abs(value) > 0.6 * vmax else "black")
    fig.colorbar(image, ax=ax, label="Cohen's d")
    ax.set_title("Cohen's d, members − non-members (sign(m)·log(1+|m|))", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def _layer_ticks(ax, labels: Sequence[str]) -> None:
    step = max(1, len(labels) // 14)
    ticks = list(range(0, len(labels), step))
    ax.set_xticks(ticks, [labels[t] for t in ticks], fontsize=7)
