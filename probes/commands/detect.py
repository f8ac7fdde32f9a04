"""``lara detect``: output-level detectors on questions (and on their matched controls)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cache.config import ModelConfig
from cache.distributed import Ranks
from cache.errors import ConfigError
from cache.loading import load_model
from cache.outputs import check_writable
from generation.records import read_questions, read_sets
from lara_core.configio import literal_choices, prompt_text

from ..detectors import REGISTRY
from ..detectors.on_controls import ControlPlan
from ..detectors.selection import checked_detectors, detector_names, parse_params
from ..operations.detect import DetectOptions, ModelAccess, detect
from ..pipeline.config import CalibrationSettings, DetectSettings, EndpointSettings
from ..pipeline.config_paths import parse_set
from ..questions.chat import default_system_prompt
from ..responders.local import PromptFormat
from ..responders.model_settings import ModelSettings, activation_config
from ..responders.open import default_store_path
from ..responders.registry import choices
from ..responders.store import ResponseStore
from ..verdicts.controls import DEFAULT_DECISION_CONTROLS
from ._common import add_model_placement, add_setting, command_parser, quiet_library_progress_bars

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

    lines = [f"  {n:<16} {c.summary} [{c.raw_name}: {c.raw_direction}]" for n, c in REGISTRY.items()]
    return (
        DETECT_EXAMPLES
        + "\ndetectors (raw statistic, its direction; every score column is oriented higher = member):\n"
        + "\n".join(lines)
    )


DETECT_HELP = "score questions with output-level detectors (Self-Critique, Min-kNN, CDD, PPL, Min-K%%, ...)"


def register(sub: Any) -> None:
    detect = command_parser(sub, "detect", DETECT_HELP, _detect_epilog())
    detect.add_argument("detectors", help="comma-separated detector names, or 'all' (see the list below)")
    detect.add_argument("questions", type=Path, help="questions JSONL (id, question[, label, split])")
    detect.add_argument(
        "-o", "--output", type=Path, required=True, help="SCORES.csv (plus .raw.csv with raw statistics and .meta.json)"
    )
    _model_arguments(detect)
    _prompt_arguments(detect)
    _calibration_arguments(detect)
    detect.add_argument("--store", type=Path, help="response store (default: ~/.cache/lara-probes/responses.sqlite)")
    detect.add_argument("--no-progress", action="store_true", help="no progress bar")
    detect.set_defaults(handler=handle)


def _models(args: argparse.Namespace, questions: list[Any]) -> tuple[ModelAccess, ModelAccess | None, DetectOptions]:
    """The audited model (local or served) and the reference, loaded lazily, sharing one response
    store, and how the detectors run; under torchrun, this rank's process group is started."""
    settings = ("device", "dtype", "trust_remote_code", "gpus_per_rank", "engine")
    overrides = {k: getattr(args, k) for k in settings if getattr(args, k) is not None}
    overrides["engine_args"] = engine_arguments(args.engine_arg)
    ranks = None if args.endpoint else Ranks.from_env()  # under torchrun: this rank's share of every batch call

    def model_config(source: str) -> ModelSettings:
        base = args.base if source == args.source else None  # a reference adapter names its own base
        config = ModelSettings(source=source, base=base, **overrides)
        return config if ranks is None else ranks.place(config)

    def loader(source: str) -> Any:
        def load() -> Any:
            quiet_library_progress_bars(args.verbose)
            return load_model(activation_config(model_config(source)))

        return load

    # a bad engine or engine argument refused before any work (a served model has neither)
    audited_settings = None if args.endpoint else model_config(args.source)
    if ranks is not None:
        ranks.start_for(audited_settings)
    store = ResponseStore(args.store or default_store_path())  # one store for the audited model and the reference
    endpoint = (
        EndpointSettings(args.endpoint, args.api_model, args.api_key_env, args.top_logprobs, args.concurrency)
        if args.endpoint
        else None
    )
    audited = ModelAccess(loader(args.source), store, engine=audited_settings, endpoint=endpoint)
    reference = ModelAccess(loader(args.reference), store) if args.reference else None
    system = default_system_prompt(questions, args.system_prompt, str(args.questions))
    options = DetectOptions(
        PromptFormat(mode=args.prompt_format, template=args.template, system=system),
        batch_size=args.batch_size,
        decoding=args.decoding,
        sampling_temperature=args.sampling_temperature,
        controls=_controls(args),
        progress=not args.no_progress and (ranks is None or ranks.rank == 0),
        ranks=ranks,
    )
    return audited, reference, options


def engine_arguments(pairs: list[str] | None) -> dict[str, Any]:
    """``--engine-arg NAME=VALUE`` flags as a mapping, each value read as YAML (``8`` a number,
    ``true`` a flag); checked against the engine's declared arguments by :class:`ModelSettings`."""
    parsed = parse_set(pairs or [], "--engine-arg", "tensor_parallel_size=8")
    return {".".join(keys): value for keys, value in parsed}


def _controls(args: argparse.Namespace) -> ControlPlan | None:
    """The matched controls ``--sets`` gives, or None."""
    if not args.sets:
        return None
    calibrate = [n.strip() for n in args.calibrate.split(",")] if args.calibrate else None
    return ControlPlan.from_sets(
        read_sets(args.sets), args.controls, args.decision_controls, args.sampling_controls, calibrate
    )


