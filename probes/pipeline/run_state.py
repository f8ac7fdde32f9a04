"""What a stage of ``lara run`` reads of the run (:class:`RunState`, which :class:`.run._Run`
implements), and the lazily loaded model each model stage shares (:class:`LazyModel`). Every stage
function — a key, a body — is ``(run: RunState, model: str | None) → …`` (:mod:`.stage_table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from cache.config import ModelConfig
from cache.distributed import Ranks
from cache.loading import load_model
from generation.records import Question

from ..detectors import Detector
from ..responders.model_settings import activation_config
from .config import RunConfig
from .layout import RunLayout


class LazyModel:
    """Loads a model on first use, so a run whose model stages are all done never loads it; under
    torchrun (``ranks``) on this rank's device."""

    def __init__(self, config: ModelConfig, ranks: Ranks | None = None) -> None:
        self.config = config
        self.ranks = ranks
        self._loaded: Any = None

    def get(self) -> Any:
        if self._loaded is None:
            placed = self.config if self.ranks is None else self.ranks.place(self.config)
            self._loaded = load_model(activation_config(placed))
        return self._loaded

    def release(self) -> None:
        self._loaded = None


class RunState(Protocol):
    """The run as its stages see it.

    Attributes:
        config: the validated config (with the chat system turn resolved).
        run_dir / layout: the run directory and every path in it.
        questions: the questions file's records, in file order.
        labels: question id → label (None: no question is labelled, an audit); splits: id → split.
        q_digest: the questions file's sha256.
        digests: every output's sha256 so far, as its stage recorded it (path relative to ``run_dir``).
        models: each model's lazily loaded weights; reference: the reference model's name, if any.
        ranks: the torchrun ranks (None: one process).
        progress: progress bars on.
    """

    config: RunConfig
    run_dir: Path
    layout: RunLayout
    questions: list[Question]
    labels: dict[str, int | None] | None
    splits: dict[str, str | None]
    q_digest: str
    digests: dict[str, str]
    models: dict[str, LazyModel]
    reference: str | None
    ranks: Ranks | None
    progress: bool

    def identity(self, name: str) -> dict[str, Any]:
        """Model ``name``'s identity: its settings and the digest of its weights."""

    def model_tables(self, name: str) -> dict[str, str]:
        """Model ``name``'s LaRA and detector outputs this run has, with their digests."""

    def detector_objects(self) -> list[Detector]:
        """The run's detectors, built once by the validation."""

    def uses_reference(self) -> bool:
        """Whether a detector compares with the reference model."""

    def controls_digest(self) -> str:
        """sha256 of every question's control texts."""
