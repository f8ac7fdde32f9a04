"""PEFT adapters: checked against their base before any weight is read, merged on load (SPEC §9).

An adapter trained on another base (another architecture, or the same one at another width) is
refused by comparing every adapter tensor's shape with the module it adapts, in a skeleton of the
base built on the ``meta`` device from its config alone (no weights, a second or two). Merging
(``PeftModel.merge_and_unload``) gives a plain model, so the hf, TransformerLens and nnsight
backends, the detectors and LaRA's pooling all see what the adapted model computes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

from .errors import ModelLoadError
from .gguf import MARKER, converted_dir, exclusive, is_converted, save_checkpoint
from .source_record import ADAPTER_WEIGHTS, ModelSource, require
from .toymodels import default_home

logger = logging.getLogger(__name__)

# base_model.model.<module>.lora_A[.default].weight -> (<module>, A|B|embedding_A|embedding_B)
_LORA = re.compile(
    r"^(?:base_model\.model\.)?(?P<module>.+?)\.lora_(?P<part>A|B|embedding_A|embedding_B)(?:\.\w+)?\.weight$"
)


def adapter_shapes(adapter_dir: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape in the adapter's weights file, read from its header."""
    for name in ADAPTER_WEIGHTS:
        path = adapter_dir / name
        if not path.is_file():
            continue
        if name.endswith(".safetensors"):
            from safetensors import safe_open  # lazy: safetensors

            with safe_open(str(path), framework="pt") as f:
                return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}
        import torch  # lazy: torch

        state = torch.load(path, map_location="meta", weights_only=True)
        return {key: tuple(value.shape) for key, value in state.items()}
    raise ModelLoadError(f"the adapter {str(adapter_dir)!r} has no {' or '.join(ADAPTER_WEIGHTS)}")


def base_config(base: ModelSource) -> Any:
    """The ``PretrainedConfig`` of a base source, read without its weights (None when it cannot be
    read here: loading the base reports why)."""
    from transformers import AutoConfig  # lazy: transformers

    if base.kind == "adapter":  # an adapter on an adapter: the innermost full model's config
        assert base.base is not None
        return base_config(base.base)
    try:
        if base.kind == "gguf":
            converted = converted_dir(str(base.digest))
            if is_converted(converted, str(base.digest)):
                return AutoConfig.from_pretrained(converted, local_files_only=True)
            path = Path(base.location)
            return AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
        kwargs = {"revision": base.revision} if base.kind == "hub" and base.revision else {}
        return AutoConfig.from_pretrained(base.location, local_files_only=base.local_files_only, **kwargs)
    except Exception as err:  # noqa: BLE001
        logger.debug("cannot read the config of %s without loading it: %s", base.spec, err)
        return None


def check_adapter_fits(adapter: ModelSource, base_config: Any) -> None:
    """Refuse an adapter whose tensors do not fit the base: a module it adapts is missing, or its
    shape differs.

    Args:
        adapter: the adapter's source.
        base_config: the base's ``PretrainedConfig``.

    Raises:
        ModelLoadError: one line naming the first module that does not fit and what to do.
    """
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM

    if base_config is None:
        return
    try:
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(base_config)
    except Exception as err:  # noqa: BLE001 - the base's own loading reports it, with what to do
        logger.debug("no meta skeleton of the base (%s); the adapter's fit is checked on load", err)
        return
    modules = dict(skeleton.named_modules())
    base = adapter.base.describe() if adapter.base else "its base"
    kind = getattr(base_config, "model_type", "?")
    for name, shape in sorted(adapter_shapes(Path(adapter.location)).items()):
        match = _LORA.match(name)
        if match is None:
            continue
        module_name, part = match.group("module"), match.group("part")
        module = modules.get(module_name)
        if module is None:
            raise ModelLoadError(
                f"the adapter {adapter.spec!r} adapts {module_name}, which the base {base} (a {kind} model) does not "
                "have: it was trained on a base of another architecture; give its own base with model.base (--base)"
            )
        expected = _expected(module, part, shape)
        if expected is not None and expected != shape[1 if part in ("A", "embedding_A") else 0]:
            side = "input" if part in ("A", "embedding_A") else "output"
            raise ModelLoadError(
                f"the adapter {adapter.spec!r} does not fit the base {base}: {module_name} has {side} width "
                f"{expected} there but {shape[1 if side == 'input' else 0]} in the adapter, so it was trained on a "
                "base of another shape; give its own base with model.base (--base)"
            )


