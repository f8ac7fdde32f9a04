"""The ``lara`` command line.

Subcommands import their heavy modules only when they run; ``main`` takes ``argv`` so tests
call it directly. User errors (bad input, config, model, mismatched cache) print one message
and exit with status 2; ``--debug`` shows the traceback as well.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, Sequence

from cache.backends import BACKENDS
from cache.config import ExtractionConfig, ModelConfig
from cache.configio import literal_choices
from cache.errors import CacheError, ConfigError
from generation.errors import GenerationError

from .errors import ProbesError

logger = logging.getLogger("probes.cli")

MAIN_EXAMPLES = """examples:
  lara demo                                             # the testbed's RL checkpoint and its SFT control, end to end
  lara run configs/demo.yaml --set generation.similars=3
  lara run configs/eurus-2-7b-prime.yaml                # the LaRA paper's setup (GPU, OpenRouter key)
  lara testbed build --out testbed/ --preset cpu --seed 0
  lara detect ppl,cdd questions.jsonl --model ./checkpoints/rl -o scores.csv
  lara COMMAND --help                                   # each command's options and examples
"""

RUN_EXAMPLES = """examples:
  lara run configs/demo.yaml                                     # stages already done are skipped
  lara run configs/demo.yaml --set generation.similars=3         # redoes generate and what depends on it
  lara run configs/demo.yaml --set detect.names=[ppl,cdd] --set run_dir=runs/quick
  lara run audit.yaml --set model.source=/models/my-rl-ckpt --set model.dtype=bfloat16

A run directory holds config.resolved.yaml, run.log, ledger/ (stage records), sets.jsonl and, per
model, acts.h5, metrics.h5, lara.csv, detectors.csv, scores.csv and report/. Kill it at any point
and run the same command again: finished stages are skipped, the stage in flight resumes.
"""

TESTBED_EXAMPLES = """examples:
  lara testbed build --out testbed-smoke --preset smoke            # under a minute; plumbing only
  lara testbed build --out testbed-cpu --preset cpu --seed 0       # rebuilds the shipped demo checkpoints
  lara testbed build --out testbed-gpu --preset gpu --device cuda
