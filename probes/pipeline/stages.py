"""``lara run``'s stages up to the scores (generate, cache, metrics, score, detect; those reading
every model's scores are in :mod:`.report_stages`): each stage's ledger key (``<stage>_key``: what
its outputs depend on) beside its body, which reads its inputs from the run directory
(:mod:`.layout`) and writes its outputs there through the operation it shares with its command
(:mod:`probes.operations`); both are ``(run: RunState, model) → …``. :mod:`.stage_table` declares
them, and :mod:`.run` decides, through the ledger, which of them run."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from cache.config import CacheConfig, ModelConfig
from cache.distributed import Ranks
from cache.loading import auto_dtype
from cache.runner import run_cache
from cache.sources import PACKAGE_PREFIX, resolve_source
from generation.identity import generator_identity
from generation.pipeline import run_generation
from generation.records import read_sets

from ..detectors.on_controls import ControlPlan
from ..lara.sets import distinct_texts
from ..operations.accuracy import greedy_budget, judge_answers, write_accuracy
from ..operations.detect import SAME_MODEL, DetectOptions, ModelAccess, opened_responders
from ..operations.detect import detect as detect_operation
from ..operations.metrics import write_metrics
from ..operations.score import write_scores
from ..responders.counter_sampler import SAMPLER_VERSION
from ..responders.engines import engine_key
from ..responders.local import PromptFormat
from ..responders.model_settings import ENGINE_FIELDS
from ..scores import CLEAN_SPLIT
from .config import RunConfig
from .layout import SETS, RunLayout
from .ledger import Ledger
from .run_state import RunState

logger = logging.getLogger(__name__)


def generation_settings(config: RunConfig) -> dict[str, Any]:
    """The generation settings that shape the sets (not where responses are cached or how many are in flight)."""
    settings = dataclasses.asdict(config.generation_config)
    if not settings["controls"]:
        settings.pop("controls")  # the key of a run without further controls is as it was
    for key in ("cache_dir", "concurrency", "timeout_s", "max_http_attempts", "backoff_s", "backoff_max_s"):
        settings["openai"].pop(key, None)
    if config.generation.backend == "offline":
        settings.pop("openai")
    if config.generation.backend != "local":
        settings.pop("local")
    return settings


def generate_inputs(config: RunConfig, questions_digest: str) -> dict[str, Any]:
    """The generate stage's key: the questions, the settings, and the generator's identity (its
    algorithm version, a digest of its code, the content of each LLM prompt template), so an
    edited template or an upgraded generator redoes the sets."""

    return {
        "questions": questions_digest,
        "generation": generation_settings(config),
        "generator": generator_identity(config.generation_config),
    }


def model_identity(model: ModelConfig, ledger: Ledger) -> dict[str, Any]:
    """The model settings plus the content digest of a local source: a checkpoint directory, a
    GGUF file (a ``package:`` one too), or an adapter's directory and every base under it (SPEC §9)."""
    identity: dict[str, Any] = dataclasses.asdict(model)
    for key in ENGINE_FIELDS:  # what runs the detectors is in the detect stage's key alone (detect_key)
        identity.pop(key, None)  # a plain cache.ModelConfig has neither
    if identity["base"] is None:
        identity.pop("base")  # keys of runs made before adapters were sources stay as they were
    if model.dtype == "auto":  # float32 on a CPU, the checkpoint's elsewhere: the key holds which
        identity["dtype"] = f"auto: {auto_dtype(model)}"
    path = Path(model.source).expanduser()
    if not path.exists() and not model.source.startswith(PACKAGE_PREFIX):
        return identity  # a hub id: its revision is in the settings
    source = resolve_source(model.source, model.revision, model.base)
    identity["content"] = ledger.digest(source.location)
    if source.kind == "adapter":
        identity["base_content"] = [
            ledger.digest(base.location) if base.is_local else base.identity() for base in source.chain()[1:]
        ]
    return identity


def generate_key(run: RunState, model: None) -> dict[str, Any]:
    return generate_inputs(run.config, run.q_digest)


def generate(run: RunState, model: None) -> None:
    summary = run_generation(
        run.questions, run.layout.sets, run.config.generation_config, progress=run.progress, overwrite=True
    )
    logger.info("%s", summary.describe())


def cache_key(run: RunState, model: str) -> dict[str, Any]:
    """The cache stage's key: the sets, the model, the extraction settings."""
    return {
        "sets": run.digests[SETS],
        "model": run.identity(model),
        "extraction": dataclasses.asdict(run.config.extraction),
    }


