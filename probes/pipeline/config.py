"""The ``lara run`` configuration: one validated dataclass tree loaded from YAML.

Every section is optional except ``questions`` and ``model.source``; an unknown or misspelled
key is an error naming it, a close match and the valid keys. ``--set key=value`` overrides any
key by its dotted path (the value is read as YAML: ``--set generation.similars=3``,
``--set detect.names=[ppl,cdd]``). Relative paths in a config file are relative to the file's
directory; relative paths given with ``--set`` are relative to the current directory.

See ``configs/demo.yaml`` for a complete, commented example.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import yaml

from cache.config import ExtractionConfig
from generation.config import GenerationConfig
from lara_core.configio import decode_prompt_texts, encode_prompt_text, from_mapping, load_yaml

from ..detectors import REGISTRY
from ..errors import ConfigError
from ..fusion import FusionSpec
from ..operations.accuracy import AccuracySettings
from ..operations.evaluate import EvaluateSettings
from ..operations.metrics import MetricsSettings
from ..operations.score import ScoreSettings
from ..responders.model_settings import ModelSettings, read_old_engine_keys
from ..verdicts.controls import DEFAULT_CONTROLS, decision_control_count
from ..verdicts.modes import VerdictSettings
from .config_paths import absolute_if_path, apply_sets, parse_set, resolve_paths

# prompt texts: "\n" is a newline whether YAML or the shell kept the backslash (lara_core.configio.prompt_text)
PROMPT_TEXT_KEYS = ("detect.template", "detect.system_prompt", "extraction.system_prompt")


@dataclass(frozen=True)
class ControlModel:
    """A further model audited with the same sets and settings (e.g. the pre-RL checkpoint, where
    no detector should separate members from non-members). Model settings other than the source
    are those of ``model``. ``reference: true`` (at most one) makes it the reference model of the
    detectors that compare with one (``ref``): it must share the audited model's tokenizer.
    ``base``: a PEFT adapter's base (default: the adapter's ``base_model_name_or_path``)."""

    name: str
    source: str
    reference: bool = False
    base: str | None = None


@dataclass(frozen=True)
class EndpointSettings:
    """An OpenAI-compatible server of the audited model (vLLM, SGLang…), for the detectors."""

    base_url: str
    model: str
    api_key_env: str | None = None
    top_logprobs: int = 20
    concurrency: int = 8


@dataclass(frozen=True)
class DetectSettings:
    """Output-level detectors (``lara detect``).

    Attributes:
        names: registry names, or ``[all]``; empty runs none.
        prompt_format / template / system_prompt: how a question becomes a prompt.
        batch_size: completions generated together (local model).
        decoding: the built-in sampler's loop: ``dynamic`` (a growing KV cache), ``static`` (a
            pre-allocated cache and a step captured with CUDA graphs on a GPU) or ``auto``
            (dynamic until a GPU measurement shows where static pays: docs/performance.md). Like
            the batch size, it changes no result and is no part of a stage's key.
        params: ``{detector: {parameter: value}}``.
        sampling_temperature: the temperature of every sampling detector (CDD, Min-kNN,
            Entropy-Temp, policy drift, reward gain) whose ``params`` set none — the RL rollouts' temperature when known
            (SPEC §5); None keeps each detector's default.
        endpoint: serve the audited model instead of loading it (controls are always local).
        store: response store (SQLite); default ``RUN_DIR/<model>/responses.sqlite``.
        clean_ref: how many questions of split ``clean_ref`` the detectors score: the first N in
            the questions file (the detectors' clean set in the verdict's relative mode, fusion's
            clean reference, ReCaLL's prefixes); LaRA always uses every one. None: all. The
            detectors' cost on a CPU is mostly sampling, and LaRA wants a clean set twice the
            audited one (SPEC §9): a smaller one for the detectors halves a real model's run.
    """

    names: tuple[str, ...] = ()
    prompt_format: Literal["auto", "chat", "raw"] = "auto"
    template: str = "{prompt}"
    system_prompt: str | None = None
    batch_size: int = 16
    decoding: Literal["auto", "dynamic", "static"] = "auto"
    params: Any = None
    sampling_temperature: float | None = None
    endpoint: EndpointSettings | None = None
    store: str | None = None
    clean_ref: int | None = None

    def __post_init__(self) -> None:
        if self.clean_ref is not None and self.clean_ref < 0:
            raise ConfigError(
                f"'detect.clean_ref' must be >= 0 (or null for every clean_ref question), got {self.clean_ref}"
            )
        params = self.params or {}
        if not isinstance(params, Mapping) or not all(isinstance(v, Mapping) for v in params.values()):
            raise ConfigError(
                "'detect.params' must map detector names to {parameter: value} mappings, e.g. {cdd: {n: 20}}"
            )
        object.__setattr__(self, "params", {str(k): dict(v) for k, v in params.items()})
        if self.sampling_temperature is not None and not self.sampling_temperature > 0:
            raise ConfigError(f"'detect.sampling_temperature' must be > 0, got {self.sampling_temperature}")


@dataclass(frozen=True)
class CalibrationSettings:
    """Matched controls (SPEC §8.1): each question's first ``controls`` valid similar questions are
    scored by the detectors (``detectors``; None = every detector that runs) with the same
    parameters, and the verdict uses them. 0 turns it off.

    ``decision_controls`` (SPEC §8.10): more controls for the per-question decisions, scored by the
    detectors that do not sample (one forward pass per text: the likelihood family);
    ``sampling_controls``: how many the detectors that sample score (reward gain, policy drift;
    n samples per text from each model). The verdict reads the first ``controls`` of them, the
    decisions all. The generator draws the similars beyond its K as controls only (no blanks, no
    paraphrases). Where not named: ``decision_controls`` 10 (or ``controls`` if more),
    ``sampling_controls`` the same as ``controls`` — the measured best (docs/verdicts.md).

    Why the verdict keeps its few: a generator's later similars drift (each must differ from the
    ones before, and after misses fewer relations are kept). On the demo's SFT checkpoint the
    original beats its k-th similar on PPL with probability 0.51–0.52 for k = 1–3, 0.57 for k = 5
    and about 0.60 for k = 15–20: the reference mode cancels that (both models see the same
    texts), the absolute mode does not (its size on clean subsets of 50 goes from 0.045 with 3
    controls to 0.45 with 5)."""

    controls: int = DEFAULT_CONTROLS
    detectors: tuple[str, ...] | None = None
    decision_controls: int | None = None
    sampling_controls: int | None = None

    def __post_init__(self) -> None:
        if self.controls < 0:
            raise ConfigError(f"'calibration.controls' must be >= 0, got {self.controls}")
        for key in ("decision_controls", "sampling_controls"):
            value = getattr(self, key)
            if value is not None and value < self.controls:
                raise ConfigError(
                    f"'calibration.{key}' ({value}) must be at least 'calibration.controls' "
                    f"({self.controls}): the decisions use the verdict's controls and more"
                )
        object.__setattr__(
            self, "decision_controls", decision_control_count(self.controls, self.decision_controls) or None
        )

    @property
    def most(self) -> int:
        """The most controls any detector scores."""
        return max(self.controls, self.decision_controls or 0, self.sampling_controls or 0)


@dataclass(frozen=True)
class LmEvalQuestions:
    """A run's questions from an lm-evaluation-harness task (``questions: {lm_eval_task: NAME}``):
    imported at the start of every run into ``RUN_DIR/questions.jsonl`` (rewritten only when it
    changes), each question the prompt the harness renders; the detectors read it raw.

    Attributes:
        lm_eval_task: the task (or group) name, as ``lm_eval --tasks`` takes it.
        include_path: a directory of further task YAMLs (``lm_eval --include_path``).
        num_fewshot: few-shot examples in each prompt, or ``task``: the count the task is evaluated with.
        limit: the first N documents only (``lm_eval --limit``).
        label: every question's label (1 = member, 0 = non-member; None: an audit).
    """

    lm_eval_task: str
    include_path: str | None = None
    num_fewshot: int | Literal["task"] = 0
    limit: int | None = None
    label: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.num_fewshot, int) and self.num_fewshot < 0:
            raise ConfigError(f"questions.num_fewshot must be >= 0 or 'task', got {self.num_fewshot}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"questions.limit must be at least 1, got {self.limit}")
        if self.label not in (None, 0, 1):
            raise ConfigError(f"questions.label must be 0 or 1, got {self.label}")


@dataclass(frozen=True)
class RunConfig:
    """A whole audit: questions → sets → activations → LaRA → detectors → fusion → report.

    Attributes:
        questions: questions JSONL (id, question[, label, split]); labels turn the audit into an
            evaluation. In a config file, also ``{lm_eval_task: NAME, …}`` (:class:`LmEvalQuestions`).
        questions_source: the lm-eval task the questions are imported from (set from ``questions``).
        model: the audited model and the engine that runs its detectors (:class:`ModelSettings`).
        name: the audited model's name in the run directory and the report.
        controls: further models audited the same way.
        run_dir: where everything goes (default ``runs/<config file stem>``).
        lara: compute the LaRA metrics and score.
        calibration: matched controls of every question (SPEC §8.1).
        verdict: the label-free verdict of each model (SPEC §8).
        accuracy: each model's accuracy beside the decisions (whole, flagged, the rest).
        distributed_timeout_min: under torchrun, how long a rank waits for the others (the other
            ranks wait while rank 0 generates, computes metrics and scores) before the job fails.
    """

    questions: str
    model: ModelSettings
    questions_source: LmEvalQuestions | None = None
    name: str = "model"
    controls: tuple[ControlModel, ...] = ()
    run_dir: str | None = None
    lara: bool = True
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    score: ScoreSettings = field(default_factory=ScoreSettings)
    detect: DetectSettings = field(default_factory=DetectSettings)
    fusion: tuple[FusionSpec, ...] = ()
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    verdict: VerdictSettings = field(default_factory=VerdictSettings)
    accuracy: AccuracySettings = field(default_factory=AccuracySettings)
    evaluate: EvaluateSettings = field(default_factory=EvaluateSettings)
    distributed_timeout_min: float = 240.0

    def __post_init__(self) -> None:
        if not self.distributed_timeout_min > 0:
            raise ConfigError(f"distributed_timeout_min must be positive, got {self.distributed_timeout_min}")
        names = [self.name] + [c.name for c in self.controls]
        for n in names:
            if not n or "/" in n or n.startswith("."):
                raise ConfigError(f"model name {n!r} must be a plain directory name")
        if len(set(names)) != len(names):
            raise ConfigError(f"model names must be distinct, got {', '.join(names)}")
        if not self.lara and not self.detect.names:
            raise ConfigError("nothing to run: set lara: true or give detect.names")
        references = [c.name for c in self.controls if c.reference]
        if len(references) > 1:
            raise ConfigError(
                f"at most one control can be the reference model; {', '.join(references)} all say reference: true"
            )

        needing = [n for n in self.detect.names if n in REGISTRY and REGISTRY[n].requires_reference]
        if needing and not references:
            raise ConfigError(
                f"detector(s) {', '.join(needing)} in 'detect.names' compare with a reference model: add a "
                "controls: entry with reference: true (e.g. the checkpoint before RL)"
            )

    @property
    def run_path(self) -> Path:
        """The run directory (``runs/run`` where a config built in code gives none)."""
        return Path(self.run_dir or "runs/run")

    @property
    def calibrating(self) -> bool:
        """Whether detectors score the questions' matched controls."""
        return bool(self.detect.names) and self.calibration.controls > 0

    @property
    def generation_config(self) -> GenerationConfig:
        """The generator's settings for this run: its K similars, and as many further similars
        drawn only as controls as ``calibration.decision_controls`` needs beyond K."""
        extra = max(0, self.calibration.most - self.generation.similars) if self.calibrating else 0
        return dataclasses.replace(self.generation, controls=max(self.generation.controls, extra))

    def reference_name(self) -> str | None:
        """The control marked ``reference: true``, if any."""
        return next((c.name for c in self.controls if c.reference), None)

    def models(self) -> list[tuple[str, ModelSettings]]:
        """(name, model config) of the audited model, then of each control."""
        out = [(self.name, self.model)]
        out += [(c.name, dataclasses.replace(self.model, source=c.source, base=c.base)) for c in self.controls]
        return out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_run_config(path: str | Path, sets: Sequence[str] = ()) -> RunConfig:
    """Read a run config, apply ``--set`` overrides, resolve relative paths, validate."""
    path = Path(path)
    data = load_yaml(path)
    data = resolve_paths(data, path.resolve().parent)
    overrides = [(keys, absolute_if_path(keys, value)) for keys, value in parse_set(sets)]
    data = decode_prompt_texts(apply_sets(data, overrides), PROMPT_TEXT_KEYS)
    if data.get("run_dir") is None:
        data["run_dir"] = str(Path("runs") / path.stem)
    return config_from_dict(with_lm_eval_questions(data))