"""

CACHE_EXAMPLES = """examples:
  lara cache sets.jsonl --model ./checkpoints/qwen-rl -o acts.h5      # every text of the perturbation sets
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
    except (CacheError, GenerationError, ProbesError) as err:
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
        epilog=MAIN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of user errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="the whole audit from one YAML config: generate, cache, LaRA, detectors, fusion, report",
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("config", type=Path, help="run config (YAML; see configs/demo.yaml)")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key by its dotted path, repeatable (value read as YAML)")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.set_defaults(handler=_run_run)

    demo = sub.add_parser("demo", help="the main job on the built-in default: lara run configs/demo.yaml",
                          epilog="examples:\n  lara demo\n  lara demo --set detect.names=[ppl,cdd] --set run_dir=runs/quick\n",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="as for lara run")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(handler=_run_demo)

    testbed = sub.add_parser("testbed", help="build a small causal LM with a known RL (GRPO) training set",
                             epilog=TESTBED_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    testbed_sub = testbed.add_subparsers(dest="testbed_command", required=True, metavar="ACTION")
    build = testbed_sub.add_parser("build", help="draw the problems, train the tokenizer, SFT, then GRPO on the members",
                                   epilog=TESTBED_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("--out", type=Path, required=True, help="directory to create (sft/, rl/, questions.jsonl, testbed.json, logs)")
    build.add_argument("--preset", choices=["smoke", "cpu", "gpu"], default="cpu",
                       help="smoke: seconds, plumbing only; cpu: the shipped demo checkpoints (~12 min on 2 cores); gpu: larger")
    build.add_argument("--seed", type=int, default=0, help="seed of the problems, the weights and the training (default: 0)")
    build.add_argument("--device", help="torch device (default: the preset's: cpu, or cuda for gpu)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    build.set_defaults(handler=_run_testbed_build)

    cache = sub.add_parser(
        "cache",
        help="pool per-layer activations of texts into an HDF5 store",
        epilog=CACHE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cache.add_argument("texts", type=Path, help="texts: .txt (one per line), .jsonl ('text' field or JSON strings), or a perturbation-set file (all its texts)")
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

    metrics = sub.add_parser(
        "metrics",
        help="compute zRSM, DC and zRSI per layer for every perturbation set from its cached activations",
        epilog=METRICS_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    metrics.add_argument("sets", type=Path, help="perturbation sets JSONL (lara generate)")
    metrics.add_argument("activations", type=Path, help="activation store holding every text of the sets (lara cache)")
    metrics.add_argument("-o", "--output", type=Path, required=True, help="metrics file to write (HDF5)")
    metrics.add_argument("--layers", help="stored layers to use, e.g. 0,1,2 or embed,0 (default: every stored layer)")
    metrics.add_argument("--eps", type=float, default=1e-8, help="numerical floor of the denominators (default: 1e-8)")
    metrics.add_argument("--min-paraphrases", type=int, default=2, help="paraphrases a group member needs to be used (default: 2)")
    metrics.add_argument("--chunk-mib", type=float, default=32, help="float32 activations read per chunk of questions, in MiB (default: 32)")
    metrics.add_argument("--no-progress", action="store_true", help="no progress bar")
    metrics.set_defaults(handler=_run_metrics)

    score = sub.add_parser(
        "score",
        help="turn LaRA metrics into one contamination score per question against a clean reference",
        epilog=SCORE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    score.add_argument("metrics", type=Path, help="metrics file (lara metrics)")
    score.add_argument("-o", "--output", type=Path, required=True, help="SCORES.csv to write (a .meta.json with the settings is written beside it)")
    score.add_argument("--clean-ref", help="split | crossfit | CLEAN_METRICS.h5 | REFERENCE.json (default: split if questions have "
                       "split clean_ref, else crossfit over labelled non-members)")
    score.add_argument("--labels", type=Path, help="JSONL with id and label, overriding the labels in the metrics file (crossfit)")
    score.add_argument("--save-reference", type=Path, help="write the reference fitted on the whole clean pool (JSON) for reuse")
    score.add_argument("--metric-set", default="zRSM,DC,zRSI", help="metrics to aggregate (default: zRSM,DC,zRSI)")
    score.add_argument("--layers", default="all", help="all | early | mid | late | 9-17 | 0,5,10 (default: all block layers)")
    score.add_argument("--dc", choices=["abs", "signed"], default="abs", help="DC alignment: |z| (default) or +z")
    score.add_argument("--outer-abs", action="store_true", help="wrap every aligned z in |.| (the public code's variant)")
    score.add_argument("--zero-scale", choices=["eps", "drop"], default="eps", help="cells with MAD = 0: divide by eps (default) or leave out")
    score.add_argument("--eps", type=float, default=1e-8, help="added to the reference scale (default: 1e-8)")
    score.add_argument("--folds", type=int, default=5, help="cross-fitting folds (default: 5)")
    score.add_argument("--seed", type=int, default=0, help="seed of the fold assignment (default: 0)")
    score.add_argument("--no-variants", action="store_true", help="only the main 'lara' column (no per-metric / per-window columns)")
    score.set_defaults(handler=_run_score)

    ev = sub.add_parser(
        "evaluate",
        help="ROC-AUC, TPR@5%%FPR, F1 with bootstrap CIs, paired comparisons, layer analysis, plots",
        epilog=EVALUATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ev.add_argument("scores", type=Path, help="SCORES.csv (id column + one column per detector, higher = member)")
    ev.add_argument("-o", "--output", type=Path, required=True, help="report directory (report.json, report.md, PNG plots)")
    ev.add_argument("--labels", type=Path, help="JSONL with id and label (questions or sets file); without it: an audit of score distributions")
    ev.add_argument("--metrics", type=Path, help="metrics file, for the per-layer profiles, Cohen's d map and window table")
    ev.add_argument("--detectors", help="score columns to report, comma-separated (default: all)")
    ev.add_argument("--baseline", help="column the others are compared with (default: the first)")
    ev.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default: 1000)")
    ev.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    ev.add_argument("--fpr", type=float, default=0.05, help="FPR of the TPR figure (default: 0.05)")
    ev.add_argument("--strict", action="store_true", help="TPR among ROC points with FPR < target instead of <=")
    ev.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ev.set_defaults(handler=_run_evaluate)

    detect = sub.add_parser(
        "detect",
        help="score questions with output-level detectors (Self-Critique, Min-kNN, CDD, PPL, Min-K%%, ...)",
        epilog=_detect_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    detect.add_argument("detectors", help="comma-separated detector names, or 'all' (see the list below)")
    detect.add_argument("questions", type=Path, help="questions JSONL (id, question[, label, split])")
    detect.add_argument("-o", "--output", type=Path, required=True, help="SCORES.csv (plus .raw.csv with raw statistics and .meta.json)")
    detect.add_argument("--model", dest="source", help="checkpoint directory or hub id of the audited model")
    detect.add_argument("--reference", help="checkpoint of a reference model with the same tokenizer (e.g. the pre-RL base), "
                        "for the detectors that compare with one (ref); with 'all', ref runs only when this is given")
    detect.add_argument("--endpoint", help="OpenAI-compatible base URL of the served audited model, e.g. http://localhost:8000/v1")
    detect.add_argument("--api-model", help="the served model's name (with --endpoint)")
    detect.add_argument("--api-key-env", help="environment variable holding the API key (with --endpoint; omit for a keyless server)")
    detect.add_argument("--top-logprobs", type=int, default=20, help="top-K log-probs per token requested (with --endpoint; default: 20)")
    detect.add_argument("--concurrency", type=int, default=8, help="requests in flight (with --endpoint; default: 8)")
    detect.add_argument("--device", help="auto | cpu | cuda | cuda:N (default: auto)")
    detect.add_argument("--dtype", choices=literal_choices(ModelConfig, "dtype"), help="compute dtype (default: auto)")
    detect.add_argument("--trust-remote-code", action="store_true", default=None, help="run code shipped with the checkpoint")
    detect.add_argument("--prompt-format", choices=["auto", "chat", "raw"], default="auto", help="chat template or raw text (default: auto)")
    detect.add_argument("--template", default="{prompt}", help="raw-format prompt text with {prompt} (default: {prompt})")
    detect.add_argument("--system-prompt", help="system turn for the chat format")
    detect.add_argument("--batch-size", type=int, default=16, help="completions generated together (default: 16)")
    detect.add_argument("--param", action="append", default=[], metavar="DETECTOR.NAME=VALUE",
                        help="detector hyperparameter, repeatable, e.g. --param min_knn.k=5 --param cdd.n=20")
    detect.add_argument("--sampling-temperature", type=float, metavar="T",
                        help="temperature of every sampling detector (cdd, min_knn, entropy_temp) unless a --param sets it; "
                        "use the RL rollouts' temperature when it is known (SPEC §5; often 1.0)")
    detect.add_argument("--sets", type=Path, help="perturbation sets of the questions (lara generate): their first "
                        "--controls similar questions are scored too, as matched controls (SCORES.controls.csv, <det>@cal columns)")
    detect.add_argument("--controls", type=int, default=3, help="matched controls per question with --sets (default: 3)")
    detect.add_argument("--calibrate", help="detectors scored on the controls, comma-separated (default: all that run)")
    detect.add_argument("--store", type=Path, help="response store (default: ~/.cache/lara-probes/responses.sqlite)")
    detect.add_argument("--no-progress", action="store_true", help="no progress bar")
    detect.set_defaults(handler=_run_detect)

    fuse = sub.add_parser(
        "fuse",
        help="fuse detector scores (robust-z mean, rank mix, cross-validated stacking) into one column",
        epilog=FUSE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fuse.add_argument("scores", type=Path, nargs="+", help="one or more score CSVs, joined on id")
    fuse.add_argument("-o", "--output", type=Path, required=True, help="CSV: the joined columns plus the fused one")
    fuse.add_argument("--detectors", required=True, help="comma-separated columns to fuse, e.g. self_critique,lara")
    fuse.add_argument("--method", choices=["robust-z", "rank-mix", "stacking"], default="robust-z", help="(default: robust-z)")
    fuse.add_argument("--weights", help="comma-separated weights (robust-z, rank-mix); rank-mix of two: β,1−β e.g. 0.65,0.35")
    fuse.add_argument("--labels", type=Path, help="questions JSONL with label (stacking, crossfit) and split (split)")
    fuse.add_argument("--clean-ref", choices=["split", "crossfit", "all"], help="robust-z reference: split clean_ref, labelled "
                      "non-members (cross-fitted), or all rows (an unsupervised audit); default: split, else crossfit")
    fuse.add_argument("--folds", type=int, default=5, help="cross-fitting / stacking folds (default: 5)")
    fuse.add_argument("--seed", type=int, default=0)
    fuse.add_argument("--name", help="name of the fused column (default: the detectors joined by '+')")
    fuse.set_defaults(handler=_run_fuse)

    verdict = sub.add_parser(
        "verdict",
        help="label-free verdict: was this benchmark trained on? calibrated tests against each question's matched controls",
        epilog=VERDICT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verdict.add_argument("scores", type=Path, help="SCORES.csv of the audited model (lara detect --sets)")
    verdict.add_argument("--controls", type=Path, help="its SCORES.controls.csv (default: beside SCORES.csv)")
    verdict.add_argument("--reference-scores", type=Path, help="the reference model's SCORES.csv on the same questions (reference mode)")
    verdict.add_argument("--reference-controls", type=Path, help="the reference model's SCORES.controls.csv (default: beside it)")
    verdict.add_argument("--clean", type=Path, help="SCORES.csv of a clean set drawn like the audited questions (relative mode)")
    verdict.add_argument("--clean-controls", type=Path, help="the clean set's SCORES.controls.csv (default: beside it)")
    verdict.add_argument("--questions", type=Path, help="questions JSONL: split clean_ref questions are the clean set; labels "
                         "and splits define --subsets (the verdict itself never reads labels)")
    verdict.add_argument("--subsets", help="also a verdict on these groups, e.g. members,non_members (by label) or a split name")
    verdict.add_argument("--detectors", help="detectors combined, comma-separated (default: all with controls, and lara in the relative mode)")
    verdict.add_argument("--alpha", type=float, default=0.05, help="level of the combined test (default: 0.05)")
    verdict.add_argument("--combine", choices=["cauchy", "bonferroni"], default="cauchy", help="(default: cauchy)")
    verdict.add_argument("--permutations", type=int, default=10_000, help="permutations of the within-question test (default: 10000)")
    verdict.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the CIs (default: 1000)")
    verdict.add_argument("--seed", type=int, default=0)
    verdict.add_argument("-o", "--output", type=Path, required=True, help="VERDICT.json")
    verdict.set_defaults(handler=_run_verdict)

    info = sub.add_parser("info", help="show what an activation store holds and how it was made",
                          epilog="examples:\n  lara info acts.h5\n  lara info runs/demo/rl/acts.h5\n",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
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


METRICS_EXAMPLES = """examples:
  lara metrics sets.jsonl acts.h5 -o metrics.h5
  lara metrics sets.jsonl acts.h5 -o metrics.h5 --layers 0,1,2,3 --chunk-mib 512
"""

SCORE_EXAMPLES = """examples:
  lara score metrics.h5 -o scores.csv                                # clean reference: split clean_ref, else cross-fit
  lara score metrics.h5 -o scores.csv --clean-ref crossfit --labels questions.jsonl
  lara score metrics.h5 -o scores.csv --clean-ref clean_metrics.h5 --save-reference ref.json
  lara score new_metrics.h5 -o scores.csv --clean-ref ref.json --layers late --dc signed
"""

EVALUATE_EXAMPLES = """examples:
  lara evaluate scores.csv --labels questions.jsonl -o report/
  lara evaluate scores.csv --labels questions.jsonl --metrics metrics.h5 -o report/ --bootstrap 2000
  lara evaluate scores.csv -o audit/                                 # no labels: score distributions only
"""


def _run_metrics(args: argparse.Namespace) -> int:
    from .lara.metrics_file import compute_metrics

    layers = [x.strip() for x in args.layers.split(",")] if args.layers else None
    summary = compute_metrics(args.sets, args.activations, args.output, layers=layers, eps=args.eps,
                              min_paraphrases=args.min_paraphrases, chunk_mib=args.chunk_mib, progress=not args.no_progress)
    print(summary.describe())
    return 0


def _run_score(args: argparse.Namespace) -> int:
    from .lara.metrics_file import MetricsFile
    from .lara.protocol import ScoreOptions
    from .lara.scoring import score_metrics
    from .scores import read_labels

    options = ScoreOptions(metric_set=tuple(m.strip() for m in args.metric_set.split(",")), layers=args.layers,
                           dc=args.dc, outer_abs=args.outer_abs, eps=args.eps, zero_scale=args.zero_scale)
    metrics = MetricsFile.read(args.metrics)
    labels = read_labels(args.labels) if args.labels else None
    result = score_metrics(metrics, args.clean_ref, options, labels=labels, n_folds=args.folds, seed=args.seed,
                           variants=not args.no_variants)
    result.table.write_csv(args.output)
    meta = args.output.with_suffix(".meta.json")
    result.write_info(meta)
    if args.save_reference:
        result.reference.save(args.save_reference)
    info = result.info
    print(f"{info['n_questions']} questions scored against a clean reference of {info['n_reference']} "
          f"({info['clean_ref_mode']}: {info.get('reference_source') or info.get('reference_file')}); "
          f"{info['n_cross_fitted']} cross-fitted over {info['folds_used']} folds -> {args.output}")
    if info["n_nan"]:
        print(f"NaN scores: {info['n_nan']} (" + ", ".join(f"{k} {v}" for k, v in info["nan_reasons"].items()) + ")")
    if info["zero_scale_cells"]:
        print(f"zero-scale cells (MAD = 0): {len(info['zero_scale_cells'])}, e.g. {', '.join(info['zero_scale_cells'][:4])}")
    print(f"columns: {', '.join(info['columns'])}; settings in {meta}")
    if args.save_reference:
        print(f"reference saved to {args.save_reference}")
    return 0


def _run_evaluate(args: argparse.Namespace) -> int:
    from .lara.metrics_file import MetricsFile
    from .report import build_report, render_markdown, write_report
    from .report.build import jsonable
    from .scores import ScoreTable, read_labels, read_question_texts

    table = ScoreTable.read_csv(args.scores)
    metrics = MetricsFile.read(args.metrics) if args.metrics else None
    labels = read_labels(args.labels) if args.labels else None
    texts = read_question_texts(args.labels) if args.labels else None  # the blind baseline (SPEC §8.8)
    if labels is None and metrics is not None and (metrics.labels >= 0).any():
        labels = {i: int(v) for i, v in zip(metrics.ids, metrics.labels) if v >= 0}
        logger.info("labels: taken from %s", args.metrics)
    detectors = [d.strip() for d in args.detectors.split(",")] if args.detectors else None
    try:
        report = build_report(table, labels, metrics if labels is not None else None, detectors=detectors,
                              baseline=args.baseline, n_bootstrap=args.bootstrap, seed=args.seed, fpr=args.fpr,
                              strict=args.strict, texts=texts, inputs={"scores": str(args.scores), "labels": str(args.labels or ""),
                                                          "metrics": str(args.metrics or "")})
    except KeyError as err:
        raise ProbesError(str(err).strip("'\"")) from None
    files = write_report(report, args.output, table, labels, plots=not args.no_plots)
    text = render_markdown(jsonable(report))
    print(text.split("## Paired comparison")[0].split("## Layer analysis")[0].rstrip())
    print(f"\nreport: {', '.join(str(f) for f in files)}")
    return 0


DETECT_EXAMPLES = """examples:
  lara detect self_critique,min_knn,ppl questions.jsonl --model ./checkpoints/rl -o scores.csv
  lara detect all questions.jsonl --model ./checkpoints/rl --prompt-format raw --template "Q: {prompt}\\nA:" -o scores.csv
  lara detect cdd,min_knn questions.jsonl --model ./checkpoints/rl --param cdd.n=20 --param min_knn.k=5 -o s.csv
  lara detect min_knn,cdd questions.jsonl --model ./checkpoints/rl --sampling-temperature 1.0 -o s.csv   # the RL rollouts' T
  lara detect ref,zlib,partial_completion questions.jsonl --model ./checkpoints/rl --reference ./checkpoints/base -o s.csv
  lara detect cdd,min_knn,self_critique questions.jsonl --endpoint http://localhost:8000/v1 \\
      --api-model my-rl-model -o scores.csv        # a vLLM server: entropies from top-20 log-probs (recorded)
"""


def _detect_epilog() -> str:
    """The examples and the detector list, from the registry."""
    from .detectors import REGISTRY

    lines = [f"  {n:<16} {c.summary} [{c.raw_name}: {c.raw_direction}]" for n, c in REGISTRY.items()]
    return DETECT_EXAMPLES + "\ndetectors (raw statistic, its direction; every score column is oriented higher = member):\n" + "\n".join(lines)

FUSE_EXAMPLES = """examples:
  lara fuse scores.csv lara_scores.csv --detectors self_critique,lara --labels questions.jsonl -o fused.csv
  lara fuse scores.csv --detectors self_critique,lara --method rank-mix --weights 0.65,0.35 -o fused.csv
  lara fuse scores.csv --detectors ppl,cdd,min_knn --method stacking --labels questions.jsonl -o fused.csv
"""


def _run_detect(args: argparse.Namespace) -> int:
    from cache.loading import load_model
    from generation.config import default_cache_dir
    from generation.records import read_questions

    from .detect import detector_names, parse_params, run_detectors
    from .responders.local import LocalResponder, PromptFormat
    from .responders.store import CachedResponder, ResponseStore

    names = detector_names(args.detectors, reference=bool(args.reference))
    params = parse_params(args.param, names)
    if bool(args.endpoint) == bool(args.source):
        raise ConfigError("give the audited model with --model DIR, or a served one with --endpoint URL --api-model NAME")
    questions = read_questions(args.questions)
    overrides = {k: v for k, v in {"device": args.device, "dtype": args.dtype, "trust_remote_code": args.trust_remote_code}.items()
                 if v is not None}
    prompt_format = PromptFormat(mode=args.prompt_format, template=args.template, system=args.system_prompt)
    if args.endpoint:
        from .responders.openai_api import OpenAIResponder

        if not args.api_model:
            raise ConfigError("--endpoint needs --api-model NAME (the served model's name)")
        backend: Any = OpenAIResponder(args.endpoint, args.api_model, api_key_env=args.api_key_env,
                                       top_logprobs=args.top_logprobs, concurrency=args.concurrency)
    else:
        _quiet_library_progress_bars(args.verbose)
        backend = LocalResponder(load_model(ModelConfig(source=args.source, **overrides)), prompt_format, batch_size=args.batch_size)
    store = ResponseStore(args.store or default_cache_dir().parent / "responses.sqlite")
    responder = CachedResponder(backend, store)
    reference = None
    if args.reference:
        _quiet_library_progress_bars(args.verbose)
        loaded = load_model(ModelConfig(source=args.reference, **overrides))
        reference = CachedResponder(LocalResponder(loaded, prompt_format, batch_size=args.batch_size), store)
    controls = None
    if args.sets:
        from generation.records import read_sets

        from .calibration.controls import control_texts

        controls = control_texts(read_sets(args.sets), args.controls)
    clean = [q.question for q in questions if q.split == "clean_ref"]
    summary = run_detectors(names, [q.id for q in questions], [q.question for q in questions], responder, params,
                            clean_questions=clean, progress=not args.no_progress, reference=reference,
                            sampling_temperature=args.sampling_temperature, controls=controls,
                            calibrate=[n.strip() for n in args.calibrate.split(",")] if args.calibrate else None)
    files = summary.write(args.output)
    print(summary.describe())
    print(f"wrote {', '.join(str(f) for f in files)}")
    return 0


VERDICT_EXAMPLES = """examples:
  lara detect ppl,min_k,cdd q.jsonl --model ./rl --sets sets.jsonl -o rl.csv        # also scores 3 controls per question
  lara detect ppl,min_k,cdd q.jsonl --model ./sft --sets sets.jsonl -o sft.csv      # the reference model, same texts
  lara verdict rl.csv --reference-scores sft.csv -o verdict.json                    # reference mode (calibrated)
  lara verdict rl.csv --questions q.jsonl --subsets members,non_members -o v.json   # clean_ref questions: relative mode
  lara verdict rl.csv -o verdict.json                                               # absolute mode (uncalibrated)
"""


def _beside(scores: Path, given: Path | None) -> Path | None:
    """An explicit controls file, else SCORES.controls.csv beside SCORES.csv if it exists."""
    if given is not None:
        return given
    candidate = scores.with_suffix(".controls.csv")
    return candidate if candidate.is_file() else None


def _run_verdict(args: argparse.Namespace) -> int:
    from .calibration.audit import audit_verdict, describe_verdict, read_optional_controls
    from .calibration.verdict import VerdictSettings
    from .report.build import jsonable
    from .scores import ScoreTable, read_labels, read_splits

    settings = VerdictSettings(alpha=args.alpha, combine=args.combine, permutations=args.permutations, bootstrap=args.bootstrap,
                               seed=args.seed, detectors=tuple(d.strip() for d in args.detectors.split(",")) if args.detectors else None)
    tables = {}
    for key, path, controls in (("audited", args.scores, args.controls), ("reference", args.reference_scores, args.reference_controls),
                                ("clean", args.clean, args.clean_controls)):
        if path is not None:
            tables[key] = (ScoreTable.read_csv(path), read_optional_controls(_beside(path, controls)))
    labels = read_labels(args.questions, required=False) if args.questions else {}
    splits = read_splits(args.questions) if args.questions else {}
    verdict = audit_verdict(*tables["audited"], reference=tables.get("reference"), clean=tables.get("clean"), labels=labels,
                            splits=splits, subsets=[x.strip() for x in args.subsets.split(",")] if args.subsets else (),
                            settings=settings)
    args.output.write_text(json.dumps(jsonable(verdict), indent=1) + "\n", encoding="utf-8")
    print(describe_verdict(verdict))
    print(f"wrote {args.output}")
    return 0


def _run_fuse(args: argparse.Namespace) -> int:
    import numpy as np

    from . import fusion
    from .scores import ScoreTable, join_tables, read_labels, read_splits

    table = join_tables([ScoreTable.read_csv(p) for p in args.scores])
    names = [n.strip() for n in args.detectors.split(",") if n.strip()]
    weights = np.array([float(w) for w in args.weights.split(",")]) if args.weights else None
    labels = read_labels(args.labels) if args.labels else None
    splits = read_splits(args.labels) if args.labels else {}
    fused = fusion.fuse(table, names, args.method, weights, labels, splits, args.clean_ref, args.folds, args.seed)
    name = args.name or "+".join(names)
    table.add(name, fused.values)
    table.write_csv(args.output)
    meta = args.output.with_suffix(".meta.json")
    meta.write_text(json.dumps({"fusion": {name: {"method": args.method, "detectors": names, **fused.to_dict()}}}, indent=1) + "\n",
                    encoding="utf-8")
    print(f"{name}: {fused.describe()}; {int(np.isfinite(fused.values).sum())} of {len(fused.values)} questions fused "
          f"-> {args.output} (settings in {meta})")
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

    _quiet_library_progress_bars(args.verbose)
    config = cache_config_from_args(args)
    texts = _texts_to_cache(args.texts, args.text_field)
    summary = run_cache(texts, args.output, config, progress=not args.no_progress)
    print(summary.describe())
    return 0


def _texts_to_cache(path: Path, field: str) -> list[str]:
    """The texts of a texts file, or every text of a perturbation-set file (lara generate output)."""
    from cache.texts import read_texts

    from generation.records import read_sets

    from .lara.sets import distinct_texts, looks_like_sets

    if path.suffix.lower() == ".jsonl" and looks_like_sets(path):
        sets = read_sets(path)
        texts = distinct_texts(sets)
        logger.info("%s: %d perturbation sets, %d distinct texts", path, len(sets), len(texts))
        return texts
    return read_texts(path, field=field)


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


def _run_run(args: argparse.Namespace) -> int:
    from .pipeline import load_run_config, run_pipeline

    _quiet_library_progress_bars(args.verbose)
    config = load_run_config(args.config, args.sets)
    result = run_pipeline(config, progress=not args.no_progress)
    if result.verdicts:
        print(result.verdicts + "\n")
    print(result.summary)
    print(f"\nstages run: {len(result.ran)}, up to date: {len(result.skipped)}; run directory: {result.run_dir} "
          f"(reports: {', '.join(str(p / 'report.md') for p in result.reports.values())})")
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from .pipeline.demo import demo_config_path

    args.config = demo_config_path()
    return _run_run(args)


def _run_testbed_build(args: argparse.Namespace) -> int:
    from .testbed import build_testbed

    command = f"lara testbed build --out {args.out} --preset {args.preset} --seed {args.seed}"
    manifest = build_testbed(args.out, args.preset, args.seed, device=args.device, overwrite=args.overwrite, command=command)
    acc = manifest["accuracy"]
    print(f"testbed {args.out} ({args.preset}, seed {args.seed}) built in {manifest['seconds']['total']:.0f} s")
    for stage in ("sft", "rl"):
        print(f"  accuracy after {stage.upper():<4} members {acc[stage]['members']:.1%}, non-members "
              f"{acc[stage]['non_members']:.1%}, held-out test {acc[stage]['test']:.1%}")
    print(f"  checkpoints: {args.out / 'sft'}, {args.out / 'rl'}; questions: {args.out / 'questions.jsonl'}")
    return 0


def _quiet_library_progress_bars(verbose: bool) -> None:
    """Hide transformers' weight-loading bars (ours shows the extraction) unless verbose."""
    if not verbose:
        import transformers.utils.logging

        transformers.utils.logging.disable_progress_bar()


def _configure_logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpx2", "httpcore", "openai", "transformers", "transformer_lens", "nnsight", "filelock", "urllib3", "matplotlib"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
