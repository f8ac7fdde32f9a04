"""``lara run``: questions → perturbation sets → activations → LaRA metrics → LaRA score →
output-level detectors (and their matched controls) → fusion → verdict → evaluation report, for
the audited model and each control.

The run directory's files: :mod:`.layout` (every path of a run in one place).

Models are processed in two passes: first what needs the model itself (activations, LaRA,
detectors), then what needs every model's scores (fusion with the reference model's differences,
verdicts, reports).

Under torchrun (RANK / WORLD_SIZE set, more than one process) the run is data-parallel: rank 0
holds the run directory's lock, decides through the ledger what is done, and alone generates,
computes metrics and scores; the activation and detector stages run on every rank, each on its
own device and its share of the texts and batch calls; once the model stages are done the other
ranks exit and rank 0 fuses, judges and reports. One process without a launcher runs as before.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cache.distributed import Ranks
from cache.outputs import check_writable

from ..detection import detector_names, has_answer
from ..detectors import REGISTRY
from ..errors import InputError
from ..scores import CLEAN_SPLIT
from . import stages
from .config import RunConfig, dump_config
from .layout import SETS, RunLayout
from .ledger import Ledger
from .lock import run_directory_lock
from .validate import validate_run

logger = logging.getLogger(__name__)

STAGES = ("generate", "cache", "metrics", "score", "detect", "fuse", "verdict", "evaluate")


@dataclass
class RunResult:
    """What a run did: the stages run and skipped, the report files and the combined text (empty on
    the ranks other than 0 of a torchrun job: ``main`` is False there)."""

    run_dir: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    reports: dict[str, Path] = field(default_factory=dict)
    summary: str = ""
    verdicts: str = ""
    main: bool = True
    undecided: list[str] = field(default_factory=list)  # models whose verdict is "no verdict"


@dataclass
class _ModelState:
    """Digests and outputs of one model's stages, filled in as they run."""

    identity: dict[str, Any]
    tables: dict[str, str] = field(default_factory=dict)  # LaRA and detector outputs -> digest
    metrics: str | None = None
    metrics_rel: str | None = None


