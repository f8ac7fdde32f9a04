"""``lara run``'s stages as one table. Each :class:`Stage` declares its name, its phase, when it
applies, its ledger key (what its outputs depend on: the input files' digests and the settings that
shape them), its outputs (paths from :mod:`.layout`) and its body (in :mod:`.stages` or
:mod:`.report_stages`). :class:`.run._Run` iterates :data:`STAGES` through the ledger, which skips a
stage whose key and outputs are unchanged; adding a stage is one entry here plus its key and body
(docs/development.md walks through one).

Every function of a stage is ``(run: RunState, model: str | None) → …``: the run
(:class:`.run_state.RunState`: the config, the layout, the questions and every output's digest so
far) and the model's name (None for a stage of the ``inputs`` phase).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from ..operations.accuracy import audited_with_answers
from . import report_stages, stages
from .layout import SETS
from .run_state import RunState

Phase = Literal["inputs", "model", "report"]
PHASES: tuple[Phase, ...] = ("inputs", "model", "report")
StageFunction = Callable[[RunState, Any], Any]


def _always(run: RunState, model: str | None) -> bool:
    return True


def _never(run: RunState, model: str | None) -> bool:
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
        bulky: its outputs may be left behind when a run directory moves (activations: gigabytes a
            model); its record stands for them until a stage that reads them has to run.
        reads: the stages (of the same model) whose bulky outputs the body reads.
        appends_unless: a stage that appends to its outputs (the activation store keeps the texts
            it holds) starts them anew when these inputs of its key changed.
    """

    name: str
    phase: Phase
    key: StageFunction
    outputs: StageFunction
    body: StageFunction
    applies: StageFunction = _always
    every_rank: StageFunction = _never
    bulky: bool = False
    reads: tuple[str, ...] = ()
    appends_unless: tuple[str, ...] = ()

    def label(self, model: str | None) -> str:
        return self.name if model is None else f"{self.name}/{model}"


def _needs_sets(run: RunState, model: None) -> bool:
    return run.config.lara or run.config.calibrating


def _lara(run: RunState, model: str) -> bool:
    return run.config.lara


def _detects(run: RunState, model: str) -> bool:
    return bool(run.config.detect.names)


def _measures_accuracy(run: RunState, model: str) -> bool:
    return run.config.accuracy.enabled and bool(audited_with_answers(run.questions))


def _detect_every_rank(run: RunState, model: str) -> bool:
    return stages.detect_ranks(run, model) is not None


GENERATE = Stage(
    "generate",
    "inputs",
    key=stages.generate_key,
    outputs=lambda run, _: [SETS],
    body=stages.generate,
    applies=_needs_sets,
)
CACHE = Stage(
    "cache",
    "model",
    key=stages.cache_key,
    outputs=lambda run, m: [run.layout.model(m).acts],
    body=stages.cache,
    applies=_lara,
    every_rank=_always,
    bulky=True,
    appends_unless=("model", "extraction"),  # new texts (more similars) append; a new model or dtype starts anew
)
METRICS = Stage(
    "metrics",
    "model",
    key=stages.metrics_key,
    outputs=lambda run, m: [run.layout.model(m).metrics],
    body=stages.metrics,
    applies=_lara,
    reads=("cache",),
)
SCORE = Stage(
    "score",
    "model",
    key=stages.score_key,
    outputs=lambda run, m: list(run.layout.model(m).lara),
    body=stages.score,
    applies=_lara,
)
DETECT = Stage(
    "detect",
    "model",
    key=stages.detect_key,
    outputs=lambda run, m: run.layout.model(m).detectors(run.config.calibrating),
    body=stages.detect,
    applies=_detects,
    every_rank=_detect_every_rank,
)
ACCURACY = Stage(
    "accuracy",
    "model",
    key=stages.accuracy_key,
    outputs=lambda run, m: [run.layout.model(m).accuracy],
    body=stages.accuracy,
    applies=_measures_accuracy,
)
FUSE = Stage(
    "fuse",
    "report",
    key=report_stages.fuse_key,
    outputs=lambda run, m: list(run.layout.model(m).scores),
    body=report_stages.fuse,
)
VERDICT = Stage(
    "verdict",
    "report",
    key=report_stages.verdict_key,
    outputs=lambda run, m: [run.layout.model(m).verdict, run.layout.model(m).questions],
    body=report_stages.verdict,
    applies=report_stages.judged,
)
EVALUATE = Stage(
    "evaluate",
    "report",
    key=report_stages.evaluate_key,
    outputs=lambda run, m: [run.layout.model(m).report],
    body=report_stages.evaluate,
)

STAGES: tuple[Stage, ...] = (GENERATE, CACHE, METRICS, SCORE, DETECT, ACCURACY, FUSE, VERDICT, EVALUATE)
