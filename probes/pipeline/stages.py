"""``lara run``'s stages up to the scores (generate, cache, metrics, score, detect; those reading
every model's scores are in :mod:`.report_stages`): each stage's ledger key (``<stage>_key``: what
its outputs depend on) beside its body, which reads its inputs from the run directory
(:mod:`.layout`) and writes its outputs there; :mod:`.stage_table` declares them, and :mod:`.run`
decides, through the ledger, which of them run."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from cache.config import ENGINE_FIELDS, CacheConfig, ModelConfig
from cache.distributed import Ranks
from cache.loading import load_model
from cache.runner import run_cache
from cache.sources import PACKAGE_PREFIX, resolve_source
from generation.identity import generator_identity
from generation.pipeline import run_generation
from generation.records import read_sets

from ..detection import ControlPlan, detect_questions
from ..lara.metrics_file import MetricsFile, compute_metrics
from ..lara.scoring import score_metrics
from ..lara.sets import distinct_texts
from ..responders.engines import close_engine, engine_key
from ..responders.local import PromptFormat
from ..responders.open import open_responder
from ..scores import CLEAN_SPLIT
from .config import RunConfig
from .layout import RunLayout
from .ledger import Ledger

logger = logging.getLogger(__name__)


class LazyModel:
    """Loads a model on first use, so a run whose model stages are all done never loads it; under
    torchrun (``ranks``) on this rank's device."""

    def __init__(self, config: ModelConfig, ranks: Ranks | None = None) -> None:
        self.config = config
        self.ranks = ranks
        self._loaded: Any = None

    def get(self) -> Any:
        if self._loaded is None:
            self._loaded = load_model(self.config if self.ranks is None else self.ranks.place(self.config))
        return self._loaded

    def release(self) -> None:
        self._loaded = None


def generation_settings(config: RunConfig) -> dict[str, Any]:
    """The generation settings that shape the sets (not where responses are cached or how many are in flight)."""
    settings = dataclasses.asdict(config.generation_config)
    if not settings["controls"]:
        settings.pop("controls")  # the key of a run without further controls is as it was
    for key in ("cache_dir", "concurrency", "timeout_s", "max_http_attempts", "backoff_s", "backoff_max_s"):
        settings["openai"].pop(key, None)
    if config.generation.backend == "offline":
        settings.pop("openai")
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
        identity.pop(key)
    if identity["base"] is None:
        identity.pop("base")  # keys of runs made before adapters were sources stay as they were
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


def generate(questions: list, output: Path, config: RunConfig, progress: bool) -> None:
    summary = run_generation(questions, output, config.generation_config, progress=progress, overwrite=True)
    logger.info("%s", summary.describe())


def cache_key(sets: str, identity: dict[str, Any], config: RunConfig) -> dict[str, Any]:
    """The cache stage's key: the sets, the model, the extraction settings."""
    return {"sets": sets, "model": identity, "extraction": dataclasses.asdict(config.extraction)}


def cache(run_dir: Path, name: str, config: RunConfig, model: LazyModel, progress: bool) -> None:
    layout = RunLayout(run_dir)
    texts = distinct_texts(read_sets(layout.sets))
    (run_dir / name).mkdir(parents=True, exist_ok=True)
    loaded = model.get()
    summary = run_cache(
        texts,
        layout.path(layout.model(name).acts),
        CacheConfig(model=loaded.config, extraction=config.extraction),
        loaded=loaded,
        progress=progress,
    )
    logger.info("%s", summary.describe())


def metrics_key(sets: str, acts: str, config: RunConfig) -> dict[str, Any]:
    """The metrics stage's key: the sets, the activations, the metric settings."""
    return {"sets": sets, "acts": acts, "metrics": dataclasses.asdict(config.metrics)}


def metrics(run_dir: Path, name: str, config: RunConfig, progress: bool) -> None:
    m, layout = config.metrics, RunLayout(run_dir)
    files = layout.model(name)
    summary = compute_metrics(
        layout.sets,
        layout.path(files.acts),
        layout.path(files.metrics),
        layers=list(m.layers) if m.layers else None,
        eps=m.eps,
        min_paraphrases=m.min_paraphrases,
        progress=progress,
    )
    logger.info("%s", summary.describe())