def cache(run: RunState, model: str) -> None:
    texts = distinct_texts(read_sets(run.layout.sets))
    (run.run_dir / model).mkdir(parents=True, exist_ok=True)
    loaded = run.models[model].get()
    summary = run_cache(
        texts,
        run.layout.path(run.layout.model(model).acts),
        CacheConfig(model=loaded.config, extraction=run.config.extraction),
        loaded=loaded,
        progress=run.progress,
    )
    logger.info("%s", summary.describe())


def metrics_key(run: RunState, model: str) -> dict[str, Any]:
    """The metrics stage's key: the sets, the activations, the metric settings."""
    acts = run.digests[run.layout.model(model).acts]
    return {"sets": run.digests[SETS], "acts": acts, "metrics": dataclasses.asdict(run.config.metrics)}


def metrics(run: RunState, model: str) -> None:
    files = run.layout.model(model)
    summary = write_metrics(
        run.layout.sets,
        run.layout.path(files.acts),
        run.layout.path(files.metrics),
        run.config.metrics,
        progress=run.progress,
    )
    logger.info("%s", summary.describe())


def score_key(run: RunState, model: str) -> dict[str, Any]:
    """The score stage's key: the metrics, the questions (labels, splits), the score settings."""
    metrics_digest = run.digests[run.layout.model(model).metrics]
    return {"metrics": metrics_digest, "questions": run.q_digest, "score": dataclasses.asdict(run.config.score)}


def score(run: RunState, model: str) -> None:
    files = run.layout.model(model)
    table = run.layout.path(files.lara[0])
    info = write_scores(run.layout.path(files.metrics), run.config.score, table, labels=run.labels).info
    logger.info(
        "LaRA: %d questions scored against a clean reference of %d (%s)",
        info["n_questions"],
        info["n_reference"],
        info["clean_ref_mode"],
    )


def detect_key(run: RunState, model: str) -> dict[str, Any]:
    """The detect stage's key: the questions, the model, the detector settings (each detector's
    parameters as the built detector holds them; not where answers are stored; a control is always
    run locally), the reference model's identity when a detector uses it, and the controls' texts
    and calibration when controls are scored."""

    config = run.config
    detect = dataclasses.asdict(config.detect)
    detect.pop("store")
    built = {d.name: d for d in run.detector_objects()}
    detect["params"] = {
        name: {key: getattr(built[name], key) for key in params} if name in built else params
        for name, params in detect["params"].items()
    }
    if detect["clean_ref"] is None:
        detect.pop("clean_ref")  # keys of runs made before the option stay as they were
    if model != config.name:
        detect["endpoint"] = None
    reference = run.identity(run.reference) if run.reference is not None and run.uses_reference() else None
    controls = run.controls_digest() if config.calibrating else None
    key = {
        "questions": run.q_digest,
        "model": run.identity(model),
        "detect": detect,
        "reference": reference,
        # the controls' digest under its own name: the settings' "controls" (a count) must not hide it
        "calibration": {**_calibration_key(config), "control_sets": controls} if config.calibrating else None,
    }
    engine = None if detect["endpoint"] is not None else engine_key(dict(config.models())[model])
    if engine is not None:  # hf: the key as it was before engines existed
        key["engine"] = engine
    elif detect["endpoint"] is None:
        key["sampler"] = SAMPLER_VERSION  # the built-in sampler's answers change with its version
    return key


def detect_ranks(run: RunState, model: str) -> Ranks | None:
    """The ranks a detect stage splits its work over: none for a served audited model (its server
    spreads the work)."""
    served = run.config.detect.endpoint is not None and model == run.config.name
    return None if served else run.ranks


def _calibration_key(config: RunConfig) -> dict[str, Any]:
    """The calibration settings in a stage's key (without ``decision_controls`` when unset: the key
    of a run without further controls is as it was)."""
    settings = dataclasses.asdict(config.calibration)
    for key in ("decision_controls", "sampling_controls"):
        if settings[key] is None:
            settings.pop(key)
    return settings


