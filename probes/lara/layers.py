"""Layer subsets for aggregation: ``all``, the early/mid/late windows, ranges and lists.

Windows split the model's decoder blocks 0…n−1 into thirds the way the LaRA seed's appendix A.7
does for a 28-block model (0–8, 9–17, 18–27): early = [0, ⌊n/3⌋), mid = [⌊n/3⌋, 2⌊n/3⌋),
late = [2⌊n/3⌋, n). Windows and ``all`` cover block layers only; ``embed`` and ``final_norm``
are used only when named.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import ConfigError

WINDOWS: tuple[str, ...] = ("early", "mid", "late")


def block_index(label: str) -> int | None:
    """The block index of a layer label, or None for ``embed`` / ``final_norm``."""
    return int(label) if label.lstrip("-").isdigit() else None


def window_bounds(n_blocks: int) -> dict[str, tuple[int, int]]:
    """``{window: (first, stop)}`` block ranges of the three windows."""
    third = n_blocks // 3
    return {"early": (0, third), "mid": (third, 2 * third), "late": (2 * third, n_blocks)}


def select_layers(
    spec: str | Sequence[str | int] | None, labels: Sequence[str], n_blocks: int | None = None
) -> list[int]:
    """Column indices (into ``labels``) chosen by ``spec``.

    Args:
        spec: ``None`` or ``"all"`` (every block layer), ``"early"``/``"mid"``/``"late"``, a range
            ``"9-17"`` (block indices, inclusive), labels ``"0,5,embed"``, or a sequence of labels;
            comma-separated parts are combined.
        labels: the layer labels of the metrics, in column order.
        n_blocks: decoder blocks of the model (for windows); default: highest block label + 1.

    Raises:
        ConfigError: an unknown part, a layer not in ``labels`` or an empty selection.
    """
    labels = [str(x) for x in labels]
    blocks = {block_index(x): i for i, x in enumerate(labels) if block_index(x) is not None}
    if n_blocks is None:
        n_blocks = max(blocks, default=-1) + 1
    parts = ["all"] if spec is None else spec.split(",") if isinstance(spec, str) else [str(x) for x in spec]
    chosen: list[int] = []
    for part in (p.strip() for p in parts):
        if part == "all":
            picked = list(blocks.values())
        elif part in WINDOWS:
            first, stop = window_bounds(n_blocks)[part]
            picked = [i for b, i in blocks.items() if first <= b < stop]
        elif "-" in part.lstrip("-") and all(x.strip().isdigit() for x in part.split("-", 1)):
            first, last = (int(x) for x in part.split("-", 1))
            picked = [i for b, i in blocks.items() if first <= b <= last]
        elif part in labels:
            picked = [labels.index(part)]
        else:
            raise ConfigError(
                f"layer selection {part!r} is not a layer of these metrics nor one of all, early, mid, late, FIRST-LAST; "
                f"layers: {', '.join(labels)}"
            )
        chosen += [i for i in picked if i not in chosen]
    if not chosen:
        raise ConfigError(
            f"layer selection {spec!r} picks no layer of {', '.join(labels)} (model of {n_blocks} blocks)"
        )
    return sorted(chosen)


def available_windows(labels: Sequence[str], n_blocks: int | None = None) -> dict[str, list[int]]:
    """``{window: column indices}`` of the early/mid/late windows that hold at least one layer
    (a very shallow model, or a sparse layer set, can leave a window empty)."""
    out = {}
    for window in WINDOWS:
        try:
            out[window] = select_layers(window, labels, n_blocks)
        except ConfigError:
            continue
    return out
