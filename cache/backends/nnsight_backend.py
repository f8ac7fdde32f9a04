"""``nnsight`` backend: pooled block outputs read inside an nnsight 0.8 trace.

Uses ``TransformersModel`` (``LanguageModel`` is deprecated in 0.8) around a copy of the loaded
model. nnsight switches the tokenizer it is given to left padding, so it gets its own copy; we
pass token ids, masks and position ids ourselves. Modules are read in forward order, the mean
is taken inside the trace (only ``[batch, d]`` per layer leaves it), and the trace stops after
the deepest layer needed.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

import torch

from ..architecture import block_output, get_submodule
from ..errors import ModelLoadError
from ..pooling import masked_mean, pool_weights, stack_on_host

if TYPE_CHECKING:
    from ..batching import TokenBatch
    from ..layers import LayerSelection
    from ..loading import LoadedModel

logger = logging.getLogger(__name__)


class NNsightExtractor:
    """Pools block outputs through an nnsight ``TransformersModel`` trace."""

    name = "nnsight"

    def __init__(self, loaded: "LoadedModel", *, own_model: bool = False) -> None:
        from nnsight.modeling.transformers import TransformersModel

        self.loaded = loaded
        self.device = loaded.device
        module = loaded.model if own_model else loaded.model_copy()
        try:
            self.model = TransformersModel(module, tokenizer=loaded.tokenizer_copy())
        except Exception as err:  # noqa: BLE001
            raise ModelLoadError(
                f"nnsight cannot wrap this {type(module).__name__}: {type(err).__name__}: {err}"
            ) from err
        layout = loaded.layout
        self.blocks = get_submodule(self.model, layout.blocks_path)
        self.final_norm = get_submodule(self.model, layout.final_norm_path) if layout.final_norm_path else None
        self.accepts_position_ids = "position_ids" in inspect.signature(module.forward).parameters

    def processing_flags(self) -> dict[str, Any]:
        return {
            "wrapper": "TransformersModel",
            "read": "block.output",
            "position_ids": "from_attention_mask" if self.accepts_position_ids else "model_default",
            "attn_implementation": self.model.attn_implementation,
        }

    def pool(self, batch: "TokenBatch", layers: "LayerSelection") -> torch.Tensor:
        batch = batch.to(self.device)
        mask, counts = pool_weights(batch.pool_mask)
        inputs = batch.model_inputs()
        if not self.accepts_position_ids:
            inputs.pop("position_ids")
        saved: list[torch.Tensor] = []
        with torch.inference_mode(), self.model.trace(inputs) as tracer:
            if layers.embed:
                saved.append(masked_mean(self.blocks[0].input, mask, counts).save())
            for index in layers.blocks:
                saved.append(masked_mean(block_output(self.blocks[index].output), mask, counts).save())
            if layers.final_norm:
                saved.append(masked_mean(block_output(self.final_norm.output), mask, counts).save())
            tracer.stop()
        return stack_on_host(saved)
