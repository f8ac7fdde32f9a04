"""PNG plots of a report, drawn with matplotlib's object API (no pyplot global state, no display).

* ``roc.png`` — ROC curves, one panel per family (LaRA, likelihood, sampling, calibrated, fusion),
  the best four of each in colour with their AUC, the rest faded;
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

from ..detectors import REGISTRY
from ..evaluation import auc, roc_points
from ..scores import ScoreTable, split_column

MEMBER_COLOR = "#c0392b"
NON_MEMBER_COLOR = "#2e6da4"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


FAMILIES = ("LaRA", "likelihood & completion", "sampling", "calibrated (@cal, @ref)", "fusion")
HIGHLIGHTED = 4  # the best curves of a panel drawn in colour; the rest faded
STYLES = [("#1b6ca8", "-"), ("#d1495b", "--"), ("#2a9d8f", "-."), ("#e9a03b", ":")]


def roc_family(name: str) -> str:
    """Which panel of ``roc.png`` a score column belongs to."""
    if "+" in name:
        return "fusion"
    if split_column(name)[1] is not None:
        return "calibrated (@cal, @ref)"
    if name.startswith("lara"):
        return "LaRA"

    return REGISTRY[name].family if name in REGISTRY else "likelihood & completion"  # the detector's own tag


def plot_roc(
    table: ScoreTable, labels: np.ndarray, names: Sequence[str], path: Path | None = None, ax: Any = None
) -> Any:
    """ROC curves, one panel per family (:func:`roc_family`): in each, the best
    :data:`HIGHLIGHTED` by AUC in distinct colours and line styles, the others faded. ``labels``
    [N] 1/0/−1 (−1 and non-finite scores left out). Given ``ax`` (a matplotlib Axes), every curve
    is drawn there, in one panel. Saved to ``path`` when given; returns the Figure."""
    curves: dict[str, list[tuple[float, str, Any]]] = {}
    for name in names:
        s = table.columns[name]
        keep = (labels >= 0) & np.isfinite(s)
        y = labels[keep].astype(bool)
        if y.all() or not y.any():
            continue
        points = roc_points(y[None], s[keep][None])
        curves.setdefault("ROC curves" if ax is not None else roc_family(name), []).append(
            (float(auc(points)[0]), name, points)
        )
    if ax is not None:
        _roc_panel(ax, "ROC curves", curves.get("ROC curves", []))
        return _finish(ax.figure, path)
    families = [f for f in FAMILIES if f in curves] or ["(no labelled scores)"]
    cols = min(3, len(families))
    rows = math.ceil(len(families) / cols)
    fig = _figure(4.2 * cols, 4.0 * rows)
    for k, family in enumerate(families):
        _roc_panel(fig.add_subplot(rows, cols, k + 1), family, curves.get(family, []))
    fig.suptitle("ROC curves (members vs non-members)", fontsize=11)
    fig.tight_layout()
    return _finish(fig, path)


def _roc_panel(ax: Any, family: str, curves: list[tuple[float, str, Any]]) -> None:
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8)
    ranked = sorted(curves, key=lambda c: -c[0])
    for rank, (value, name, points) in enumerate(ranked):
        if rank < HIGHLIGHTED:
            color, style = STYLES[rank]
            ax.plot(
                points.fpr[0], points.tpr[0], color=color, linestyle=style, linewidth=1.8, label=f"{name} {value:.2f}"
            )
        else:
            ax.plot(points.fpr[0], points.tpr[0], color="#b0b0b0", linewidth=0.8, alpha=0.7)
    faded = len(ranked) - HIGHLIGHTED
    ax.set_title(family + (f" (+{faded} more, grey)" if faded > 0 else ""), fontsize=10)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false-positive rate", fontsize=8)
    ax.set_ylabel("true-positive rate", fontsize=8)
    if ranked:
        ax.legend(loc="lower right", fontsize=8, title="AUC", title_fontsize=8)


def _finish(fig: Any, path: Path | None) -> Any:
    """Save ``fig`` to ``path`` (when given) and return it."""
    if path is not None:
        fig.savefig(path)
    return fig


def _axes(ax: Any, n: int, what: str, hint: str = "") -> list[Any] | None:
    """The ``n`` Axes given for a plot of ``n`` panels (one Axes when ``n`` = 1), or None;
    ``what``: the function the user called, ``hint``: what else they can do."""
    if ax is None:
        return None
    axes = list(ax) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
    if len(axes) != n:
        raise ValueError(
            f"{what} draws {n} panel(s): pass ax= as {'one Axes' if n == 1 else f'a sequence of {n} Axes'}{hint}"
        )
    return axes


def plot_score_histograms(
    table: ScoreTable,
    labels: np.ndarray | None,
    names: Sequence[str],
    path: Path | None = None,
    ax: Any = None,
    entry: str = "plot_score_histograms",
) -> Any:
    """One panel per detector; members and non-members overlaid on shared bins (``ax``: one Axes
    per detector; ``entry``: the function the user called, for a message). Saved to ``path`` when
    given; returns the Figure."""
    hint = f", one per column ({', '.join(names)}), or choose the columns with detectors=[...]"
    given = _axes(ax, len(names), entry, hint)
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig = given[0].figure if given else _figure(4.2 * cols, 3.0 * rows)
    for k, name in enumerate(names):
        ax = given[k] if given else fig.add_subplot(rows, cols, k + 1)
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
    if not given:
        fig.tight_layout()
    return _finish(fig, path)


def plot_profiles(layers: dict[str, Any], path: Path | None = None, ax: Any = None) -> Any:
    """Per-layer mean of each compressed metric with CI bands, members vs non-members (``ax``:
    three Axes, one per metric). Saved to ``path`` when given; returns the Figure."""
    labels = layers["layer_labels"]
    x = np.arange(len(labels))
    given = _axes(ax, len(layers["metric_names"]), "plot_profiles")
    fig = given[0].figure if given else _figure(13.0, 3.8)
    for i, metric in enumerate(layers["metric_names"]):
        ax = given[i] if given else fig.add_subplot(1, 3, i + 1)
        for group, color, label in (
            ("members", MEMBER_COLOR, "members"),
            ("non_members", NON_MEMBER_COLOR, "non-members"),
        ):
            p = layers["profiles"][metric][group]
            mean, lo, hi = (np.array(p[k], dtype=float) for k in ("mean", "ci_low", "ci_high"))
            ax.plot(x, mean, color=color, marker="o", markersize=3, linewidth=1.5, label=f"{label} (n={layers[group]})")
            ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_title(metric)
        ax.set_xlabel("layer")
        ax.set_ylabel("mean of sign(m)·log(1+|m|)", fontsize=8)
        _layer_ticks(ax, labels)
        ax.legend(fontsize=7)
    if not given:
        fig.suptitle("Per-layer profiles with 95% bootstrap CI bands", fontsize=10)
        fig.tight_layout()
    return _finish(fig, path)


def plot_cohens_d(layers: dict[str, Any], path: Path | None = None, ax: Any = None) -> Any:
    """Heat map of Cohen's d (members − non-members), metrics × layers, centred at 0 (on ``ax``
    when given). Saved to ``path`` when given; returns the Figure."""
    labels = layers["layer_labels"]
    names = layers["metric_names"]
    d = np.array([[np.nan if v is None else v for v in layers["cohens_d"][m]["value"]] for m in names], dtype=float)
    vmax = float(np.nanmax(np.abs(d))) if np.isfinite(d).any() else 1.0
    given = _axes(ax, 1, "plot_cohens_d")
    fig = given[0].figure if given else _figure(max(5.0, 0.35 * len(labels) + 2.0), 2.8)
    ax = given[0] if given else fig.add_subplot()
    image = ax.imshow(d, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
    ax.set_yticks(range(len(names)), names)
    _layer_ticks(ax, labels)
    ax.set_xlabel("layer")
    null = layers.get("null")
    survives = (
        np.array([[p is not None and p < null["alpha"] for p in null["p_adjusted"][m]] for m in names])
        if null
        else np.zeros(d.shape, dtype=bool)
    )
    if len(labels) <= 32:
        for (i, j), value in np.ndenumerate(d):
            if np.isfinite(value):
                ax.text(
                    j,
                    i,
                    f"{value:.2f}" + ("✱" if survives[i, j] else ""),
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if abs(value) > 0.6 * vmax and (survives[i, j] or not null) else "black",
                )
    if null:  # cells within the permutation null are washed out; survivors keep their colour, boxed
        veil = np.zeros(d.shape + (4,))
        veil[..., :3], veil[..., 3] = 1.0, np.where(survives, 0.0, 0.65)
        ax.imshow(veil, aspect="auto")
        for i, j in zip(*np.nonzero(survives)):
            ax.add_patch(_box(j, i))
    fig.colorbar(image, ax=ax, label="Cohen's d")
    note = (
        ""
        if not null
        else (
            "\nno layer beyond the permutation null (all washed out)"
            if not null["significant_layers"]
            else "\nboxed ✱: beyond the permutation null (family-wise α = "
            + f"{null['alpha']:g}); washed out: within it"
        )
    )
    ax.set_title("Cohen's d, members − non-members (sign(m)·log(1+|m|))" + note, fontsize=9)
    if not given:
        fig.tight_layout()
    return _finish(fig, path)


def _box(x: int, y: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.5)


def _layer_ticks(ax, labels: Sequence[str]) -> None:
    step = max(1, len(labels) // 14)
    ticks = list(range(0, len(labels), step))
    ax.set_xticks(ticks, [labels[t] for t in ticks], fontsize=7)
