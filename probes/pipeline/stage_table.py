"""``lara run``'s stages as one table. Each :class:`Stage` declares its name, its phase, when it
applies, its ledger key (what its outputs depend on: the input files' digests and the settings that
shape them), its outputs (paths from :mod:`.layout`) and its body (in :mod:`.stages` or
:mod:`.report_stages`, looked up when it runs). :class:`.run._Run` iterates :data:`STAGES` through the ledger, which skips a stage whose
key and outputs are unchanged; adding a stage is one entry here plus its key and body
(docs/development.md walks through one).

Every function below takes the run (``run``: :class:`.run._Run`, which offers the config, the
layout, the questions and every output's digest so far) and the model's name (``model``; None for
a stage of the ``inputs`` phase).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from ..scores import CLEAN_SPLIT
from . import report_stages, stages
from .layout import SETS

Phase = Literal["inputs", "model", "report"]
PHASES: tuple[Phase, ...] = ("inputs", "model", "report")
RunFunction = Callable[[Any, Any], Any]


def _always(run: Any, model: Any) -> bool:
    return True


def _never(run: Any, model: Any) -> bool:
    return False


@dataclass(frozen=True)
class Stage:
    """One stage of a run.

    Attributes:
        name: the ledger's name (``<name>/<model>`` per model).
        phase: ``inputs`` (once, before the models), ``model`` (per model, while it is loaded) or
            ``report`` (per model, once every model's scores exist).
        key: ``(run, model) → dict``, what the outputs depend on (hashed by the ledger).
        outputs: ``(run, model) → [path relative to the run directory]``.
        body: ``(run, model) → None``, writes the outputs.
        applies: ``(run, model) → bool``, whether the run has this stage at all.
        every_rank: ``(run, model) → bool``, whether every torchrun rank takes part.
    """

    name: str
    phase: Phase
    key: RunFunction
    outputs: RunFunction
    body: RunFunction
    applies: RunFunction = _always
    every_rank: RunFunction = _never

    def label(self, model: str | None) -> str:
        return self.name if model is None else f"{self.name}/{model}"


# --- generate: the perturbation sets -------------------------------------------------------------


def _needs_sets(run: Any, model: Any) -> bool:
    return run.config.lara or run.config.calibrating


GENERATE = Stage(
    "generate",
    "inputs",
    key=lambda run, _: stages.generate_inputs(run.config, run.q_digest),
    outputs=lambda run, _: [SETS],
    body=lambda run, _: stages.generate(run.questions, run.layout.sets, run.config, run.progress),
    applies=_needs_sets,
)

# --- LaRA: activations, metrics, the LaRA score ---------------------------------------------------


def _lara(run: Any, model: Any) -> bool:
    return run.config.lara


CACHE = Stage(
    "cache",
    "model",
    key=lambda run, m: stages.cache_key(run.digests[SETS], run.identity(m), run.config),
    outputs=lambda run, m: [run.layout.model(m).acts],
    body=lambda run, m: stages.cache(run.run_dir, m, run.config, run.models[m], run.progress),
    applies=_lara,
    every_rank=_always,
)
METRICS = Stage(
    "metrics",
    "model",
    key=lambda run, m: stages.metrics_key(run.digests[SETS], run.digests[run.layout.model(m).acts], run.config),
    outputs=lambda run, m: [run.layout.model(m).metrics],
    body=lambda run, m: stages.metrics(run.run_dir, m, run.config, run.progress),
    applies=_lara,
)
SCORE = Stage(
    "score",
    "model",
    key=lambda run, m: stages.score_key(run.digests[run.layout.model(m).metrics], run.q_digest, run.config),
    outputs=lambda run, m: list(run.layout.model(m).lara),
    body=lambda run, m: stages.score(run.run_dir, m, run.config, run.labels),
    applies=_lara,
)

# --- output-level detectors ------------------------------------------------------------------------


def _detect_key(run: Any, model: str) -> dict[str, Any]:
    """The questions, the model, the detector settings, the sets and calibration when controls are
    scored, and the reference model's identity when a detector uses it."""
    config = run.config
    reference = run.identity(run.reference) if run.uses_reference() else None
    controls = run.controls_digest() if config.calibrating else None
    return stages.detect_key(run.q_digest, run.identity(model), config, model, reference, controls)


def _detect_ranks(run: Any, model: str) -> Any:
    """The ranks a detect stage splits its work over: none for a served audited model (its server
    spreads the work)."""
    served = run.config.detect.endpoint is not None and model == run.config.name
    return None if served else run.ranks


DETECT = Stage(
    "detect",
    "model",
    key=_detect_key,
    outputs=lambda run, m: run.layout.model(m).detectors(run.config.calibrating),
    body=lambda run, m: stages.detect(
        run.run_dir,
        m,
        run.config,
        run.models[m],
        run.questions,
        run.progress,
        run.detector_objects(),
        (run.reference, run.models[run.reference]) if run.uses_reference() else None,
        _detect_ranks(run, m),
    ),
    applies=lambda run, _: bool(run.config.detect.names),
    every_rank=lambda run, m: _detect_ranks(run, m) is not None,
)

# --- what reads every model's scores: fusion, verdict, report ---------------------------------------


def _score_tables(run: Any, model: str) -> list[str]:
    """The model's LaRA and detector score tables this run has, in that order."""
    files = run.layout.model(model)
    return [t for t in (files.lara[0], files.detector_scores) if t in run.digests]


def _reference_table(run: Any, model: str) -> str | None:
    """The reference model's detector scores, which the audited model's are compared with."""
    reference = run.reference
    if reference and model != reference and run.config.detect.names:
        return run.layout.model(reference).detector_scores
    return None


def _fuse_key(run: Any, model: str) -> dict[str, Any]:
    tables = {t: run.digests[t] for t in _score_tables(run, model)}
    reference = _reference_table(run, model)
    return report_stages.fuse_key(tables, run.q_digest, run.config, run.digests.get(reference) if reference else None)


FUSE = Stage(
    "fuse",
    "report",
    key=_fuse_key,
    outputs=lambda run, m: list(run.layout.model(m).scores),
    body=lambda run, m: report_stages.fuse(
        run.run_dir, m, run.config, _score_tables(run, m), run.labels, run.splits, _reference_table(run, m)
    ),
)


def _judged(run: Any, model: str) -> bool:
    return run.config.calibrating or (run.config.lara and CLEAN_SPLIT in run.splits.values())


def _verdict_reference(run: Any, model: str) -> str | None:
    reference = run.reference
    return reference if reference and model != reference and run.config.calibrating else None


def _verdict_key(run: Any, model: str) -> dict[str, Any]:
    reference = run.model_tables(run.reference) if _verdict_reference(run, model) else None
    return report_stages.verdict_key(run.model_tables(model), run.q_digest, run.config, reference)


VERDICT = Stage(
    "verdict",
    "report",
    key=_verdict_key,
    outputs=lambda run, m: [run.layout.model(m).verdict, run.layout.model(m).questions],
    body=lambda run, m: report_stages.verdict(
        run.run_dir,
        m,
        run.config,
        [t for t in _score_tables(run, m) if t == run.layout.model(m).lara[0]],
        run.labels,
        run.splits,
        _verdict_reference(run, m),
    ),
    applies=_judged,
)


def _placebo(run: Any, model: str) -> str | None:
    """The reference model's LaRA metrics, the audited model's layer map's placebo."""
    reference = run.reference
    return run.layout.model(reference).metrics if reference and model != reference and run.config.lara else None


def _metrics_of(run: Any, model: str) -> str | None:
    return run.layout.model(model).metrics if run.config.lara else None


def _evaluate_key(run: Any, model: str) -> dict[str, Any]:
    files, placebo, metrics = run.layout.model(model), _placebo(run, model), _metrics_of(run, model)
    return report_stages.evaluate_key(
        run.digests[files.scores[0]],
        run.q_digest,
        run.digests[metrics] if metrics else None,
        run.digests[files.verdict] if _judged(run, model) else None,
        run.config,
        run.digests[placebo] if placebo else None,
    )


EVALUATE = Stage(
    "evaluate",
    "report",
    key=_evaluate_key,
    outputs=lambda run, m: [run.layout.model(m).report],
    body=lambda run, m: report_stages.evaluate(
        run.run_dir,
        m,
        run.config,
        run.labels,
        _metrics_of(run, m),
        run.questions,
        _judged(run, m),
        _placebo(run, m),
    ),
)

STAGES: tuple[Stage, ...] = (GENERATE, CACHE, METRICS, SCORE, DETECT, FUSE, VERDICT, EVALUATE)