def _expected(module: Any, part: str, shape: tuple[int, ...]) -> int | None:
    """The width the adapter's ``part`` must have on ``module`` (input for A, output for B)."""
    weight = getattr(module, "weight", None)
    if weight is None or len(shape) != 2:
        return None
    if hasattr(module, "in_features") and hasattr(module, "out_features"):  # nn.Linear
        sizes = {"A": module.in_features, "B": module.out_features}
    elif hasattr(module, "num_embeddings"):  # nn.Embedding: lora_embedding_A [r, vocab], _B [dim, r]
        sizes = {"embedding_A": module.num_embeddings, "embedding_B": module.embedding_dim}
    elif type(module).__name__ == "Conv1D":  # GPT-2's: weight [in, out]
        sizes = {"A": weight.shape[0], "B": weight.shape[1]}
    else:
        return None
    return sizes.get(part)


def merge_adapters(model: Any, adapter: ModelSource) -> Any:
    """``model`` (the innermost full base, loaded) with ``adapter`` merged in, after the adapters
    it stands on (an RL adapter on an SFT one: the SFT one first)."""
    if adapter.base is not None and adapter.base.kind == "adapter":
        model = merge_adapters(model, adapter.base)
    return merge_adapter(model, adapter)


def merge_adapter(model: Any, adapter: ModelSource) -> Any:
    """``model`` (the adapter's base, loaded) with the adapter merged into its weights."""
    require("peft", f"the model {adapter.spec!r} is a PEFT adapter")
    from peft import PeftModel  # lazy: peft

    try:
        peft_model = PeftModel.from_pretrained(model, adapter.location, is_trainable=False)
        merged = peft_model.merge_and_unload()
    except Exception as err:  # noqa: BLE001 - re-raised with the adapter named
        raise ModelLoadError(f"cannot apply the adapter {adapter.spec!r}: {type(err).__name__}: {err}") from err
    merged.eval()
    merged.requires_grad_(False)
    return merged


def merged_dir(adapter: ModelSource, root: Path | None = None) -> Path:
    """Where a merged copy of ``adapter`` on its base is kept (for engines that read a directory),
    keyed by the adapters' digests and each checkpoint base's weight files (names, sizes, times:
    a base retrained in place gets a new copy)."""
    bases = [_weight_files_stat(Path(s.location)) for s in adapter.chain() if s.kind == "checkpoint"]
    blob = json.dumps({"identity": adapter.identity(), "bases": bases}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()
    return (root if root is not None else default_home() / "merged") / key


def _weight_files_stat(directory: Path) -> list[list]:
    return [
        [p.name, p.stat().st_size, p.stat().st_mtime_ns]
        for p in sorted(directory.iterdir())
        if p.suffix in (".safetensors", ".bin") or p.name.endswith(".index.json")
    ]


def merged_checkpoint(adapter: ModelSource, model: Any, tokenizer: Any, root: Path | None = None) -> Path:
    """A checkpoint directory holding ``model`` (the merged adapter, loaded) and its tokenizer,
    written once per adapter identity (for vLLM, which serves a directory)."""
    target = merged_dir(adapter, root)
    if (target / MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(target.with_name(target.name + ".lock")):  # one process writes it
        if not (target / MARKER).is_file():
            save_checkpoint(model, tokenizer, target, adapter.identity())
    return target
