"""``lara run``: questions → perturbation sets → activations → LaRA metrics → LaRA score →
output-level detectors → fusion → evaluation report, for the audited model and each control.

Run directory::

    RUN_DIR/config.resolved.yaml   the settings the run used
    RUN_DIR/run.log                every run's log, appended
    RUN_DIR/ledger/                stage records (see :mod:`.ledger`)
    RUN_DIR/sets.jsonl             perturbation sets (shared by every model)
    RUN_DIR/<model>/acts.h5        pooled activations of every text of the sets
    RUN_DIR/<model>/metrics.h5     zRSM, DC, zRSI per question and layer
    RUN_DIR/<model>/lara.csv       LaRA scores (+ .meta.json)
    RUN_DIR/<model>/detectors.csv  output-level detector scores (+ .raw.csv, .meta.json)
    RUN_DIR/<model>/responses.sqlite  the audited model's completions and scores, reused on a rerun
    RUN_DIR/<model>/scores.csv     every score column, fused columns included (+ .meta.json: how each was fused)
    RUN_DIR/<model>/report/        report.json, report.md, plots
    RUN_DIR/report.md              the detection tables of every model side by side
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cache.config import CacheConfig, ModelConfig

from ..detect import detector_names
from ..detectors import REGISTRY
from ..errors import InputError
from .config import RunConfig, dump_config
from .ledger import Ledger

logger = logging.getLogger(__name__)

STAGES = ("generate", "cache", "metrics", "score", "detect", "fuse", "evaluate")


@dataclass
class RunResult:
    """What a run did: the stages run and skipped, the report files and the combined text."""

    run_dir: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    reports: dict[str, Path] = field(default_factory=dict)
    summary: str = ""


class _LazyModel:
    """Loads a model on first use, so a run whose model stages are all done never loads it."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self._loaded: Any = None

    def get(self) -> Any:
        if self._loaded is None:
            from cache.loading import load_model

            self._loaded = load_model(self.config)
        return self._loaded

    def release(self) -> None:
        self._loaded = None


def run_pipeline(config: RunConfig, progress: bool = True) -> RunResult:
    """Run (or finish, or update) the audit described by ``config``."""
    run_dir = Path(config.run_dir or "runs/run")
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / "run.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        return _run(config, run_dir, progress)
    finally:
        root.removeHandler(handler)
        handler.close()


def _run(config: RunConfig, run_dir: Path, progress: bool) -> RunResult:
    from generation.records import read_questions

    (run_dir / "config.resolved.yaml").write_text(dump_config(config), encoding="utf-8")
    ledger = Ledger(run_dir)
    questions_path = Path(config.questions)
    if not questions_path.is_file():
        raise InputError(f"questions file not found: {questions_path} (config key 'questions')")
    questions = read_questions(questions_path)
    q_digest = ledger.digest(questions_path)
    labels: dict[str, int | None] | None = {q.id: q.label for q in questions}
    n_labelled = sum(v is not None for v in labels.values())
    if not n_labelled:
        labels = None  # an audit: scores and their distributions, no evaluation
    splits = {q.id: q.split for q in questions}
    logger.info("run %s: %d questions (%d labelled) from %s; models: %s", run_dir, len(questions), n_labelled,
                questions_path, ", ".join(n for n, _ in config.models()))

    sets_digest = None
    if config.lara:
        sets_digest = ledger.run(
            "generate", {"questions": q_digest, "generation": _generation_settings(config)}, ["sets.jsonl"],
            lambda: _generate(questions, run_dir / "sets.jsonl", config, progress),
        )["sets.jsonl"]

    result = RunResult(run_dir)
    sections = []
    models = {name: _LazyModel(model_config) for name, model_config in config.models()}
    reference = config.reference_name()
    for name, model_config in config.models():
        model = models[name]
        identity = _model_identity(model_config, ledger)
        tables: dict[str, str] = {}
        metrics_rel = metrics = None
        if config.lara:
            acts = ledger.run(
                f"cache/{name}", {"sets": sets_digest, "model": identity, "extraction": dataclasses.asdict(config.extraction)},
                [f"{name}/acts.h5"], lambda: _cache(run_dir, name, config, model, progress),
            )[f"{name}/acts.h5"]
            metrics_rel = f"{name}/metrics.h5"
            metrics = ledger.run(
                f"metrics/{name}", {"sets": sets_digest, "acts": acts, "metrics": dataclasses.asdict(config.metrics)},
                [metrics_rel], lambda: _metrics(run_dir, name, config, progress),
            )[metrics_rel]
            tables.update(ledger.run(
                f"score/{name}", {"metrics": metrics, "questions": q_digest, "score": dataclasses.asdict(config.score)},
                [f"{name}/lara.csv", f"{name}/lara.meta.json"], lambda: _score(run_dir, name, config, labels),
            ))
        if config.detect.names:
            tables.update(_detect_stage(ledger, run_dir, name, config, models, questions,
                                        {"questions": q_digest, "model": identity}, progress))
        score_tables = {k: v for k, v in tables.items() if k.endswith(".csv") and not k.endswith(".raw.csv")}
        scores = ledger.run(
            f"fuse/{name}", {"tables": score_tables, "questions": q_digest,
                             "fusion": [dataclasses.asdict(f) for f in config.fusion]},
            [f"{name}/scores.csv", f"{name}/scores.meta.json"], lambda: _fuse(run_dir, name, config, list(score_tables), labels, splits),
        )[f"{name}/scores.csv"]
        ledger.run(
            f"evaluate/{name}", {"scores": scores, "questions": q_digest, "metrics": metrics,
                                 "evaluate": dataclasses.asdict(config.evaluate)},
            [f"{name}/report"], lambda: _evaluate(run_dir, name, config, labels, metrics_rel),
        )
        result.reports[name] = run_dir / name / "report"
        sections.append(_section(run_dir, name, config))
        if name != reference:
            model.release()  # the reference model stays loaded for the models after it
    result.summary = "\n\n".join(sections)
    (run_dir / "report.md").write_text(result.summary + "\n", encoding="utf-8")
    result.ran, result.skipped = list(ledger.ran), list(ledger.skipped)
    logger.info("run %s: %d stages run, %d up to date", run_dir, len(ledger.ran), len(ledger.skipped))
    return result


