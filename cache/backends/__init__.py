"""Extraction backends: one small protocol, implementations imported on first use.

Every backend turns a :class:`~cache.batching.TokenBatch` into pooled activations
``[batch, n_layers, d_model]`` (float32, on the host) for a :class:`~cache.layers.LayerSelection`,
with the layer semantics of SPEC §0. ``import cache`` never imports TransformerLens or nnsight;
the registry maps names to ``"module:Class"`` strings resolved by :func:`create_extractor`.
"""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..batching import TokenBatch
    from ..layers import LayerSelection
    from ..loading import LoadedModel

BACKENDS: dict[str, str] = {
    "hf": "cache.backends.hf:HFExtractor",
    "transformer_lens": "cache.backends.tlens:TransformerLensExtractor",
    "nnsight": "cache.backends.nnsight_backend:NNsightExtractor",
}


class Extractor(Protocol):
    """What every backend implements."""

    name: str

    def processing_flags(self) -> dict[str, Any]:
        """Settings of the backend that can change the numbers (stored as provenance)."""
        ...

    def pool(self, batch: "TokenBatch", layers: "LayerSelection") -> Any:
        """Pooled activations of ``batch``: ``[batch, len(layers), d_model]`` float32 CPU tensor,
        layers in ``layers.labels`` order."""
        ...


def create_extractor(name: str, loaded: "LoadedModel", *, own_model: bool = False) -> Extractor:
    """Instantiate backend ``name`` on ``loaded``.

    Args:
        own_model: let a backend that modifies the model it wraps (TransformerLens switches
            attention to eager, nnsight wraps modules) take ``loaded.model`` itself instead of a
            copy. Only safe when nothing else uses ``loaded`` afterwards.
    """
    if name not in BACKENDS:
        close = difflib.get_close_matches(name, list(BACKENDS), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown backend '{name}'.{hint} Available: {', '.join(BACKENDS)}")
    module_name, _, class_name = BACKENDS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(loaded, own_model=own_model)