def run_pipeline(config: RunConfig, progress: bool = True) -> RunResult:
    """Run (or finish, or update) the audit described by ``config`` (data-parallel under torchrun)."""
    run_dir = Path(config.run_dir or "runs/run")
    check_writable(run_dir, "run directory", directory=True)  # before anything is generated or loaded
    ranks = Ranks.from_env()
    handler = logging.FileHandler(RunLayout(run_dir).log, encoding="utf-8")
    tag = f" rank{ranks.rank}" if ranks is not None else ""
    handler.setFormatter(logging.Formatter(f"%(asctime)s{tag} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        if ranks is None:
            with run_directory_lock(run_dir):
                return _Run(config, run_dir, progress).run()
        ranks.start_for(config.model, timeout_s=config.distributed_timeout_min * 60)
        if not ranks.is_main:
            ranks.barrier()  # rank 0 holds the lock (or has failed, and torchrun stops the job)
            return _Run(config, run_dir, False, ranks).run()
        with run_directory_lock(run_dir):
            ranks.barrier()
            return _Run(config, run_dir, progress, ranks).run()
    finally:
        root.removeHandler(handler)
        handler.close()


class _Run:
    """One ``lara run``: its inputs read once, its stages run through the ledger."""

    def __init__(self, config: RunConfig, run_dir: Path, progress: bool, ranks: Ranks | None = None) -> None:
        from generation.records import read_questions

        self.run_dir, self.progress, self.ranks = run_dir, progress, ranks
        self.layout = RunLayout(run_dir)
        self.writes = ranks is None or ranks.is_main  # the process that writes the run's shared files
        self.ledger = Ledger(run_dir, ranks)
        path = Path(config.questions)
        if not path.is_file():
            raise InputError(
                f"questions file not found: {path} (config key 'questions'); build one from a benchmark with "
                "lara questions import (and lara questions pair for members + non-members), as the comments "
                "at the top of the paper's config show"
            )
        self.questions = read_questions(path)
        self.config = config = with_chat_system_turn(config, self.questions)
        validate_run(config, self.questions)  # every key checked before stage 1
        self.q_digest = self.ledger.digest(path)
        if self.writes:
            self.layout.config.write_text(dump_config(config), encoding="utf-8")
            self._record_question_provenance(path)
        labels: dict[str, int | None] = {q.id: q.label for q in self.questions}
        n_labelled = sum(v is not None for v in labels.values())
        self.labels = labels if n_labelled else None  # without labels: an audit, no evaluation
        self.splits = {q.id: q.split for q in self.questions}
        self.reference = config.reference_name()
        self.models = {name: stages.LazyModel(model, ranks) for name, model in config.models()}
        self.states: dict[str, _ModelState] = {}
        logger.info(
            "run %s: %d questions (%d labelled) from %s; models: %s",
            run_dir,
            len(self.questions),
            n_labelled,
            path,
            ", ".join(self.models),
        )

    def _record_question_provenance(self, path: Path) -> None:
        """``RUN_DIR/questions.meta.json``: where the questions came from (``lara questions import``/``pair``), when known."""
        from ..questions.importing import provenance_path

        source = provenance_path(path)
        target = self.layout.questions_meta
        if source.is_file():
            target.write_bytes(source.read_bytes())
        elif target.exists():
            target.unlink()

    def run(self) -> RunResult:
        config, ledger = self.config, self.ledger
        self.sets = None
        if config.lara or config.calibrating:
            self.sets = ledger.run(
                "generate",
                stages.generate_inputs(config, self.q_digest),
                [SETS],
                lambda: stages.generate(self.questions, self.layout.sets, config, self.progress),
            )[SETS]
        for name, model in config.models():
            self.states[name] = state = _ModelState(stages.model_identity(model, ledger))
            if config.lara:
                self._lara_stages(name, state)
            if config.detect.names:
                state.tables.update(self._detect_stage(name, state))
            if name != self.reference:
                self.models[name].release()  # the reference model stays loaded for the models after it
        if self.ranks is not None:  # what is left reads every model's scores: rank 0's alone
            self.ranks.barrier()
            self.ledger.solo()
            if not self.ranks.is_main:
                return RunResult(self.run_dir, ran=list(ledger.ran), skipped=list(ledger.skipped), main=False)
        result = RunResult(self.run_dir)
        for name in self.models:
            self._report_stages(name, self.states[name])
            result.reports[name] = self.layout.path(self.layout.model(name).report)
        result.summary = "\n\n".join(stages.section(self.run_dir, name, config) for name in self.models)
        judged = [name for name in self.models if self.layout.path(self.layout.model(name).verdict).is_file()]
        result.verdicts = "\n".join(stages.verdict_line(self.run_dir, name, config) for name in judged)
        result.undecided = [name for name in judged if not stages.verdict_decided(self.run_dir, name)]
        self.layout.report_md.write_text(result.summary + "\n", encoding="utf-8")
        result.ran, result.skipped = list(ledger.ran), list(ledger.skipped)
        logger.info("run %s: %d stages run, %d up to date", self.run_dir, len(ledger.ran), len(ledger.skipped))
        return result

    def _lara_stages(self, name: str, state: _ModelState) -> None:
        config, ledger, run_dir, files = self.config, self.ledger, self.run_dir, self.layout.model(name)
        acts = ledger.run(
            f"cache/{name}",
            stages.cache_key(self.sets, state.identity, config),
            [files.acts],
            lambda: stages.cache(run_dir, name, config, self.models[name], self.progress),
            every_rank=True,
        )[files.acts]
        state.metrics_rel = files.metrics
        state.metrics = ledger.run(
            f"metrics/{name}",
            stages.metrics_key(self.sets, acts, config),
            [state.metrics_rel],
            lambda: stages.metrics(run_dir, name, config, self.progress),
        )[state.metrics_rel]
        state.tables.update(
            ledger.run(
                f"score/{name}",
                stages.score_key(state.metrics, self.q_digest, config),
                list(files.lara),
                lambda: stages.score(run_dir, name, config, self.labels),
            )
        )

    def _detect_stage(self, name: str, state: _ModelState) -> dict[str, str]:
        """The detect stage of model ``name``; its key holds the questions, the model, the detector
        settings, the sets and calibration when controls are scored, and the reference model's
        identity when a detector uses it."""
        config = self.config
        names = detector_names(
            config.detect.names,
            reference=self.reference is not None,
            answers=any(has_answer(q.answer) for q in self.questions),
        )
        uses_reference = self.reference is not None and any(
            REGISTRY[n].requires_reference for n in names if n in REGISTRY
        )
        reference = (
            stages.model_identity(dict(config.models())[self.reference], self.ledger) if uses_reference else None
        )
        key = stages.detect_key(
            self.q_digest,
            state.identity,
            config,
            name,
            reference,
            self._controls_digest() if config.calibrating else None,
        )
        outputs = self.layout.model(name).detectors(config.calibrating)
        served = (
            config.detect.endpoint is not None and name == config.name
        )  # its server spreads the work, not the ranks
        ranks = None if served else self.ranks
        return self.ledger.run(
            f"detect/{name}",
            key,
            outputs,
            lambda: stages.detect(
                self.run_dir,
                name,
                config,
                self.models[name],
                self.questions,
                self.progress,
                names,
                (self.reference, self.models[self.reference]) if uses_reference else None,
                ranks,
            ),
            every_rank=ranks is not None,
        )

    def _controls_digest(self) -> str:
        """sha256 of every question's control texts: a change of the sets that leaves them alone
        (more paraphrases, a later similar) does not redo detection."""
        if not hasattr(self, "_controls"):
            import hashlib
            import json

            from generation.records import read_sets

            from ..calibration.controls import control_texts

            texts = control_texts(read_sets(self.layout.sets), self.config.calibration.controls)
            self._controls = hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()
        return self._controls

    def _report_stages(self, name: str, state: _ModelState) -> None:
        """fuse → verdict → evaluate of one model, once every model's scores exist."""
        config, ledger, run_dir, files = self.config, self.ledger, self.run_dir, self.layout.model(name)
        score_tables = {k: v for k, v in state.tables.items() if k in (files.lara[0], files.detector_scores)}
        reference_table = (
            self.layout.model(self.reference).detector_scores
            if self.reference and name != self.reference and config.detect.names
            else None
        )
        reference_digests = (
            {t: d for t, d in self.states[self.reference].tables.items()}
            if self.reference and config.detect.names
            else {}
        )
        scores = ledger.run(
            f"fuse/{name}",
            stages.fuse_key(
                score_tables, self.q_digest, config, reference_digests.get(reference_table) if reference_table else None
            ),
            list(files.scores),
            lambda: stages.fuse(run_dir, name, config, list(score_tables), self.labels, self.splits, reference_table),
        )[files.scores[0]]
        verdict = None
        if config.calibrating or (config.lara and CLEAN_SPLIT in self.splits.values()):
            verdict_ref = self.reference if self.reference and name != self.reference and config.calibrating else None
            lara_tables = [t for t in score_tables if t == files.lara[0]]
            verdict = ledger.run(
                f"verdict/{name}",
                stages.verdict_key(state.tables, self.q_digest, config, reference_digests if verdict_ref else None),
                [files.verdict, files.questions],
                lambda: stages.verdict(run_dir, name, config, lara_tables, self.labels, self.splits, verdict_ref),
            )[files.verdict]
        placebo = (
            self.states[self.reference] if self.reference and name != self.reference and state.metrics_rel else None
        )
        ledger.run(
            f"evaluate/{name}",
            stages.evaluate_key(
                scores, self.q_digest, state.metrics, verdict, config, placebo.metrics if placebo else None
            ),
            [files.report],
            lambda: stages.evaluate(
                run_dir,
                name,
                config,
                self.labels,
                state.metrics_rel,
                self.questions,
                verdict is not None,
                placebo.metrics_rel if placebo else None,
            ),
        )


def with_chat_system_turn(config: RunConfig, questions: list[Any]) -> RunConfig:
    """Questions imported from chat messages keep their system turn: it fills ``detect.system_prompt``
    and, when activations are taken in chat format, ``extraction.system_prompt``, where unset."""
    from ..questions.chat import default_system_prompt

    detect_system = default_system_prompt(questions, config.detect.system_prompt, "detect")
    config = dataclasses.replace(config, detect=dataclasses.replace(config.detect, system_prompt=detect_system))
    if config.extraction.prompt_format == "chat":
        system = default_system_prompt(questions, config.extraction.system_prompt, "extraction")
        config = dataclasses.replace(config, extraction=dataclasses.replace(config.extraction, system_prompt=system))
    return config
