"""Every path of a run directory in one place (the ledger records outputs by their path relative
to the run directory, so a model's files are given as relative names and resolved by
:meth:`RunLayout.path`)::

    RUN_DIR/config.resolved.yaml   the settings the run used
    RUN_DIR/run.log                every run's log, appended
    RUN_DIR/ledger/                stage records (see :mod:`.ledger`)
    RUN_DIR/questions.meta.json    where the questions came from, when known
    RUN_DIR/sets.jsonl             perturbation sets (shared by every model)
    RUN_DIR/<model>/acts.h5        pooled activations of every text of the sets
    RUN_DIR/<model>/metrics.h5     zRSM, DC, zRSI per question and layer
    RUN_DIR/<model>/lara.csv       LaRA scores (+ .meta.json)
    RUN_DIR/<model>/detectors.csv  output-level detector scores (+ .raw.csv, .meta.json, .controls.csv)
    RUN_DIR/<model>/responses.sqlite  the model's completions and scores, reused on a rerun
    RUN_DIR/<model>/accuracy.csv   each audited question's greedy answer, judged by the verifier
    RUN_DIR/<model>/scores.csv     every score column, fused columns included (+ .meta.json: how each was fused)
    RUN_DIR/<model>/verdict.json   the label-free verdict (SPEC §8)
    RUN_DIR/<model>/questions.csv  which questions: per-question p-values, q-values and flags (SPEC §8.10)
    RUN_DIR/<model>/report/        report.json, report.md, plots
    RUN_DIR/report.md              every model's verdict and detection table
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SETS = "sets.jsonl"


@dataclass(frozen=True)
class ModelLayout:
    """The files of one model, as paths relative to the run directory (the ledger's names)."""

    name: str

    def _at(self, file: str) -> str:
        return f"{self.name}/{file}"

    @property
    def acts(self) -> str:
        return self._at("acts.h5")

    @property
    def metrics(self) -> str:
        return self._at("metrics.h5")

    @property
    def lara(self) -> tuple[str, str]:
        """LaRA's scores and their meta."""
        return self._at("lara.csv"), self._at("lara.meta.json")

    @property
    def detector_scores(self) -> str:
        """``detectors.csv``: the detect stage's scores (its other files sit beside it)."""
        return self._at("detectors.csv")

    def detectors(self, with_controls: bool) -> list[str]:
        """The detect stage's files: scores first, then raw, meta (and controls)."""
        files = [self.detector_scores] + [self._at(f) for f in ("detectors.raw.csv", "detectors.meta.json")]
        return files + ([self._at("detectors.controls.csv")] if with_controls else [])

    @property
    def scores(self) -> tuple[str, str]:
        """Every score column, fused ones included, and how each was fused."""
        return self._at("scores.csv"), self._at("scores.meta.json")

    @property
    def accuracy(self) -> str:
        """Each audited question's greedy answer, judged."""
        return self._at("accuracy.csv")

    @property
    def verdict(self) -> str:
        return self._at("verdict.json")

    @property
    def questions(self) -> str:
        return self._at("questions.csv")

    @property
    def report(self) -> str:
        return self._at("report")

    @property
    def report_md(self) -> str:
        return self._at("report/report.md")

    @property
    def report_json(self) -> str:
        return self._at("report/report.json")

    @property
    def responses(self) -> str:
        return self._at("responses.sqlite")


@dataclass(frozen=True)
class RunLayout:
    """A run directory."""

    root: Path

    def path(self, relative: str) -> Path:
        """The path of a file named relative to the run directory."""
        return self.root / relative

    def model(self, name: str) -> ModelLayout:
        return ModelLayout(name)

    @property
    def sets(self) -> Path:
        return self.root / SETS

    @property
    def config(self) -> Path:
        return self.root / "config.resolved.yaml"

    @property
    def log(self) -> Path:
        return self.root / "run.log"

    @property
    def questions_meta(self) -> Path:
        return self.root / "questions.meta.json"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    def store(self, name: str, store_dir: str | None) -> Path:
        """The response store of model ``name``: ``STORE/<name>.sqlite`` or ``RUN_DIR/<name>/responses.sqlite``."""
        return Path(store_dir) / f"{name}.sqlite" if store_dir else self.path(self.model(name).responses)