def _generation_settings(config: RunConfig) -> dict[str, Any]:
    """The generation settings that shape the sets (not where responses are cached or how many are in flight)."""
    settings = dataclasses.asdict(config.generation)
    for key in ("cache_dir", "concurrency", "timeout_s", "max_http_attempts", "backoff_s", "backoff_max_s"):
        settings["openai"].pop(key, None)
    if config.generation.backend == "offline":
        settings.pop("openai")
    return settings


def _model_identity(model: ModelConfig, ledger: Ledger) -> dict[str, Any]:
    """The model settings plus, for a local checkpoint, the content digest of its directory."""
    identity: dict[str, Any] = dataclasses.asdict(model)
    path = Path(model.source).expanduser()
    if path.is_dir():
        identity["content"] = ledger.digest(path)
    return identity


def _generate(questions: list, output: Path, config: RunConfig, progress: bool) -> None:
    from generation.pipeline import run_generation

    summary = run_generation(questions, output, config.generation, progress=progress, overwrite=True)
    logger.info("%s", summary.describe())


def _cache(run_dir: Path, name: str, config: RunConfig, model: _LazyModel, progress: bool) -> None:
    from cache.runner import run_cache
    from generation.records import read_sets

    from ..lara.sets import distinct_texts

    texts = distinct_texts(read_sets(run_dir / "sets.jsonl"))
    (run_dir / name).mkdir(parents=True, exist_ok=True)
    loaded = model.get()
    summary = run_cache(texts, run_dir / name / "acts.h5", CacheConfig(model=loaded.config, extraction=config.extraction),
                        loaded=loaded, progress=progress)
    logger.info("%s", summary.describe())


def _metrics(run_dir: Path, name: str, config: RunConfig, progress: bool) -> None:
    from ..lara.metrics_file import compute_metrics

    m = config.metrics
    summary = compute_metrics(run_dir / "sets.jsonl", run_dir / name / "acts.h5", run_dir / name / "metrics.h5",
                              layers=list(m.layers) if m.layers else None, eps=m.eps, min_paraphrases=m.min_paraphrases,
                              progress=progress)
    logger.info("%s", summary.describe())


def _score(run_dir: Path, name: str, config: RunConfig, labels: dict[str, int | None] | None) -> None:
    from ..lara.metrics_file import MetricsFile
    from ..lara.protocol import ScoreOptions
    from ..lara.scoring import score_metrics

    s = config.score
    options = ScoreOptions(metric_set=s.metric_set, layers=s.layers, dc=s.dc, outer_abs=s.outer_abs, eps=s.eps,
                           zero_scale=s.zero_scale)
    metrics = MetricsFile.read(run_dir / name / "metrics.h5")
    result = score_metrics(metrics, s.clean_ref, options, labels=labels, n_folds=s.folds,
                           seed=s.seed, variants=s.variants)
    result.table.write_csv(run_dir / name / "lara.csv")
    result.write_info(run_dir / name / "lara.meta.json")
    info = result.info
    logger.info("LaRA: %d questions scored against a clean reference of %d (%s)", info["n_questions"],
                info["n_reference"], info["clean_ref_mode"])


def _detect_stage(ledger: Ledger, run_dir: Path, name: str, config: RunConfig, models: dict[str, _LazyModel],
                  questions: list, key: dict[str, Any], progress: bool) -> dict[str, str]:
    """The detect stage of model ``name`` through the ledger; ``key`` holds the question and model
    digests, to which the detector settings and, when a detector uses it, the reference model's
    identity are added. Returns the outputs' digests."""
    detect = dataclasses.asdict(config.detect)
    detect.pop("store")
    if name != config.name:
        detect["endpoint"] = None  # controls are always run locally
    reference = config.reference_name()
    names = detector_names(config.detect.names, reference=reference is not None)
    uses_reference = reference is not None and any(REGISTRY[n].requires_reference for n in names if n in REGISTRY)
    key = {**key, "detect": detect,
           "reference": _model_identity(dict(config.models())[reference], ledger) if uses_reference else None}
    return ledger.run(
        f"detect/{name}", key, [f"{name}/detectors.csv", f"{name}/detectors.raw.csv", f"{name}/detectors.meta.json"],
        lambda: _detect(run_dir, name, config, models[name], questions, progress, names,
                        (reference, models[reference]) if uses_reference else None),
    )