def detect(run: RunState, model: str) -> None:
    """Score the questions with the run's detectors (built once, by the validation) on ``model``;
    the reference model's responder for the detectors that compare with one (the model itself when
    it is its own reference: every difference 0); under torchrun, every batch call split across the
    ranks, rank 0 writing."""
    config, d = run.config, run.config.detect
    reference = None
    if run.uses_reference():
        reference = SAME_MODEL if run.reference == model else model_access(run, run.reference, reference=True)
    controls = None
    if config.calibrating:
        c = config.calibration
        sets = read_sets(run.layout.sets)
        controls = ControlPlan.from_sets(sets, c.controls, c.decision_controls, c.sampling_controls, c.detectors)
    summary = detect_operation(
        scored_questions(run.questions, d.clean_ref),
        run.detector_objects(),
        model_access(run, model),
        detect_options(run, detect_ranks(run, model), controls),
        reference,
        output=run.layout.path(run.layout.model(model).detector_scores),
    )
    if summary is not None:  # None: a rank other than the main one
        logger.info("%s", summary.describe())


def detect_options(run: RunState, ranks: Ranks | None = None, controls: ControlPlan | None = None) -> DetectOptions:
    """How the run's detectors (and its accuracy stage) put questions to a model."""
    d = run.config.detect
    return DetectOptions(
        prompt_format(run.config),
        batch_size=d.batch_size,
        decoding=d.decoding,
        sampling_temperature=d.sampling_temperature,
        controls=controls,
        progress=run.progress,
        ranks=ranks,
    )


def prompt_format(config: RunConfig) -> PromptFormat:
    """How the run puts a question to a model (``detect.prompt_format``, ``template``, ``system_prompt``)."""
    d = config.detect
    return PromptFormat(mode=d.prompt_format, template=d.template, system=d.system_prompt)


def model_access(run: RunState, name: str, reference: bool = False) -> ModelAccess:
    """Model ``name`` as the run's detectors reach it (:func:`config_model_access`)."""
    return config_model_access(run.config, name, run.models[name], reference)


def config_model_access(config: RunConfig, name: str, lazy: Any, reference: bool = False) -> ModelAccess:
    """Model ``name`` (``lazy``: its ``LazyModel``) as a run of ``config`` reaches it: its response
    store, the audited model's endpoint where it is served, the model's engine — as another
    model's ``reference``, always local on the hf engine, which feeds every detector exactly."""
    d = config.detect
    endpoint = d.endpoint if name == config.name and not reference else None
    engine = None if reference else lazy.config
    return ModelAccess(lazy.get, store_path(config.run_path, name, d.store), engine=engine, endpoint=endpoint)


def accuracy_key(run: RunState, model: str) -> dict[str, Any]:
    """The accuracy stage's key: the questions, the model, how it is prompted, the answer's budget."""
    d = run.config.detect
    return {
        "questions": run.q_digest,
        "model": run.identity(model),
        "prompt": [d.prompt_format, d.template, d.system_prompt],
        "endpoint": d.endpoint if model == run.config.name else None,
        "engine": engine_key(dict(run.config.models())[model]),
        "max_new_tokens": greedy_budget(run.config.accuracy, run.detector_objects()),
    }


def accuracy(run: RunState, model: str) -> None:
    """``RUN/<model>/accuracy.csv``: each audited question's greedy answer judged by the verifier
    (:mod:`probes.operations.accuracy`), read back from the store where a detector generated it."""
    with opened_responders(model_access(run, model), None, detect_options(run)) as (responder, _):
        rows = judge_answers(run.questions, responder, greedy_budget(run.config.accuracy, run.detector_objects()))
    write_accuracy(rows, run.layout.path(run.layout.model(model).accuracy))


def scored_questions(questions: list, clean_ref: int | None) -> list:
    """The questions the detectors score: every one outside split ``clean_ref`` and the first
    ``clean_ref`` of those in it (None: all), in file order."""
    if clean_ref is None:
        return list(questions)
    clean = [q for q in questions if q.split == CLEAN_SPLIT]
    kept = {id(q) for q in clean[:clean_ref]}
    if len(clean) > clean_ref:
        logger.info(
            "the detectors score %d of the %d questions of split %s (detect.clean_ref); LaRA uses all",
            len(kept),
            len(clean),
            CLEAN_SPLIT,
        )
    return [q for q in questions if q.split != CLEAN_SPLIT or id(q) in kept]


def store_path(run_dir: Path, name: str, store: str | None) -> Path:
    """The response store of model ``name``: ``STORE/<name>.sqlite`` or ``RUN_DIR/<name>/responses.sqlite``."""
    path = RunLayout(run_dir).store(name, store)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
