"""``lara cache``: pool per-layer activations of texts into an HDF5 store."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from cache.backends import BACKENDS
from cache.config import PROMPT_TEXT_KEYS, CacheConfig, ExtractionConfig, ModelConfig, merge_sections
from cache.errors import ConfigError
from cache.runner import run_cache
from cache.texts import read_texts
from generation.records import read_sets
from lara_core.configio import decode_prompt_texts, literal_choices, load_yaml, prompt_text

from ..lara.sets import distinct_texts, looks_like_sets
from ._common import add_model_placement, command_parser, quiet_library_progress_bars

logger = logging.getLogger(__name__)


CACHE_EXAMPLES = """examples:
  lara cache sets.jsonl --model ./checkpoints/qwen-rl -o acts.h5      # every text of the perturbation sets
  lara cache texts.jsonl --model ./checkpoints/qwen-rl -o acts.h5
  lara cache texts.txt --model Qwen/Qwen2.5-Math-1.5B --device cuda --dtype bfloat16 \\
      --backend hf --layers all,embed -o acts.h5
  lara cache texts.jsonl --config configs/cache.example.yaml -o acts.h5 --batch-size 64
"""


def register(sub: Any) -> None:
    cache = command_parser(sub, "cache", "pool per-layer activations of texts into an HDF5 store", CACHE_EXAMPLES)
    cache.add_argument(
        "texts",
        type=Path,
        help="texts: .txt (one per line), .jsonl ('text' field or JSON strings), or a perturbation-set file (all its texts)",
    )
    cache.add_argument("-o", "--output", type=Path, required=True, help="HDF5 store to create or append to")
    cache.add_argument("--config", type=Path, help="YAML config (sections model:, extraction:); flags override it")
    cache.add_argument("--text-field", default="text", help="JSONL key holding the text (default: text)")
    cache.add_argument("--no-progress", action="store_true", help="no progress bar")
    model = cache.add_argument_group("model")
    model.add_argument("--model", dest="source", help="checkpoint directory, .gguf file, PEFT adapter or hub id")
    model.add_argument("--base", help="a PEFT adapter's base (default: the adapter's base_model_name_or_path)")
    model.add_argument("--revision", help="hub revision (branch, tag, commit)")
    model.add_argument("--dtype", choices=literal_choices(ModelConfig, "dtype"), help="compute dtype (default: auto)")
    model.add_argument("--device", help="auto | cpu | cuda | cuda:N | mps (default: auto)")
    model.add_argument("--device-map", help="accelerate device map, e.g. auto (instead of --device)")
    add_model_placement(model)
    model.add_argument("--attn-implementation", help="transformers attention kernel (sdpa, eager, ...)")
    model.add_argument("--blocks-path", help="dotted path of the decoder block list, e.g. model.layers")
    model.add_argument("--final-norm-path", help="dotted path of the final norm, e.g. model.norm")
    ext = cache.add_argument_group("extraction")
    ext.add_argument("--backend", choices=list(BACKENDS), help="extraction backend (default: hf)")
    ext.add_argument("--layers", help="all | 0,5,10 | embed,all,final_norm | -1 (default: all)")
    ext.add_argument("--batch-size", type=int, help="texts per forward pass (default: 32)")
    ext.add_argument(
        "--max-batch-tokens", type=int, help="padded tokens per forward pass (default: 2048 on CPU, 16384 on GPU)"
    )
    ext.add_argument("--max-length", type=int, help="token limit per text (default: the model's context)")
    ext.add_argument(
        "--on-long",
        choices=literal_choices(ExtractionConfig, "on_long"),
        help="texts over the limit (default: truncate)",
    )
    ext.add_argument(
        "--prompt-format",
        choices=literal_choices(ExtractionConfig, "prompt_format"),
        help="raw text or chat template (default: raw)",
    )
    ext.add_argument("--system-prompt", type=prompt_text, help="system turn for --prompt-format chat (\\n: a newline)")
    ext.add_argument(
        "--pool-span",
        choices=literal_choices(ExtractionConfig, "pool_span"),
        help="text: the text's tokens only; all: also BOS/template",
    )
    ext.add_argument("--padding-side", choices=literal_choices(ExtractionConfig, "padding_side"))
    ext.add_argument(
        "--storage-dtype",
        choices=literal_choices(ExtractionConfig, "storage_dtype"),
        help="dtype of stored rows (default: float32)",
    )
    ext.add_argument("--flush-every", type=int, help="rows buffered before a crash-safe commit (default: 256)")
    cache.set_defaults(handler=handle)


_MODEL_FLAGS = (
    "source",
    "base",
    "revision",
    "dtype",
    "device",
    "device_map",
    "gpus_per_rank",
    "trust_remote_code",
    "attn_implementation",
    "blocks_path",
    "final_norm_path",
)
_EXTRACTION_FLAGS = (
    "backend",
    "layers",
    "batch_size",
    "max_batch_tokens",
    "max_length",
    "on_long",
    "prompt_format",
    "system_prompt",
    "pool_span",
    "padding_side",
    "storage_dtype",
    "flush_every",
)


def cache_config_from_args(args: argparse.Namespace) -> Any:
    """A CacheConfig from ``--config`` (if any) with the explicitly given flags on top."""

    overrides = {
        "model": {k: getattr(args, k) for k in _MODEL_FLAGS if getattr(args, k) is not None},
        "extraction": {k: getattr(args, k) for k in _EXTRACTION_FLAGS if getattr(args, k) is not None},
    }
    base = decode_prompt_texts(load_yaml(args.config), PROMPT_TEXT_KEYS) if args.config else {}
    merged = merge_sections(base, overrides)
    if not (merged.get("model") or {}).get("source"):
        raise ConfigError("give the model with --model DIR (or model.source in --config)")
    return CacheConfig.from_dict(merged)


def handle(args: argparse.Namespace) -> int:
    quiet_library_progress_bars(args.verbose)
    config = cache_config_from_args(args)
    texts = _texts_to_cache(args.texts, args.text_field)
    summary = run_cache(texts, args.output, config, progress=not args.no_progress)
    if int(os.environ.get("RANK", "0")) == 0:  # one summary per job under torchrun
        print(summary.describe())
    return 0


def _texts_to_cache(path: Path, field: str) -> list[str]:
    """The texts of a texts file, or every text of a perturbation-set file (lara generate output)."""

    if path.suffix.lower() == ".jsonl" and looks_like_sets(path):
        sets = read_sets(path)
        texts = distinct_texts(sets)
        logger.info("%s: %d perturbation sets, %d distinct texts", path, len(sets), len(texts))
        return texts
    return read_texts(path, field=field)
