"""Wrap a model a researcher already holds in memory as a :class:`~cache.loading.LoadedModel`:
a Hugging Face ``*ForCausalLM`` with its tokenizer, a TransformerLens 4.x ``TransformerBridge`` or
an nnsight ``LanguageModel`` (each unwrapped to the Hugging Face module it holds, so every
backend and detector sees the same weights as when the checkpoint is loaded from its directory)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .architecture import discover_layout
from .config import ModelConfig
from .errors import ModelLoadError
from .loading import LoadedModel, ModelSource, _ensure_pad_token, check_finite_weights

logger = logging.getLogger(__name__)

ACCEPTED = (
    "a checkpoint directory (str or Path), a Hugging Face *ForCausalLM with its tokenizer, "
    "a TransformerLens TransformerBridge, or an nnsight LanguageModel"
)


def wrap_model(model: Any, tokenizer: Any = None) -> LoadedModel:
    """A loaded model from an in-memory one (see the module docstring).

    The model is put in eval mode (dropout off; a model in train mode is switched and a warning
    says so) and its weights checked for NaN/inf; a tokenizer without a pad token gets its EOS
    token as one (padding is never pooled). Gradients are left as they are.

    Raises:
        TypeError: ``model`` is none of the accepted kinds (named in the message), a TransformerLens
            ``HookedTransformer`` (its weights are converted; use a ``TransformerBridge``), or a
            Hugging Face model without its tokenizer.
        ModelLoadError: a bridge in compatibility mode (processed weights), or non-finite weights.
    """
    hf_model, tokenizer, kind = _unwrap(model, tokenizer)
    import torch

    if not isinstance(hf_model, torch.nn.Module) or not hasattr(hf_model, "get_output_embeddings"):
        raise TypeError(f"cannot audit a {type(model).__name__}: pass {ACCEPTED}")
    if hf_model.get_output_embeddings() is None:  # a bare backbone (GPT2Model): no next-token logits to score
        raise TypeError(
            f"a {type(hf_model).__name__} has no language-model head, so it is not a *ForCausalLM: load the model "
            "with AutoModelForCausalLM.from_pretrained(...) and pass that"
        )
    if tokenizer is None:
        # the public entry (probes.load_model) is named: this function is what it calls
        raise TypeError(f"a {type(hf_model).__name__} needs its tokenizer: probes.load_model(model, tokenizer)")
    name = str(getattr(hf_model.config, "_name_or_path", "") or "")
    spec = name or f"<in-memory {type(hf_model).__name__}>"
    if hf_model.training:
        logger.warning("%s was in train mode (dropout on: two runs of one text would differ); put in eval mode", spec)
        hf_model.eval()
    _ensure_pad_token(tokenizer, spec)
    check_finite_weights(hf_model, spec)
    local = bool(name) and Path(name).is_dir()
    source = ModelSource(
        spec=spec, location=str(Path(name).resolve()) if local else spec, is_local=local, local_files_only=True
    )
    probe = tokenizer("Layer probe.", add_special_tokens=True, return_tensors="pt")["input_ids"][:, :8]
    if probe.numel() == 0:
        probe = torch.tensor([[tokenizer.pad_token_id]])
    layout = discover_layout(hf_model, probe, None, None)
    dtype = str(next(hf_model.parameters()).dtype).removeprefix("torch.")
    config = ModelConfig(source=spec, device=str(next(hf_model.parameters()).device), dtype=dtype)
    logger.info("wrapped %s %s (%d blocks, d_model=%d)", kind, spec, layout.n_blocks, layout.d_model)
    return LoadedModel(model=hf_model, tokenizer=tokenizer, layout=layout, source=source, config=config)


def _unwrap(model: Any, tokenizer: Any) -> tuple[Any, Any, str]:
    """``(hf_model, tokenizer, kind)`` of a supported wrapper, or the model itself."""
    kinds = {c.__name__ for c in type(model).__mro__}
    module = type(model).__module__
    if "HookedTransformer" in kinds:
        raise TypeError(
            "a TransformerLens HookedTransformer holds converted weights (norms folded, weights centred), so "
            "its activations are not the checkpoint's; pass a TransformerBridge "
            "(TransformerBridge.boot_transformers(DIR)) or the Hugging Face model with its tokenizer"
        )
    if "TransformerBridge" in kinds and module.startswith("transformer_lens"):  # its HF model (rewired, same outputs)
        if getattr(model, "compatibility_mode", False):
            raise ModelLoadError(
                "this TransformerBridge is in compatibility mode (weights processed: norms folded, weights "
                "centred), so its activations are not the checkpoint's; boot a bridge without "
                "enable_compatibility_mode()"
            )
        return model.original_model, tokenizer or _checkpoint_tokenizer(model), "TransformerBridge"
    if "Envoy" in kinds and module.startswith("nnsight"):
        if not getattr(model, "dispatched", True):
            logger.warning("the nnsight model was not dispatched (its weights were on the meta device); dispatching it")
            model.dispatch()
        return model._module, tokenizer or getattr(model, "tokenizer", None), type(model).__name__
    return model, tokenizer, "Hugging Face model"


def _checkpoint_tokenizer(bridge: Any) -> Any:
    """The checkpoint's own tokenizer: a bridge's is set to prepend BOS (TransformerLens's
    ``prepend_bos``), which the checkpoint's may not, and every row would then differ from the
    same text cached from the directory. Falls back to the bridge's, with a warning."""
    name = str(getattr(bridge.original_model.config, "_name_or_path", "") or "")
    if name and Path(name).is_dir():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    logger.warning(
        "using the TransformerBridge's tokenizer (it prepends BOS: TransformerLens's prepend_bos); rows may differ "
        "from the checkpoint's own — pass its tokenizer: load_model(bridge, tokenizer)"
    )
    return bridge.tokenizer
