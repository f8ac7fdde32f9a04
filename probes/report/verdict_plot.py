"""``verdict.png``: the verdict at a glance — per detector, its within-AUC with the 95 % CI against
the 0.5 of "not trained on", one colour per mode, one panel per group of questions (all audited,
then each subset); a filled marker where that mode's combined test rejects."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .plots import _axes, _figure, _finish
from .verdict_text import p_sentence, verdict_word

MODE_COLORS = {"reference": "#1b7837", "relative": "#2e6da4", "absolute": "#999999"}


def plot_verdict(verdict: dict[str, Any], path: Path | None = None, ax: Any = None) -> Any:
    """One panel for all audited questions, then one per subset (``ax``: one Axes per panel).
    Saved to ``path`` when given; returns the Figure."""
    panels = [("all audited", verdict)] + list((verdict.get("subsets") or {}).items())
    names = list(dict.fromkeys(n for _, v in panels for m in v["modes"].values() for n in m["detectors"]))
    given = _axes(ax, len(panels), "plot_verdict")
    fig = given[0].figure if given else _figure(3.4 * len(panels) + 1.2, 0.42 * len(names) + 1.6)
    axes = given or fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    modes = [m for m in MODE_COLORS if m in verdict["modes"]]
    self_reference = set(verdict.get("self_reference") or ())  # the model compared with itself: constant, no figure
    for ax, (title, v) in zip(axes, panels):
        ax.axvline(0.5, color="black", linewidth=1, linestyle="--")
        for row, name in enumerate(names):
            if name in self_reference:
                ax.text(0.52, row, "n/a (self-reference)", va="center", fontsize=7, color="#555555")
        for k, mode in enumerate(modes):
            m = v["modes"].get(mode)
            if m is None:
                continue
            offset = (k - (len(modes) - 1) / 2) * 0.22
            for row, name in enumerate(names):
                r = m["detectors"].get(name)
                if (
                    name in self_reference
                    or r is None
                    or r["within_auc"]["value"] is None
                    or not math.isfinite(r["within_auc"]["value"])
                ):
                    continue
                lo, hi = r["within_auc"]["ci"]
                y = row + offset
                if lo is not None and hi is not None:
                    ax.plot([lo, hi], [y, y], color=MODE_COLORS[mode], linewidth=1.6)
                ax.plot(
                    [r["within_auc"]["value"]],
                    [y],
                    marker="o",
                    markersize=6,
                    color=MODE_COLORS[mode],
                    markerfacecolor=MODE_COLORS[mode] if m["reject"] else "white",
                    label=f"{mode}{' (uncalibrated)' if mode == 'absolute' else ''}" if row == 0 else None,
                )
        if v["mode"] is None:
            ax.set_title(f"{title} (n={v['n']}): NO VERDICT\nno mode had a usable question", fontsize=9)
        else:
            word = verdict_word(v)
            ax.set_title(
                f"{title} (n={v['n']}): {word}\n{v['mode']} mode, {p_sentence(v['combined']['p_value'])}", fontsize=9
            )
        ax.set_xlim(0.0, 1.0)
        ax.set_xlabel("within-AUC (0.5 = not trained on)", fontsize=8)
    axes[0].set_yticks(range(len(names)))
    axes[0].set_yticklabels(names, fontsize=8)
    axes[0].invert_yaxis()
    handles, labels = axes[-1].get_legend_handles_labels()
    if not given:
        fig.legend(
            handles,
            labels,
            loc="lower center",
            ncol=max(len(labels), 1),
            fontsize=8,
            frameon=False,
            title="mode (filled marker: that mode's combined test rejects)",
            title_fontsize=8,
        )
    if given:
        axes[-1].legend(handles, labels, fontsize=7, title="mode (filled: rejects)", title_fontsize=7)
        return _finish(fig, path)
    fig.tight_layout(rect=(0.0, 0.14, 1.0, 1.0))
    return _finish(fig, path)
