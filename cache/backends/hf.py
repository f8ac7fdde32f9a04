"""``hf`` backend: forward hooks on the decoder blocks of the plain Hugging Face model.

The base module (the blocks' parent) runs, never the LM head. Hooks registered for one batch
inside a context manager (always removed, even when the forward raises) take the masked mean
of their block's output on the spot, so memory is O(batch · layers · d), and the hook on the
deepest layer needed stops the forward pass. Layer ℓ is block ℓ's output; ``embed`` is block 0's
input; ``final_norm`` is the final norm's output.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Iterator

import torch

from ..architecture import block_input, block_output, forward_kwargs, get_submodule
from ..pooling import StopForward, masked_mean, pool_weights, stack_on_host

if TYPE_CHECKING:
    from ..batching import TokenBatch
    from ..layers import LayerSelection
    from ..loading import LoadedModel

logger = logging.getLogger(__name__)


class HFExtractor:
    """Pools block outputs with forward hooks on the loaded Hugging Face model."""

    name = "hf"

    def __init__(self, loaded: "LoadedModel", *, own_model: bool = False) -> None:
        self.loaded = loaded
        layout = loaded.layout
        self.base = get_submodule(loaded.model, layout.base_path)
        self.blocks = get_submodule(loaded.model, layout.blocks_path)
        self.final_norm = get_submodule(loaded.model, layout.final_norm_path) if layout.final_norm_path else None

    def processing_flags(self) -> dict[str, Any]:
        return {
            "hook": "forward_hook:block_output",
            "runs": "base_model",
            "position_ids": "from_attention_mask",
            "attn_implementation": getattr(self.loaded.model.config, "_attn_implementation", None),
        }

    def pool(self, batch: "TokenBatch", layers: "LayerSelection") -> torch.Tensor:
        batch = batch.to(self.loaded.device)
        mask, counts = pool_weights(batch.pool_mask)
        pooled: list[torch.Tensor | None] = [None] * len(layers)
        with torch.inference_mode(), self._pooling_hooks(layers, mask, counts, pooled):
            try:
                self.base(**forward_kwargs(self.base, batch.model_inputs()))
            except StopForward:
                pass
        missing = [label for label, value in zip(layers.labels, pooled) if value is None]
        if missing:
            raise RuntimeError(f"layers {missing} produced no activation; the block layout does not match this model")
        return stack_on_host(pooled)

    @contextlib.contextmanager
    def _pooling_hooks(
        self, layers: "LayerSelection", mask: torch.Tensor, counts: torch.Tensor, pooled: list
    ) -> Iterator[None]:
        """Register the pooling hooks for one forward pass; remove them however it ends."""
        handles = []
        stop_after_block = None if layers.runs_to_end else layers.deepest_block

        def store(slot: int, hidden: torch.Tensor) -> None:
            pooled[slot] = masked_mean(hidden, mask, counts)

        def on_block(slot: int | None, index: int):
            def hook(_module: Any, _args: Any, output: Any) -> None:
                if slot is not None:
                    store(slot, block_output(output))
                if index == stop_after_block:
                    raise StopForward

            return hook

        try:
            if layers.embed:
                handles.append(
                    self.blocks[0].register_forward_pre_hook(
                        lambda _m, args, kwargs: store(0, block_input(args, kwargs)), with_kwargs=True
                    )
                )
            offset = int(layers.embed)
            for slot, index in enumerate(layers.blocks, start=offset):
                handles.append(self.blocks[index].register_forward_hook(on_block(slot, index)))
            if stop_after_block is not None and stop_after_block not in layers.blocks:
                handles.append(self.blocks[stop_after_block].register_forward_hook(on_block(None, stop_after_block)))
            if layers.final_norm:
                if self.final_norm is None:
                    raise RuntimeError("this model has no final norm located; drop 'final_norm' from the layers")
                last = len(layers) - 1
                handles.append(
                    self.final_norm.register_forward_hook(lambda _m, _a, out: store(last, block_output(out)))
                )
            yield
        finally:
            for handle in handles:
                handle.remove()