def _detect(run_dir: Path, name: str, config: RunConfig, model: _LazyModel, questions: list, progress: bool,
            names: list[str], reference: tuple[str, _LazyModel] | None) -> None:
    """Score the questions with the detectors ``names`` on model ``name`` (``reference``: the
    reference model's name and lazy model, for the detectors that compare with one)."""
    from ..detect import run_detectors
    from ..responders.local import LocalResponder, PromptFormat
    from ..responders.store import CachedResponder, ResponseStore

    d = config.detect
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise InputError(f"unknown detector {', '.join(unknown)} in 'detect.names'; known: {', '.join(REGISTRY)}")
    prompt_format = PromptFormat(mode=d.prompt_format, template=d.template, system=d.system_prompt)
    if d.endpoint is not None and name == config.name:
        from ..responders.openai_api import OpenAIResponder

        e = d.endpoint
        backend: Any = OpenAIResponder(e.base_url, e.model, api_key_env=e.api_key_env, top_logprobs=e.top_logprobs,
                                       concurrency=e.concurrency)
    else:
        backend = LocalResponder(model.get(), prompt_format, batch_size=d.batch_size)
    responder = CachedResponder(backend, ResponseStore(_store_path(run_dir, name, d.store)))
    reference_responder = None
    if reference is not None:
        ref_name, ref_model = reference
        reference_responder = CachedResponder(LocalResponder(ref_model.get(), prompt_format, batch_size=d.batch_size),
                                              ResponseStore(_store_path(run_dir, ref_name, d.store)))
    clean = [q.question for q in questions if q.split == "clean_ref"]
    summary = run_detectors(names, [q.id for q in questions], [q.question for q in questions], responder, d.params,
                            clean_questions=clean, progress=progress, reference=reference_responder,
                            sampling_temperature=d.sampling_temperature)
    summary.write(run_dir / name / "detectors.csv")
    logger.info("%s", summary.describe())


def _store_path(run_dir: Path, name: str, store: str | None) -> Path:
    """The response store of model ``name``: ``STORE/<name>.sqlite`` or ``RUN_DIR/<name>/responses.sqlite``."""
    path = Path(store) / f"{name}.sqlite" if store else run_dir / name / "responses.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _fuse(run_dir: Path, name: str, config: RunConfig, tables: list[str], labels: dict[str, int | None] | None,
          splits: dict[str, str | None]) -> None:
    import numpy as np

    from ..fusion import fuse
    from ..scores import ScoreTable, join_tables

    table = join_tables([ScoreTable.read_csv(run_dir / t) for t in tables])
    meta: dict[str, Any] = {}
    for spec in config.fusion:
        weights = np.array(spec.weights) if spec.weights else None
        fused = fuse(table, list(spec.detectors), spec.method, weights, labels, splits, spec.clean_ref, spec.folds, spec.seed)
        table.add(spec.column(), fused.values)
        meta[spec.column()] = {"method": spec.method, "detectors": list(spec.detectors), **fused.to_dict()}
        logger.info("fusion %s: %s", spec.column(), fused.describe())
    table.write_csv(run_dir / name / "scores.csv")
    (run_dir / name / "scores.meta.json").write_text(json.dumps({"fusion": meta}, indent=1) + "\n", encoding="utf-8")


def _evaluate(run_dir: Path, name: str, config: RunConfig, labels: dict[str, int | None] | None,
              metrics_rel: str | None) -> None:
    from ..lara.metrics_file import MetricsFile
    from ..report import build_report, write_report
    from ..scores import ScoreTable

    e = config.evaluate
    table = ScoreTable.read_csv(run_dir / name / "scores.csv")
    metrics = MetricsFile.read(run_dir / metrics_rel) if metrics_rel and labels is not None else None
    report = build_report(table, labels, metrics, baseline=e.baseline, n_bootstrap=e.bootstrap,
                          seed=e.seed, fpr=e.fpr, strict=e.strict,
                          inputs={"model": name, "scores": f"{name}/scores.csv", "questions": str(config.questions)})
    write_report(report, run_dir / name / "report", table, labels, plots=e.plots)


def _section(run_dir: Path, name: str, config: RunConfig) -> str:
    """The model's detection table (or score audit) from its report.md, under a heading."""
    text = (run_dir / name / "report" / "report.md").read_text(encoding="utf-8")
    body = text.split("## Paired comparison")[0].split("## Layer analysis")[0].split("## Plots")[0]
    body = body.replace("# LaRA Probes report", "").strip()
    role = "audited model" if name == config.name else "control"
    source = dict(config.models())[name].source
    return f"# {name} ({role}: {source})\n\n{body}"
