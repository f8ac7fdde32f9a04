"""Where the decoder blocks and the final norm live in a causal LM, as data, checked at load.

A :class:`BlockLayout` names the block list and the final norm by dotted module paths relative
to the loaded ``*ForCausalLM`` module. The *base* module run by the ``hf`` backend is the
block list's parent (``transformer`` for GPT-2, ``model`` for Llama), so the LM head never runs.

Discovery tries the path known for the model's ``model_type``, then generic candidates, and
accepts the first one a tiny forward pass validates: every block fires once, in order, with a
``[batch, seq, d_model]`` output; the final norm fires after the last block with the same shape.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ArchitectureError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# model_type -> dotted path of the decoder block list, relative to the *ForCausalLM module.
KNOWN_BLOCK_PATHS: dict[str, str] = {
    "gpt2": "transformer.h",
    "gptj": "transformer.h",
    "gpt_bigcode": "transformer.h",
    "bloom": "transformer.h",
    "falcon": "transformer.h",
    "codegen": "transformer.h",
    "gpt_neox": "gpt_neox.layers",
    "opt": "model.decoder.layers",
    "llama": "model.layers",
    "mistral": "model.layers",
    "mixtral": "model.layers",
    "qwen2": "model.layers",
    "qwen2_moe": "model.layers",
    "qwen3": "model.layers",
    "qwen3_moe": "model.layers",
    "gemma": "model.layers",
    "gemma2": "model.layers",
    "gemma3_text": "model.layers",
    "gemma3": "model.language_model.layers",
    "phi": "model.layers",
    "phi3": "model.layers",
    "olmo": "model.layers",
    "olmo2": "model.layers",
    "deepseek_v2": "model.layers",
    "deepseek_v3": "model.layers",
    "granite": "model.layers",
    "stablelm": "model.layers",
    "starcoder2": "model.layers",
    "internlm2": "model.layers",
}

# Tried in order when the model_type is unknown or its known path fails.
GENERIC_BLOCK_PATHS: tuple[str, ...] = (
    "model.layers",
    "transformer.h",
    "gpt_neox.layers",
    "model.decoder.layers",
    "model.language_model.layers",
    "language_model.model.layers",
    "transformer.blocks",
    "transformer.layers",
    "backbone.layers",
)

# Attribute names of the final norm on the base module, tried in order.
FINAL_NORM_NAMES: tuple[str, ...] = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")


@dataclass(frozen=True)
class BlockLayout:
    """Validated location of a model's decoder blocks.

    Attributes:
        blocks_path: dotted path of the block ``ModuleList`` (e.g. ``model.layers``).
        final_norm_path: dotted path of the final norm, or ``None`` if the model has none found.
        n_blocks: number of decoder blocks L.
        d_model: width of the residual stream.
    """

    blocks_path: str
    final_norm_path: str | None
    n_blocks: int
    d_model: int

    @property
    def base_path(self) -> str:
        """Dotted path of the module that owns the blocks (run without the LM head)."""
        return self.blocks_path.rpartition(".")[0]


def get_submodule(root: Any, path: str) -> Any:
    """Resolve a dotted path (``""`` is ``root`` itself); raises AttributeError if absent."""
    module = root
    for part in filter(None, path.split(".")):
        module = module[int(part)] if part.isdigit() else getattr(module, part)
    return module


def block_output(output: Any) -> "torch.Tensor":
    """The hidden states of a block's forward output (a tensor, or the first tuple item)."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    hidden = getattr(output, "hidden_states", None)
    if isinstance(hidden, torch.Tensor):
        return hidden
    raise TypeError(f"cannot read hidden states from a block output of type {type(output).__name__}")


def block_input(args: tuple, kwargs: dict) -> "torch.Tensor":
    """The hidden states a block receives (first positional argument or ``hidden_states=``)."""
    if args:
        return args[0]
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"]
    raise TypeError("cannot find the hidden states among the block's inputs")


def forward_kwargs(module: Any, batch: dict[str, "torch.Tensor"]) -> dict[str, Any]:
    """The subset of ``batch`` (input_ids, attention_mask, position_ids) ``module`` accepts, plus
    ``use_cache=False`` where supported."""
    params = inspect.signature(module.forward).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    out: dict[str, Any] = {k: v for k, v in batch.items() if k in params or (accepts_any and k != "position_ids")}
    if "use_cache" in params:
        out["use_cache"] = False
    return out