def with_lm_eval_questions(data: dict[str, Any]) -> dict[str, Any]:
    """``questions: {lm_eval_task: …}`` → the run directory's ``questions.jsonl``, imported from that
    task (``questions_source``), and the detectors reading the harness's prompt as it is (raw,
    unless the config chose a format)."""
    source = data.get("questions")
    if not isinstance(source, Mapping):
        return data
    from_mapping(LmEvalQuestions, source, "questions")  # a bad key named as the file names it
    data = {**data, "questions": str(Path(data["run_dir"]) / "questions.jsonl"), "questions_source": dict(source)}
    detect = dict(data.get("detect") or {})
    if detect.get("prompt_format", "auto") == "auto":
        detect["prompt_format"] = "raw"
    data["detect"] = detect
    return data


def config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    """A validated :class:`RunConfig` from a mapping (missing and unknown keys are named; an
    engine's deprecated block of arguments read as ``model.engine_args``)."""
    if "model" in data:
        data = {**data, "model": read_old_engine_keys(data["model"])}
    return from_mapping(RunConfig, data)


def dump_config(config: RunConfig) -> str:
    """The resolved config as YAML (what the run used; loading it gives the same config — prompt
    texts are written with their backslashes doubled, as :func:`load_run_config` reads them)."""
    data = decode_prompt_texts(_plain(config.to_dict()), PROMPT_TEXT_KEYS, encode_prompt_text)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