def score_key(metrics: str, questions: str, config: RunConfig) -> dict[str, Any]:
    """The score stage's key: the metrics, the questions (labels, splits), the score settings."""
    return {"metrics": metrics, "questions": questions, "score": dataclasses.asdict(config.score)}


def score(run_dir: Path, name: str, config: RunConfig, labels: dict[str, int | None] | None) -> None:
    s = config.score
    options = s.options()
    layout = RunLayout(run_dir)
    metrics = MetricsFile.read(layout.path(layout.model(name).metrics))
    result = score_metrics(
        metrics, s.clean_ref, options, labels=labels, n_folds=s.folds, seed=s.seed, variants=s.variants
    )
    table, meta = layout.model(name).lara
    result.table.write_csv(layout.path(table))
    result.write_info(layout.path(meta))
    info = result.info
    logger.info(
        "LaRA: %d questions scored against a clean reference of %d (%s)",
        info["n_questions"],
        info["n_reference"],
        info["clean_ref_mode"],
    )


def detect_key(
    questions: str,
    identity: dict[str, Any],
    config: RunConfig,
    name: str,
    reference: dict[str, Any] | None,
    controls: str | None,
) -> dict[str, Any]:
    """The detect stage's key: the questions, the model, the detector settings (not where answers
    are stored; a control is always run locally), the reference model's identity when a detector
    uses it, and the controls' texts and calibration when controls are scored."""

    detect = dataclasses.asdict(config.detect)
    detect.pop("store")
    if detect["clean_ref"] is None:
        detect.pop("clean_ref")  # keys of runs made before the option stay as they were
    if name != config.name:
        detect["endpoint"] = None
    key = {
        "questions": questions,
        "model": identity,
        "detect": detect,
        "reference": reference,
        "calibration": {"controls": controls, **_calibration_key(config)} if config.calibrating else None,
    }
    engine = None if detect["endpoint"] is not None else engine_key(dict(config.models())[name])
    if engine is not None:  # hf: the key as it was before engines existed
        key["engine"] = engine
    return key


def _calibration_key(config: RunConfig) -> dict[str, Any]:
    """The calibration settings in a stage's key (without ``decision_controls`` when unset: the key
    of a run without further controls is as it was)."""
    settings = dataclasses.asdict(config.calibration)
    for key in ("decision_controls", "sampling_controls"):
        if settings[key] is None:
            settings.pop(key)
    return settings


def detect(
    run_dir: Path,
    name: str,
    config: RunConfig,
    model: LazyModel,
    questions: list,
    progress: bool,
    detectors: list[Any],
    reference: tuple[str, LazyModel] | None,
    ranks: Ranks | None = None,
) -> None:
    """Score the questions with ``detectors`` (built once per run, by the validation) on model ``name`` (``reference``: the
    reference model's name and lazy model, for the detectors that compare with one; ``ranks``:
    under torchrun, every batch call split across the ranks, rank 0 writing)."""

    d = config.detect
    prompt_format = PromptFormat(mode=d.prompt_format, template=d.template, system=d.system_prompt)
    opened = {"batch_size": d.batch_size, "ranks": ranks, "progress": progress}
    endpoint = d.endpoint if name == config.name else None
    responder = open_responder(
        model.get, prompt_format, store_path(run_dir, name, d.store), endpoint=endpoint, engine=model.config, **opened
    )
    reference_responder = None
    if reference is not None:
        ref_name, ref_model = reference
        # the reference model compared with itself reads its own answers through the same engine (every difference 0)
        reference_responder = (
            responder
            if ref_name == name
            else open_responder(ref_model.get, prompt_format, store_path(run_dir, ref_name, d.store), **opened)
        )
    controls = None
    if config.calibrating:
        c = config.calibration
        controls = ControlPlan.from_sets(
            read_sets(RunLayout(run_dir).sets), c.controls, c.decision_controls, c.sampling_controls, c.detectors
        )

    try:
        summary = detect_questions(
            scored_questions(questions, d.clean_ref),
            detectors,
            responder,
            reference=reference_responder,
            sampling_temperature=d.sampling_temperature,
            controls=controls,
            progress=progress,
            ranks=ranks,
        )
    finally:
        close_engine(responder)  # a vLLM engine's memory is free for the next model
    if summary is None:  # a rank other than the main one
        return
    layout = RunLayout(run_dir)
    summary.write(layout.path(layout.model(name).detector_scores))
    logger.info("%s", summary.describe())


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
