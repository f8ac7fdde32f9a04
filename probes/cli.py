"""The ``lara`` command line.

Subcommands import their heavy modules only when they run; ``main`` takes ``argv`` so tests
call it directly. User errors (bad input, config, model, mismatched cache) print one message
and exit with status 2; ``--debug`` shows the traceback as well.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, Sequence

from cache.backends import BACKENDS
from cache.config import ExtractionConfig, ModelConfig
from cache.configio import literal_choices
from cache.errors import CacheError, ConfigError
from generation.errors import GenerationError

logger = logging.getLogger("probes.cli")

CACHE_EXAMPLES = """examples:
  lara cache texts.jsonl --model ./checkpoints/qwen-rl -o acts.h5
  lara cache texts.txt --model Qwen/Qwen2.5-Math-1.5B --device cuda --dtype bfloat16 \\
      --backend hf --layers all,embed -o acts.h5
  lara cache texts.jsonl --config configs/cache.example.yaml -o acts.h5 --batch-size 64
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    _configure_logging(args.verbose, args.quiet)
    try:
        return int(args.handler(args) or 0)
    except (CacheError, GenerationError) as err:
        if args.debug:
            logger.exception("failed")
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished rows are kept and the next run resumes from them", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lara",
        description="LaRA Probes: audit an RL-post-trained language model for benchmark contamination.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of user errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="cache activations of built-in questions on the built-in tiny model")
    demo.add_argument("-o", "--out", type=Path, default=Path("lara-demo"), help="output directory (default: ./lara-demo)")
    demo.add_argument("--backend", choices=list(BACKENDS), default="hf")
    demo.add_argument("--no-progress", action="store_true")
    demo.set_defaults(handler=_run_demo)

    cache = sub.add_parser(
        "cache",
        help="pool per-layer activations of texts into an HDF5 store",
        epilog=CACHE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cache.add_argument("texts", type=Path, help="texts: .txt (one per line) or .jsonl ('text' field or JSON strings)")
    cache.add_argument("-o", "--output", type=Path, required=True, help="HDF5 store to create or append to")
    cache.add_argument("--config", type=Path, help="YAML config (sections model:, extraction:); flags override it")
    cache.add_argument("--text-field", default="text", help="JSONL key holding the text (default: text)")
    cache.add_argument("--no-progress", action="store_true", help="no progress bar")
    model = cache.add_argument_group("model")
    model.add_argument("--model", dest="source", help="checkpoint directory or hub id")
    model.add_argument("--revision", help="hub revision (branch, tag, commit)")
    model.add_argument("--dtype", choices=literal_choices(ModelConfig, "dtype"), help="compute dtype (default: auto)")
    model.add_argument("--device", help="auto | cpu | cuda | cuda:N | mps (default: auto)")
    model.add_argument("--device-map", help="accelerate device map, e.g. auto (instead of --device)")
    model.add_argument("--trust-remote-code", action="store_true", default=None, help="run code shipped with the checkpoint")
    model.add_argument("--attn-implementation", help="transformers attention kernel (sdpa, eager, ...)")
    model.add_argument("--blocks-path", help="dotted path of the decoder block list, e.g. model.layers")
    model.add_argument("--final-norm-path", help="dotted path of the final norm, e.g. model.norm")
    ext = cache.add_argument_group("extraction")
    ext.add_argument("--backend", choices=list(BACKENDS), help="extraction backend (default: hf)")
    ext.add_argument("--layers", help="all | 0,5,10 | embed,all,final_norm | -1 (default: all)")
    ext.add_argument("--batch-size", type=int, help="texts per forward pass (default: 32)")
    ext.add_argument("--max-batch-tokens", type=int, help="padded tokens per forward pass (default: 2048 on CPU, 16384 on GPU)")
    ext.add_argument("--max-length", type=int, help="token limit per text (default: the model's context)")
    ext.add_argument("--on-long", choices=literal_choices(ExtractionConfig, "on_long"), help="texts over the limit (default: truncate)")
    ext.add_argument("--prompt-format", choices=literal_choices(ExtractionConfig, "prompt_format"), help="raw text or chat template (default: raw)")
    ext.add_argument("--system-prompt", help="system turn for --prompt-format chat")
    ext.add_argument("--pool-span", choices=literal_choices(ExtractionConfig, "pool_span"), help="text: the text's tokens only; all: also BOS/template")
    ext.add_argument("--padding-side", choices=literal_choices(ExtractionConfig, "padding_side"))
    ext.add_argument("--storage-dtype", choices=literal_choices(ExtractionConfig, "storage_dtype"), help="dtype of stored rows (default: float32)")
    ext.add_argument("--flush-every", type=int, help="rows buffered before a crash-safe commit (default: 256)")
    cache.set_defaults(handler=_run_cache)

    gen = sub.add_parser(
        "generate",
        help="build perturbation sets (similar questions, [BLANK]ed variants, paraphrases) of questions",
        epilog=GENERATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gen.add_argument("questions", type=Path, help="questions JSONL: one {\"id\", \"question\", [\"label\", ...]} object per line")
    gen.add_argument("-o", "--output", type=Path, required=True, help="perturbation sets JSONL (resumed if it or its .partial journal exists)")
    gen.add_argument("--config", type=Path, help="YAML config (see configs/generation.*.yaml); flags override it")
    gen.add_argument("--backend", choices=["offline", "openai"], help="offline (default, deterministic) or openai (any OpenAI-compatible endpoint)")
    gen.add_argument("-K", "--similars", type=int, help="similar questions per question (default: 5)")
    gen.add_argument("-M", "--paraphrases", type=int, help="paraphrases per blanked variant (default: 5)")
    gen.add_argument("--blanks", type=int, help="[BLANK] markers per blanked variant (default: 1)")
    gen.add_argument("--seed", type=int, help="seed of the offline draws and of the LLM requests (default: 0)")
    gen.add_argument("--model", help="LLM model name (openai backend)")
    gen.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. https://openrouter.ai/api/v1")
    gen.add_argument("--concurrency", type=int, help="LLM requests in flight (default: 8)")
    gen.add_argument("--cache-dir", help="LLM response cache directory (default: ~/.cache/lara-probes/llm-cache)")
    gen.add_argument("--overwrite", action="store_true", help="discard an existing output or journal made with other settings")
    gen.add_argument("--no-progress", action="store_true", help="no progress bar")
    gen.set_defaults(handler=_run_generate)

    info = sub.add_parser("info", help="show what an activation store holds and how it was made")
    info.add_argument("store", type=Path)
    info.set_defaults(handler=_run_info)
    return parser


GENERATE_EXAMPLES = """examples:
  lara generate questions.jsonl -o sets.jsonl                      # offline, deterministic
  lara generate questions.jsonl -o sets.jsonl -K 8 -M 3 --seed 1
  OPENROUTER_API_KEY=... lara generate questions.jsonl -o sets.jsonl \\
      --config configs/generation.openrouter.yaml                  # the LaRA paper's setup
  lara generate questions.jsonl -o sets.jsonl --backend openai \\
      --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct   # a local vLLM server
"""

_GENERATE_FLAGS = ("backend", "similars", "paraphrases", "blanks", "seed")
_OPENAI_FLAGS = ("model", "base_url", "concurrency", "cache_dir")


def generation_config_from_args(args: argparse.Namespace) -> Any:
    """A GenerationConfig from ``--config`` (if any) with the explicitly given flags on top."""
    from generation.config import GenerationConfig

    data: dict[str, Any] = GenerationConfig.from_yaml(args.config).to_dict() if args.config else {}
    data.update({k: getattr(args, k) for k in _GENERATE_FLAGS if getattr(args, k) is not None})
    openai_flags = {k: getattr(args, k) for k in _OPENAI_FLAGS if getattr(args, k) is not None}
    if openai_flags:
        data["openai"] = {**data.get("openai", {}), **openai_flags}
    return GenerationConfig.from_dict(data)


def _run_generate(args: argparse.Namespace) -> int:
    from generation.pipeline import run_generation
    from generation.records import read_questions

    config = generation_config_from_args(args)
    questions = read_questions(args.questions)
    summary = run_generation(questions, args.output, config, progress=not args.no_progress, overwrite=args.overwrite)
    print(summary.describe())
    return 0


_MODEL_FLAGS = ("source", "revision", "dtype", "device", "device_map", "trust_remote_code", "attn_implementation", "blocks_path", "final_norm_path")
_EXTRACTION_FLAGS = (
    "backend", "layers", "batch_size", "max_batch_tokens", "max_length", "on_long", "prompt_format",
    "system_prompt", "pool_span", "padding_side", "storage_dtype", "flush_every",
)


def cache_config_from_args(args: argparse.Namespace) -> Any:
    """A CacheConfig from ``--config`` (if any) with the explicitly given flags on top."""
    from cache.config import CacheConfig, merge_sections
    from cache.configio import load_yaml

    overrides = {
        "model": {k: getattr(args, k) for k in _MODEL_FLAGS if getattr(args, k) is not None},
        "extraction": {k: getattr(args, k) for k in _EXTRACTION_FLAGS if getattr(args, k) is not None},
    }
    base = load_yaml(args.config) if args.config else {}
    merged = merge_sections(base, overrides)
    if not (merged.get("model") or {}).get("source"):
        raise ConfigError("give the model with --model DIR (or model.source in --config)")
    return CacheConfig.from_dict(merged)


def _run_cache(args: argparse.Namespace) -> int:
    from cache.runner import run_cache
    from cache.texts import read_texts

    _quiet_library_progress_bars(args.verbose)
    config = cache_config_from_args(args)
    texts = read_texts(args.texts, field=args.text_field)
    summary = run_cache(texts, args.output, config, progress=not args.no_progress)
    print(summary.describe())
    return 0


def _run_info(args: argparse.Namespace) -> int:
    from cache.store import ActivationStore

    store = ActivationStore(args.store)
    p = store.provenance
    model = p.get("model", {})
    rows = [
        ("rows", f"{len(store)} texts x {len(store.layer_labels)} layers x d={store.d_model} ({store.storage_dtype})"),
        ("layers", ", ".join(store.layer_labels)),
        ("model", f"{model.get('source')} ({model.get('class')}, {model.get('n_blocks')} blocks)"),
        ("weights", f"{p.get('weights_fingerprint')} ({p.get('fingerprint_method')})"),
        ("tokenizer", p.get("tokenizer_fingerprint")),
        ("backend", f"{p.get('backend')} {p.get('backend_flags')}"),
        ("pooling", f"{p.get('pooling')}; prompt {p.get('prompt')}"),
        ("dtype", f"compute {p.get('compute_dtype')}, storage {p.get('storage_dtype')}"),
        ("written", f"{p.get('created_at')} by lara-probes {p.get('toolkit_version')} (schema {p.get('schema_version')})"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    _quiet_library_progress_bars(args.verbose)
    print(run_demo(args.out, backend=args.backend, progress=not args.no_progress))
    return 0


def _quiet_library_progress_bars(verbose: bool) -> None:
    """Hide transformers' weight-loading bars (ours shows the extraction) unless verbose."""
    if not verbose:
        import transformers.utils.logging

        transformers.utils.logging.disable_progress_bar()


def _configure_logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpx2", "httpcore", "openai", "transformers", "transformer_lens", "nnsight", "filelock", "urllib3"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
