"""``transformer_lens`` backend: TransformerLens 4.x ``TransformerBridge`` hook points.

The bridge wraps the Hugging Face model *without* compatibility-mode weight processing (which
folds norms and centres weights, changing GPT-2 activations by ~1e-2), so its
``blocks.{l}.hook_resid_post`` equals the HF block output. It is given token ids, attention
mask and position ids directly: passed strings, it would prepend its own BOS. Booting switches
the wrapped model to eager attention in place, so by default it gets its own copy.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConfigError, ModelLoadError
from ..layers import EMBED, FINAL_NORM
from ..pooling import StopForward, masked_mean, pool_weights, stack_on_host

if TYPE_CHECKING:
    from ..batching import TokenBatch
    from ..layers import LayerSelection
    from ..loading import LoadedModel

logger = logging.getLogger(__name__)

EMBED_HOOK = "blocks.0.hook_resid_pre"
FINAL_NORM_HOOK = "ln_final.hook_out"


def hook_name(label: str) -> str:
    """TransformerLens hook point of a layer label."""
    if label == EMBED:
        return EMBED_HOOK
    if label == FINAL_NORM:
        return FINAL_NORM_HOOK
    return f"blocks.{label}.hook_resid_post"


class TransformerLensExtractor:
    """Pools ``hook_resid_post`` activations of a TransformerBridge."""

    name = "transformer_lens"

    def __init__(self, loaded: "LoadedModel", *, own_model: bool = False) -> None:
        from transformer_lens.model_bridge import TransformerBridge

        self.loaded = loaded
        self.device = loaded.device
        hf_model = loaded.model if own_model else loaded.model_copy()
        on_map = bool(getattr(hf_model, "hf_device_map", None))
        try:
            self.bridge = TransformerBridge.boot_transformers(
                loaded.source.location,
                hf_model=hf_model,
                tokenizer=loaded.tokenizer_copy(),
                device=None if on_map else str(self.device),
                dtype=loaded.dtype,
            )
        except Exception as err:  # noqa: BLE001 - TL raises many types for unsupported models
            raise ModelLoadError(
                f"TransformerLens cannot wrap this {type(hf_model).__name__}: {type(err).__name__}: {err}. "
                "Use --backend hf, which supports any architecture whose blocks can be located."
            ) from err
        if self.bridge.compatibility_mode:
            raise ModelLoadError("the TransformerBridge came up in compatibility mode; its weights would not match HF")
        self.hook_names = set(self.bridge.hook_dict)

    def processing_flags(self) -> dict[str, Any]:
        return {
            "hook": "blocks.{l}.hook_resid_post",
            "weight_processing": False,
            "compatibility_mode": False,
            "position_ids": "from_attention_mask",
            "attn_implementation": getattr(self.bridge.original_model.config, "_attn_implementation", None),
        }

    def pool(self, batch: "TokenBatch", layers: "LayerSelection") -> torch.Tensor:
        batch = batch.to(self.device)
        mask, counts = pool_weights(batch.pool_mask)
        labels = layers.labels
        pooled: list[torch.Tensor | None] = [None] * len(labels)
        stop_label = labels[-1]

        def make_hook(slot: int, label: str):
            def hook(activation: torch.Tensor, *, hook: Any) -> torch.Tensor:
                pooled[slot] = masked_mean(activation, mask, counts)
                if label == stop_label:
                    raise StopForward
                return activation

            return hook

        fwd_hooks = []
        for slot, label in enumerate(labels):
            name = hook_name(label)
            if name not in self.hook_names:
                raise ConfigError(f"TransformerLens has no hook point {name!r} for layer {label!r} on this model")
            fwd_hooks.append((name, make_hook(slot, label)))
        with torch.inference_mode(), self.bridge.hooks(fwd_hooks=fwd_hooks):
            try:
                self.bridge(
                    batch.input_ids,
                    attention_mask=batch.attention_mask,
                    position_ids=batch.position_ids,
                    return_type=None,
                )
            except StopForward:
                pass
        return stack_on_host(pooled)
