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
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cache.distributed import Ranks
from cache.outputs import check_writable
from generation.records import read_questions, read_sets
from lara_core.files import write_text_atomically

from ..errors import InputError
from ..questions.chat import default_system_prompt
from ..questions.importing import ImportOptions, write_questions
from ..questions.lm_eval_tasks import LmEvalSource, import_lm_eval_task
from ..questions.question_files import provenance_path, questions_text
from ..verdicts.controls import control_answers, control_texts
from . import report_stages, stage_table, stages
from .config import LmEvalQuestions, RunConfig, dump_config
from .layout import RunLayout
from .ledger import Ledger
from .lock import run_directory_lock
from .run_state import LazyModel
from .stage_table import Stage
from .validate import validate_run

logger = logging.getLogger(__name__)


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


def run_pipeline(config: RunConfig, progress: bool = True) -> RunResult:
    """Run (or finish, or update) the audit described by ``config`` (data-parallel under torchrun)."""
    run_dir = config.run_path
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
        self.run_dir, self.progress, self.ranks = run_dir, progress, ranks
        self.layout = RunLayout(run_dir)
        self.writes = ranks is None or ranks.is_main  # the process that writes the run's shared files
        self.ledger = Ledger(run_dir, ranks)
        path = Path(config.questions)
        if config.questions_source is not None:
            import_run_questions(config.questions_source, path)
        if not path.is_file():
            raise InputError(
                f"questions file not found: {path} (config key 'questions'); build one from a benchmark with "
                "lara questions import (and lara questions pair for members + non-members), as the comments "
                "at the top of the paper's config show"
            )
        self.questions = read_questions(path)
        self.config = config = with_chat_system_turn(config, self.questions)
        self.detectors = validate_run(config, self.questions)  # every key checked before stage 1; detectors built once
        self.q_digest = self.ledger.digest(path)
        if config.calibrating:
            logger.info("%s", control_cost(config, list(self.detectors.values())))
        if self.writes:
            write_text_atomically(self.layout.config, dump_config(config))
            self._record_question_provenance(path)
        labels: dict[str, int | None] = {q.id: q.label for q in self.questions}
        n_labelled = sum(v is not None for v in labels.values())
        self.labels = labels if n_labelled else None  # without labels: an audit, no evaluation
        self.splits = {q.id: q.split for q in self.questions}
        self.reference = config.reference_name()
        self.models = {name: LazyModel(model, ranks) for name, model in config.models()}
        self.digests: dict[str, str] = {}  # every output's digest, as its stage recorded it (path → sha256)
        self._identities: dict[str, dict[str, Any]] = {}
        self._controls: str | None = None
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

        source = provenance_path(path)
        target = self.layout.questions_meta
        if source.is_file():
            target.write_bytes(source.read_bytes())
        elif target.exists():
            target.unlink()

    def run(self) -> RunResult:
        """Every stage of :data:`STAGES` that applies, phase by phase, through the ledger."""
        config, ledger = self.config, self.ledger
        for stage in _phase("inputs"):
            self._run_stage(stage, None)
        for name in self.models:
            for stage in _phase("model"):
                self._run_stage(stage, name)
            if name != self.reference:
                self.models[name].release()  # the reference model stays loaded for the models after it
        if self.ranks is not None:  # what is left reads every model's scores: rank 0's alone
            self.ranks.barrier()
            self.ledger.solo()
            if not self.ranks.is_main:
                return RunResult(self.run_dir, ran=list(ledger.ran), skipped=list(ledger.skipped), main=False)
        result = RunResult(self.run_dir)
        for name in self.models:
            for stage in _phase("report"):
                self._run_stage(stage, name)
            result.reports[name] = self.layout.path(self.layout.model(name).report)
        result.summary = "\n\n".join(report_stages.section(self.run_dir, name, config) for name in self.models)
        judged = [name for name in self.models if self.layout.path(self.layout.model(name).verdict).is_file()]
        result.verdicts = "\n".join(report_stages.verdict_line(self.run_dir, name, config) for name in judged)
        result.undecided = [name for name in judged if not report_stages.verdict_decided(self.run_dir, name)]
        write_text_atomically(self.layout.report_md, result.summary + "\n")
        result.ran, result.skipped = list(ledger.ran), list(ledger.skipped)
        logger.info("run %s: %d stages run, %d up to date", self.run_dir, len(ledger.ran), len(ledger.skipped))
        return result

    def _run_stage(self, stage: Stage, model: str | None) -> None:
        """One stage through the ledger (skipped when its key and outputs are unchanged); the digest of
        each of its outputs is recorded for the keys of the stages after it."""
        if not stage.applies(self, model):
            return
        self._bring_back(stage, model)
        self.digests.update(
            self.ledger.run(
                stage.label(model),
                stage.key(self, model),
                stage.outputs(self, model),
                lambda: stage.body(self, model),
                every_rank=stage.every_rank(self, model),
                absent_ok=stage.bulky,
                appends_unless=stage.appends_unless,
            )
        )

    def _bring_back(self, stage: Stage, model: str | None) -> None:
        """Redo the stages whose bulky outputs ``stage`` reads and were left behind (a run directory
        copied without its activations) — only when ``stage`` itself has to run."""
        left = [s for s in _phase(stage.phase) if s.name in stage.reads and s.label(model) in self.ledger.absent]
        if not left or self.ledger.is_done(stage.label(model), stage.key(self, model)):
            return
        for needed in left:
            label = needed.label(model)
            logger.info("%s must run and reads %s, which is not here: redoing %s", stage.label(model), label, label)
            self.ledger.absent.pop(label)
            self.digests.update(
                self.ledger.run(
                    label,
                    needed.key(self, model),
                    needed.outputs(self, model),
                    lambda needed=needed: needed.body(self, model),
                    every_rank=needed.every_rank(self, model),
                    appends_unless=needed.appends_unless,
                )
            )

    # --- what the stage table reads of the run ----------------------------------------------------

    def identity(self, name: str) -> dict[str, Any]:
        """Model ``name``'s identity (its source and the fingerprint of its weights), computed once."""
        if name not in self._identities:
            self._identities[name] = stages.model_identity(dict(self.config.models())[name], self.ledger)
        return self._identities[name]

    def model_tables(self, name: str) -> dict[str, str]:
        """Model ``name``'s LaRA and detector outputs this run has, with their digests."""
        files = self.layout.model(name)
        paths = [*files.lara, *files.detectors(self.config.calibrating)]
        return {p: self.digests[p] for p in paths if p in self.digests}

    def detector_objects(self) -> list[Any]:
        """The run's detectors, built once by the validation (in the order the config names them)."""
        return list(self.detectors.values())

    def uses_reference(self) -> bool:
        """Whether a detector compares with the reference model."""
        return self.reference is not None and any(d.requires_reference for d in self.detectors.values())

    def controls_digest(self) -> str:
        """sha256 of every question's controls as detection reads them — the texts and re-solved
        answers of its first ``calibration.most`` (the decisions' controls too, not only the
        verdict's): a change of the sets that leaves them alone (more paraphrases) does not redo
        detection, one of a fourth control's text or of any control's answer does."""
        if self._controls is None:
            sets, most = read_sets(self.layout.sets), self.config.calibration.most
            controls = {"texts": control_texts(sets, most), "answers": control_answers(sets, most)}
            self._controls = hashlib.sha256(json.dumps(controls, sort_keys=True, default=str).encode()).hexdigest()
        return self._controls