def _model_arguments(detect: argparse.ArgumentParser) -> None:
    """The audited model (local or served), the reference model, how they run."""
    detect.add_argument(
        "--model", dest="source", help="checkpoint directory, .gguf file, PEFT adapter or hub id of the audited model"
    )
    detect.add_argument("--base", help="the audited adapter's base (default: its base_model_name_or_path)")
    detect.add_argument(
        "--reference",
        help="checkpoint of a reference model with the same tokenizer (e.g. the pre-RL base), "
        "for the detectors that compare with one (ref); with 'all', ref runs only when this is given",
    )
    detect.add_argument(
        "--endpoint", help="OpenAI-compatible base URL of the served audited model, e.g. http://localhost:8000/v1"
    )
    detect.add_argument("--api-model", help="the served model's name (with --endpoint)")
    detect.add_argument(
        "--api-key-env", help="environment variable holding the API key (with --endpoint; omit for a keyless server)"
    )
    add_setting(
        detect,
        "--top-logprobs",
        EndpointSettings,
        "top_logprobs",
        f"top-K log-probs per token requested (with --endpoint; default: {EndpointSettings.top_logprobs})",
    )
    add_setting(
        detect,
        "--concurrency",
        EndpointSettings,
        "concurrency",
        f"requests in flight (with --endpoint; default: {EndpointSettings.concurrency})",
    )
    detect.add_argument("--device", help="auto | cpu | cuda | cuda:N (default: auto)")
    detect.add_argument("--dtype", choices=literal_choices(ModelConfig, "dtype"), help="compute dtype (default: auto)")
    detect.add_argument(
        "--engine",
        help=f"what runs the audited model: {', '.join(choices())} (auto, the default: the faster installed "
        "engine; docs/detectors.md, Engines)",
    )
    detect.add_argument(
        "--engine-arg",
        action="append",
        metavar="NAME=VALUE",
        help="one of the engine's arguments (repeatable; model.engine_args in a config), "
        "e.g. --engine-arg tensor_parallel_size=8",
    )
    add_model_placement(detect)


def _prompt_arguments(detect: argparse.ArgumentParser) -> None:
    """How questions are put to the model, batching, the detectors' parameters."""
    add_setting(detect, "--prompt-format", DetectSettings, "prompt_format", "chat template or raw text (default: auto)")
    add_setting(
        detect,
        "--template",
        DetectSettings,
        "template",
        "raw-format prompt text with {prompt}; \\n is a newline, as in a YAML config (default: {prompt})",
        type=prompt_text,
    )
    detect.add_argument("--system-prompt", type=prompt_text, help="system turn for the chat format (\\n: a newline)")
    add_setting(
        detect,
        "--batch-size",
        DetectSettings,
        "batch_size",
        f"completions generated together (default: {DetectSettings.batch_size})",
    )
    add_setting(
        detect,
        "--decoding",
        DetectSettings,
        "decoding",
        "the built-in sampler's loop: dynamic (a growing KV cache), static (a pre-allocated one, its step "
        "captured with CUDA graphs on a GPU), auto (dynamic; docs/performance.md)",
    )
    detect.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="DETECTOR.NAME=VALUE",
        help="detector hyperparameter, repeatable, e.g. --param min_knn.k=5 --param cdd.n=20",
    )
    detect.add_argument(
        "--sampling-temperature",
        type=float,
        metavar="T",
        help=f"temperature of every sampling detector ({', '.join(_sampling_detectors())}) unless a --param sets it; "
        "use the RL rollouts' temperature when it is known (SPEC §5; often 1.0)",
    )


def _calibration_arguments(detect: argparse.ArgumentParser) -> None:
    """The matched controls scored beside the questions (SPEC §8)."""
    detect.add_argument(
        "--sets",
        type=Path,
        help="perturbation sets of the questions (lara generate): their first "
        "--controls similar questions are scored too, as matched controls (SCORES.controls.csv, <det>@cal columns)",
    )
    add_setting(
        detect,
        "--controls",
        CalibrationSettings,
        "controls",
        f"matched controls per question with --sets (default: {CalibrationSettings.controls})",
    )
    add_setting(
        detect,
        "--decision-controls",
        CalibrationSettings,
        "decision_controls",
        "with --sets, the detectors that do not sample score this many controls per question (default: "
        f"{DEFAULT_DECISION_CONTROLS}, or --controls if more; the per-question decisions use them all, the "
        "sampling detectors keep --controls): the sets need that many similars (lara generate --controls; "
        "a question with fewer uses what it has)",
        type=int,
    )
    add_setting(
        detect,
        "--sampling-controls",
        CalibrationSettings,
        "sampling_controls",
        "with --sets, the detectors that sample score this many controls per question (default: "
        "--controls; the per-question decisions use them all)",
        type=int,
    )
    detect.add_argument("--calibrate", help="detectors scored on the controls, comma-separated (default: all that run)")


def _sampling_detectors() -> list[str]:
    """The detectors that sample at a temperature, from their own tag (``samples_at_temperature``)."""

    return [name for name, cls in REGISTRY.items() if cls.samples_at_temperature]


def handle(args: argparse.Namespace) -> int:
    questions = read_questions(args.questions)
    names = detector_names(args.detectors, reference=bool(args.reference), answers=[q.answer for q in questions])
    detectors = checked_detectors(  # each built once, every value checked before any model loads
        names, questions, bool(args.reference), parse_params(args.param, names), args.sampling_temperature
    )
    if bool(args.endpoint) == bool(args.source):
        raise ConfigError(
            "give the audited model with --model DIR, or a served one with --endpoint URL --api-model NAME"
        )
    if args.endpoint and not args.api_model:
        raise ConfigError("--endpoint needs --api-model NAME (the served model's name)")
    check_writable(args.output, "scores file")  # before any model is loaded or answer generated
    check_writable(args.store or default_store_path(), "response store")
    audited, reference, options = _models(args, questions)
    summary = detect(questions, detectors, audited, options, reference, output=args.output)
    if summary is not None:  # None: a rank other than the main one
        print(summary.describe())
        print(f"wrote {', '.join(str(f) for f in summary.written)}")
    return 0
