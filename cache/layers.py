"""Layer selection: which residual-stream positions are pooled and stored (SPEC §0).

Labels are strings: ``"embed"`` (embedding output, the input of block 0), ``"0"`` … ``"L-1"``
(output of block ℓ, before any final norm) and ``"final_norm"`` (the final-normed output of
the last block, what Hugging Face returns as its last hidden state). A stored row's layer axis
follows the canonical order embed, blocks ascending, final_norm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .errors import ConfigError

EMBED = "embed"
FINAL_NORM = "final_norm"


@dataclass(frozen=True)
class LayerSelection:
    """A resolved, ordered set of layers for a model with ``n_blocks`` decoder blocks."""

    n_blocks: int
    blocks: tuple[int, ...]
    embed: bool = False
    final_norm: bool = False

    @property
    def labels(self) -> tuple[str, ...]:
        """Layer labels in storage order."""
        out = [EMBED] if self.embed else []
        out += [str(b) for b in self.blocks]
        if self.final_norm:
            out.append(FINAL_NORM)
        return tuple(out)

    def __len__(self) -> int:
        return len(self.blocks) + int(self.embed) + int(self.final_norm)

    @property
    def deepest_block(self) -> int:
        """Index of the last block that must run (all blocks when ``final_norm`` is asked)."""
        if self.final_norm:
            return self.n_blocks - 1
        return max(self.blocks) if self.blocks else 0

    @property
    def runs_to_end(self) -> bool:
        """Whether the forward pass must run through the last block."""
        return self.deepest_block == self.n_blocks - 1

    def index_of(self, label: str) -> int:
        """Position of ``label`` on the stored layer axis."""
        return self.labels.index(label)

    @classmethod
    def from_labels(cls, labels: Iterable[str], n_blocks: int) -> "LayerSelection":
        """Rebuild a selection from stored labels."""
        return resolve_layers(list(labels), n_blocks)


def resolve_layers(tokens: Iterable[str | int], n_blocks: int) -> LayerSelection:
    """Resolve user layer tokens against a model with ``n_blocks`` blocks.

    Accepts ``all``, integers (negative ones count from the end), ``embed`` and ``final_norm``,
    in any order; duplicates collapse.

    Raises:
        ConfigError: for an unknown token or an out-of-range index.
    """
    blocks: set[int] = set()
    embed = final_norm = False
    for token in tokens:
        text = str(token).strip().lower()
        if text == "all":
            blocks.update(range(n_blocks))
        elif text == EMBED:
            embed = True
        elif text == FINAL_NORM:
            final_norm = True
        else:
            try:
                index = int(text)
            except ValueError:
                raise ConfigError(
                    f"unknown layer '{token}': use 'all', block indices 0..{n_blocks - 1} "
                    f"(negative counts from the end), '{EMBED}' or '{FINAL_NORM}'"
                ) from None
            resolved = index + n_blocks if index < 0 else index
            if not 0 <= resolved < n_blocks:
                raise ConfigError(f"layer {index} is out of range: the model has {n_blocks} blocks (0..{n_blocks - 1})")
            blocks.add(resolved)
    if not blocks and not embed and not final_norm:
        raise ConfigError("no layer selected")
    return LayerSelection(n_blocks=n_blocks, blocks=tuple(sorted(blocks)), embed=embed, final_norm=final_norm)