def discover_layout(
    model: Any,
    probe_ids: "torch.Tensor",
    blocks_path: str | None = None,
    final_norm_path: str | None = None,
) -> BlockLayout:
    """Find and validate the block list and final norm of ``model``.

    Args:
        model: a loaded ``*ForCausalLM`` module (on its device).
        probe_ids: ``[1, seq]`` token ids for the validation forward (a few tokens suffice).
        blocks_path / final_norm_path: user overrides; when given, only they are tried.

    Raises:
        ArchitectureError: listing every path tried and why it failed.
    """
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if blocks_path is not None:
        candidates = [blocks_path]
    else:
        candidates = []
        if model_type in KNOWN_BLOCK_PATHS:
            candidates.append(KNOWN_BLOCK_PATHS[model_type])
        candidates += [p for p in GENERIC_BLOCK_PATHS if p not in candidates]
    expected_blocks = _configured_block_count(model)
    tried: list[str] = []
    for path in candidates:
        try:
            layout = _validate(model, path, final_norm_path, probe_ids, expected_blocks)
        except _CandidateRejected as why:
            tried.append(f"  {path}: {why}")
            continue
        logger.debug("decoder blocks at %s (%d blocks, d_model=%d)", path, layout.n_blocks, layout.d_model)
        return layout
    raise ArchitectureError(
        f"could not locate the decoder blocks of this {type(model).__name__} (model_type={model_type!r}). "
        "Tried:\n" + "\n".join(tried) + "\nPass the block list's dotted path with --blocks-path "
        "(model.blocks_path in YAML), e.g. 'model.layers', and the final norm's with --final-norm-path."
    )


class _CandidateRejected(Exception):
    pass


def _configured_block_count(model: Any) -> int | None:
    config = getattr(model, "config", None)
    if config is None:
        return None
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        value = getattr(text_config, attr, None)
        if isinstance(value, int):
            return value
    return None


def _validate(
    model: Any,
    path: str,
    final_norm_path: str | None,
    probe_ids: "torch.Tensor",
    expected_blocks: int | None,
) -> BlockLayout:
    import torch

    try:
        blocks = get_submodule(model, path)
    except (AttributeError, IndexError):
        raise _CandidateRejected("no such module") from None
    if not isinstance(blocks, torch.nn.ModuleList) or len(blocks) == 0:
        raise _CandidateRejected(f"is a {type(blocks).__name__}, not a non-empty ModuleList")
    if expected_blocks is not None and len(blocks) != expected_blocks:
        raise _CandidateRejected(f"has {len(blocks)} modules but the config says {expected_blocks} layers")
    base_path = path.rpartition(".")[0]
    base = get_submodule(model, base_path)
    if final_norm_path is None:
        norm_candidates = [f"{base_path}.{name}" if base_path else name for name in FINAL_NORM_NAMES]
    else:
        norm_candidates = [final_norm_path]
    norm_path = None
    for candidate in norm_candidates:
        try:
            get_submodule(model, candidate)
        except AttributeError:
            continue
        norm_path = candidate
        break
    if final_norm_path is not None and norm_path is None:
        raise _CandidateRejected(f"final norm path {final_norm_path!r} does not exist")

    fired: list[tuple[str, tuple[int, ...]]] = []
    handles = []

    def record(tag: str):
        def hook(_module: Any, _args: Any, output: Any) -> None:
            fired.append((tag, tuple(block_output(output).shape)))

        return hook

    try:
        for i, block in enumerate(blocks):
            handles.append(block.register_forward_hook(record(str(i))))
        if norm_path is not None:
            handles.append(get_submodule(model, norm_path).register_forward_hook(record("norm")))
        ids = probe_ids.to(input_device(model))
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        with torch.inference_mode():
            base(**forward_kwargs(base, batch))
    except Exception as err:  # noqa: BLE001 - any failure rejects this candidate, reported to the user
        raise _CandidateRejected(f"tiny forward failed: {type(err).__name__}: {err}") from None
    finally:
        for handle in handles:
            handle.remove()

    tags = [tag for tag, _ in fired]
    expected_tags = [str(i) for i in range(len(blocks))]
    block_shapes = [shape for tag, shape in fired if tag != "norm"]
    if [t for t in tags if t != "norm"] != expected_tags:
        raise _CandidateRejected(f"blocks did not each fire once in order (fired: {tags})")
    seq = probe_ids.shape[1]
    if any(len(s) != 3 or s[0] != 1 or s[1] != seq for s in block_shapes) or len({s[-1] for s in block_shapes}) != 1:
        raise _CandidateRejected(f"block outputs are not [batch, seq, d_model] (shapes: {block_shapes})")
    d_model = block_shapes[0][-1]
    if norm_path is not None:
        norm_fired = [shape for tag, shape in fired if tag == "norm"]
        if tags[-1:] != ["norm"] or len(norm_fired) != 1 or norm_fired[0] != block_shapes[-1]:
            if final_norm_path is not None:
                raise _CandidateRejected(f"final norm {final_norm_path!r} did not fire once after the last block")
            logger.warning(
                "module %s is not a final norm after the last block; 'final_norm' layer unavailable", norm_path
            )
            norm_path = None
    return BlockLayout(blocks_path=path, final_norm_path=norm_path, n_blocks=len(blocks), d_model=d_model)


def input_device(model: Any) -> "torch.device":
    """Device of the input embeddings (where token ids must go, also under a device map)."""
    import torch

    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    weight = getattr(embeddings, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.device.type != "meta":
        return weight.device
    for param in model.parameters():
        if param.device.type != "meta":
            return param.device
    return torch.device("cpu")
