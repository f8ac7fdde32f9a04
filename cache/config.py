"""Configuration of model loading and activation extraction (validated dataclasses).

YAML layout (every key optional except ``model.source``)::

    model:
      source: /path/to/checkpoint        # or model.gguf, an adapter directory, a hub id (Qwen/Qwen2.5-Math-1.5B)
      base: /path/to/base                # an adapter's base (default: its base_model_name_or_path)
      dtype: auto                        # auto | float32 | float16 | bfloat16
      device: auto                       # auto | cpu | cuda | cuda:1 | mps
    extraction:
      backend: hf                        # hf | transformer_lens | nnsight
      layers: all                        # all | "0,5,10" | [embed, all, final_norm]
      batch_size: 32
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from lara_core.configio import decode_prompt_texts, from_mapping, load_yaml

PROMPT_TEXT_KEYS = ("extraction.system_prompt",)  # "\n" is a newline, as on the command line (configio.prompt_text)
from .errors import ConfigError

DType = Literal["auto", "float32", "float16", "bfloat16"]
StorageDType = Literal["float32", "float16"]
PromptFormat = Literal["raw", "chat"]
PoolSpan = Literal["text", "all"]
OnLong = Literal["truncate", "error"]
PaddingSide = Literal["right", "left"]


@dataclass(frozen=True)
class ModelConfig:
    """Where the model comes from and how it is placed.

    Attributes:
        source: a checkpoint directory, a GGUF file, a PEFT adapter directory or a hub id (hub
            ids need network access or the local hub cache); SPEC §9, :mod:`cache.sources`.
        base: a PEFT adapter's base model (any source but an adapter); default: the adapter's
            own ``base_model_name_or_path``. Only for an adapter ``source``.
        revision: hub revision (branch, tag or commit); ignored for local directories.
        dtype: compute dtype; ``auto`` is float32 on CPU and the checkpoint's dtype elsewhere.
        device: ``auto`` picks cuda, then mps, then cpu.
        device_map: accelerate device map (e.g. ``auto``) for models that do not fit one
            device; exclusive with an explicit ``device``.
        gpus_per_rank: a model larger than one GPU under torchrun: each process spreads it
            (``device_map`` auto) over its own share of the node's GPUs, local rank r taking GPUs
            r·g … r·g+g−1; without a launcher, GPUs 0 … g−1. Exclusive with ``device``/``device_map``.
        trust_remote_code: run code shipped with the checkpoint; off unless asked for.
        attn_implementation: transformers attention kernel (``sdpa``, ``eager``...); ``None``
            keeps the library default.
        blocks_path: dotted path of the decoder-block list (e.g. ``model.layers``) when the
            architecture table does not know the model.
        final_norm_path: dotted path of the final norm module, with ``blocks_path``.
    """

    source: str
    base: str | None = None
    revision: str | None = None
    dtype: DType = "auto"
    device: str = "auto"
    device_map: str | None = None
    gpus_per_rank: int | None = None
    trust_remote_code: bool = False
    attn_implementation: str | None = None
    blocks_path: str | None = None
    final_norm_path: str | None = None

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ConfigError(
                "model.source is empty: give a checkpoint directory, a .gguf file, an adapter or a hub id"
            )
        if self.base is not None and not self.base.strip():
            raise ConfigError("model.base is empty: give the adapter's base model, or drop the key")
        if self.device_map is not None and self.device != "auto":
            raise ConfigError("set either model.device or model.device_map, not both")
        if self.gpus_per_rank is not None:
            if self.gpus_per_rank < 1:
                raise ConfigError(f"model.gpus_per_rank must be at least 1, got {self.gpus_per_rank}")
            if self.device != "auto" or self.device_map is not None:
                raise ConfigError(
                    "model.gpus_per_rank places the model itself (a device map over the rank's GPUs): "
                    "leave model.device and model.device_map unset"
                )
        if self.final_norm_path is not None and self.blocks_path is None:
            raise ConfigError("model.final_norm_path needs model.blocks_path as well")


@dataclass(frozen=True)
class ExtractionConfig:
    """How texts become pooled per-layer activations (SPEC §0, §2).

    Attributes:
        backend: extraction backend name (see ``cache.backends.BACKENDS``).
        layers: layer selection: ``all`` (every block), block indices (negative counts from the
            end), ``embed`` (embedding output) and ``final_norm`` (final-normed last layer).
        pool_span: ``text`` pools the text's own tokens only; ``all`` also pools BOS and
            chat-template tokens.
        prompt_format: ``raw`` feeds the text as is; ``chat`` wraps it as a user turn of the
            tokenizer's chat template (the pooled span is still the text itself).
        system_prompt: system turn for ``chat`` formatting.
        add_generation_prompt: append the assistant header for ``chat`` formatting.
        batch_size: most texts per forward pass.
        max_batch_tokens: most padded tokens (batch × longest) per forward pass; ``None`` picks
            per device (:func:`cache.batching.default_batch_tokens`).
        max_length: token limit per text; ``None`` uses the model's context length.
        on_long: ``truncate`` cuts texts over the limit (counted, flagged per row) or ``error``
            refuses them.
        padding_side: where batches are padded; results do not depend on it.
        storage_dtype: dtype of the stored rows (pooling is always float32).
        flush_every: rows buffered before they are committed to disk.
    """

    backend: str = "hf"
    layers: tuple[str | int, ...] = ("all",)
    pool_span: PoolSpan = "text"
    prompt_format: PromptFormat = "raw"
    system_prompt: str | None = None
    add_generation_prompt: bool = True
    batch_size: int = 32
    max_batch_tokens: int | None = None
    max_length: int | None = None
    on_long: OnLong = "truncate"
    padding_side: PaddingSide = "right"
    storage_dtype: StorageDType = "float32"
    flush_every: int = 256

    def __post_init__(self) -> None:
        tokens: list[str] = []
        raw = (self.layers,) if isinstance(self.layers, (str, int)) else self.layers
        for item in raw:
            parts = item.split(",") if isinstance(item, str) else [str(item)]
            tokens.extend(p.strip() for p in parts if p.strip())
        if not tokens:
            raise ConfigError("extraction.layers is empty: use 'all' or a list such as '0,5,10'")
        object.__setattr__(self, "layers", tuple(tokens))
        for name in ("batch_size", "max_batch_tokens", "flush_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"extraction.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError(f"extraction.max_length must be >= 1, got {self.max_length}")


@dataclass(frozen=True)
class CacheConfig:
    """Model plus extraction settings: everything that decides the numbers in a cache file."""

    model: ModelConfig
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CacheConfig":
        return from_mapping(cls, data)

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> "CacheConfig":
        """Load a YAML file; ``overrides`` (e.g. from CLI flags) win over the file per key."""
        data = decode_prompt_texts(load_yaml(path), PROMPT_TEXT_KEYS)
        return cls.from_dict(merge_sections(data, overrides or {}))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def merge_sections(base: Mapping[str, Any], overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Merge ``{section: {key: value}}`` overrides into a config mapping (one level deep)."""
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for section, values in overrides.items():
        if not values:
            continue
        current = merged.get(section)
        if current is None:
            current = {}
        if not isinstance(current, dict):
            raise ConfigError(f"config section '{section}' must be a mapping")
        current.update(values)
        merged[section] = current
    return merged