def _phase(phase: str) -> list[Stage]:
    """The stages of one phase, in the table's order (read when the run reaches it)."""
    return [s for s in stage_table.STAGES if s.phase == phase]


def control_cost(config: RunConfig, detectors: list[Any]) -> str:
    """The matched controls' cost per question under the settings in force (what the verdict and
    the decisions buy with it: docs/verdicts.md compares the alternatives)."""
    c = config.calibration
    chosen = [d for d in detectors if c.detectors is None or d.name in c.detectors]
    passes = [d.name for d in chosen if not d.samples_at_temperature]
    sampling = [d for d in chosen if d.samples_at_temperature]
    decision = max(c.controls, c.decision_controls or 0)
    sampled = max(c.controls, c.sampling_controls or 0)
    draws = sum(int(getattr(d, "n", 1)) for d in sampling) * sampled
    return (
        f"controls per question: {decision} scored by {len(passes)} detector(s) of one forward pass each "
        f"({', '.join(passes) or 'none'}: {decision * len(passes)} scorings), {sampled} by {len(sampling)} that "
        f"sample ({', '.join(d.name for d in sampling) or 'none'}: {draws} sampled completions per model); "
        f"decisions at q = {config.verdict.fdr:g} by {config.verdict.fdr_method}"
    )


def import_run_questions(source: LmEvalQuestions, path: Path) -> None:
    """The lm-eval task's documents as the run's questions file (and its provenance), written only
    when they changed, so an unchanged task leaves every stage's key as it was."""

    fewshot = None if source.num_fewshot == "task" else source.num_fewshot
    result = import_lm_eval_task(
        LmEvalSource(source.lm_eval_task, source.include_path, fewshot),
        ImportOptions(label=source.label, limit=source.limit),
    )
    unchanged = path.is_file() and path.read_text(encoding="utf-8") == questions_text(result.questions)
    if unchanged and provenance_path(path).is_file():
        return
    write_questions(result, path)
    logger.info("%s: %s", path, result.describe())


def with_chat_system_turn(config: RunConfig, questions: list[Any]) -> RunConfig:
    """Questions imported from chat messages keep their system turn: it fills ``detect.system_prompt``
    and, when activations are taken in chat format, ``extraction.system_prompt``, where unset."""

    detect_system = default_system_prompt(questions, config.detect.system_prompt, "detect")
    config = dataclasses.replace(config, detect=dataclasses.replace(config.detect, system_prompt=detect_system))
    if config.extraction.prompt_format == "chat":
        system = default_system_prompt(questions, config.extraction.system_prompt, "extraction")
        config = dataclasses.replace(config, extraction=dataclasses.replace(config.extraction, system_prompt=system))
    return config
