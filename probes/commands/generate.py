"""``lara generate``: perturbation sets (similar questions, [BLANK]ed variants, paraphrases)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generation.config import GenerationConfig
from generation.pipeline import run_generation
from generation.records import read_questions

from ._common import add_setting, command_parser

GENERATE_EXAMPLES = """examples:
  lara generate questions.jsonl -o sets.jsonl                      # offline, deterministic
  lara generate questions.jsonl -o sets.jsonl -K 8 -M 3 --seed 1
  OPENROUTER_API_KEY=... lara generate questions.jsonl -o sets.jsonl \\
      --config configs/generation.openrouter.yaml                  # the LaRA paper's setup
  lara generate questions.jsonl -o sets.jsonl --backend openai \\
      --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct   # a local vLLM server
"""

_GENERATE_FLAGS = ("backend", "similars", "paraphrases", "blanks", "seed", "controls")
_OPENAI_FLAGS = ("model", "base_url", "concurrency", "cache_dir")

GENERATE_HELP = "build perturbation sets (similar questions, [BLANK]ed variants, paraphrases) of questions"


def register(sub: Any) -> None:
    gen = command_parser(sub, "generate", GENERATE_HELP, GENERATE_EXAMPLES)
    gen.add_argument(
        "questions", type=Path, help='questions JSONL: one {"id", "question", ["label", ...]} object per line'
    )
    gen.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="perturbation sets JSONL (resumed if it or its .partial journal exists)",
    )
    gen.add_argument("--config", type=Path, help="YAML config (see configs/generation.*.yaml); flags override it")
    add_setting(
        gen,
        "--backend",
        GenerationConfig,
        "backend",
        "offline (default, deterministic), openai (any OpenAI-compatible endpoint) or local (a model in this process)",
        default=False,
    )
    gen.add_argument("-K", "--similars", type=int, help="similar questions per question (default: 5)")
    gen.add_argument("-M", "--paraphrases", type=int, help="paraphrases per blanked variant (default: 5)")
    gen.add_argument("--blanks", type=int, help="[BLANK] markers per blanked variant (default: 1)")
    gen.add_argument("--seed", type=int, help="seed of the offline draws and of the LLM requests (default: 0)")
    gen.add_argument(
        "--controls",
        type=int,
        help="further similar questions per question drawn only as matched controls, "
        "no blanks or paraphrases (for lara detect --decision-controls; default: 0)",
    )
    gen.add_argument(
        "--model", help="the generator model: its name at the endpoint (openai), or its directory or .gguf file (local)"
    )
    gen.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. https://openrouter.ai/api/v1")
    gen.add_argument("--concurrency", type=int, help="LLM requests in flight (default: 8)")
    gen.add_argument("--cache-dir", help="LLM response cache directory (default: ~/.cache/lara-probes/llm-cache)")
    gen.add_argument(
        "--overwrite", action="store_true", help="discard an existing output or journal made with other settings"
    )
    gen.add_argument("--no-progress", action="store_true", help="no progress bar")
    gen.set_defaults(handler=handle)


def generation_config_from_args(args: argparse.Namespace) -> Any:
    """A GenerationConfig from ``--config`` (if any) with the explicitly given flags on top."""

    data: dict[str, Any] = GenerationConfig.from_yaml(args.config).to_dict() if args.config else {}
    data.update({k: getattr(args, k) for k in _GENERATE_FLAGS if getattr(args, k) is not None})
    openai_flags = {k: getattr(args, k) for k in _OPENAI_FLAGS if getattr(args, k) is not None}
    if data.get("backend") == "local" and "model" in openai_flags:  # --model names the local model
        data["local"] = {**data.get("local", {}), "model": openai_flags.pop("model")}
    if openai_flags:
        data["openai"] = {**data.get("openai", {}), **openai_flags}
    return GenerationConfig.from_dict(data)


def handle(args: argparse.Namespace) -> int:
    from cache.outputs import check_writable  # lazy: pulls h5py

    config = generation_config_from_args(args)
    questions = read_questions(args.questions)
    check_writable(args.output, "perturbation-set file")  # before any request is sent
    summary = run_generation(questions, args.output, config, progress=not args.no_progress, overwrite=args.overwrite)
    print(summary.describe())
    return 0
