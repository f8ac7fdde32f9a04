"""``lara testbed build --preset smollm-svamp --benchmark SVAMP.json``: SmolLM2 RL-trained on a
real benchmark's questions (docs/testbed.md, "a testbed contaminated on a real benchmark").

The templated testbeds draw members and non-members from the same templates, so what GRPO teaches
a member's template its non-members learn too. Here members and non-members are a seeded random
split of one public benchmark — the design a real leak has. Steps, each kept in the work directory
so that a rerun resumes:

1. **splits** — the benchmark imported with its preset (each question as the benchmark states it,
   its facts and its ask joined, then the testbed's answer instruction; its worked solution from
   the benchmark's equation), shuffled with the seed: ``n_members`` members (label 1),
   ``n_non_members`` non-members (label 0), the rest ``clean_ref``.
2. **before** — members' and non-members' pass rates at the start checkpoint, greedy and sampled.
3. **grpo** — TRL's GRPOTrainer with a LoRA adapter on the members only, from the start checkpoint
   (the shipped SmolLM2 testbed's warm-up, ``smollm-seed0/sft``, or the base), resuming from TRL's
   last checkpoint; the adapter is kept after each epoch of ``keep_epochs`` (contamination levels).
4. **after** — the same pass rates with each kept adapter, loaded as it is shipped.
5. **ship** — ``questions.jsonl`` (with the benchmark's licence beside it), ``rl/`` (the last level),
   ``rl-epoch<k>/`` (the others), ``testbed.json`` and ``train_log.jsonl``. The adapters are stored
   in float16 and name their start checkpoint by a path relative to themselves.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .smollm import BASE, INSTRUCTION, Stages, copy_adapter, lift_ok, pass_rates, summarise_lift, user_turn
from .trl_grpo import TrlGrpoSettings

logger = logging.getLogger(__name__)

FORMAT = 1
CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
WARM_UP = CHECKPOINTS / "smollm-seed0" / "sft"  # the shipped SmolLM2 testbed's warm-up adapter


@dataclass(frozen=True)
class BenchmarkPreset:
    """Sizes of a testbed RL-trained on a real benchmark.

    Attributes:
        benchmark: the importer preset that reads the benchmark file (``svamp``).
        licence: the benchmark's licence, written beside its questions.
        n_members / n_non_members: the random split's sizes; the rest is ``clean_ref``.
        n_clean_ref: at most this many ``clean_ref`` questions (None: all the rest).
        start: ``sft`` (the shipped warm-up adapter, :data:`WARM_UP`) or ``base``.
        eval_samples: sampled completions a question for the pass rates (plus one greedy).
        keep_epochs: the epochs after which the adapter is kept; the last is ``rl/``.
        grpo: TRL's GRPO settings (``epochs`` ≥ the last kept epoch).
    """

    benchmark: str = "svamp"
    licence: str = "MIT, Copyright (c) 2021 Arkil Patel (github.com/arkilpatel/SVAMP)"
    n_members: int = 150
    n_non_members: int = 150
    n_clean_ref: int | None = None
    start: str = "sft"
    eval_samples: int = 4
    keep_epochs: tuple[int, ...] = (3, 6)
    grpo: TrlGrpoSettings = field(default_factory=TrlGrpoSettings)

    def __post_init__(self) -> None:
        if self.start not in ("sft", "base"):
            raise ValueError(f"start: {self.start!r} is neither 'sft' nor 'base'")
        if not self.keep_epochs or max(self.keep_epochs) != self.grpo.epochs:
            raise ValueError(f"keep_epochs {self.keep_epochs} must end at grpo.epochs ({self.grpo.epochs})")


BENCHMARK_PRESETS = {
    "smollm-svamp": BenchmarkPreset(),
    # plumbing only (CI): a handful of questions, two short epochs
    "smollm-svamp-smoke": BenchmarkPreset(
        n_members=4,
        n_non_members=4,
        n_clean_ref=8,
        eval_samples=1,
        keep_epochs=(1, 2),
        grpo=TrlGrpoSettings(epochs=2, num_generations=2, prompts_per_step=2, max_completion_length=8, save_steps=1),
    ),
}


def benchmark_rows(path: Path, preset: BenchmarkPreset, seed: int) -> list[dict[str, Any]]:
    """The testbed's questions file: the benchmark's questions in a seeded random split.

    Raises:
        InputError: the file cannot be read, or holds fewer questions than the two splits need.
    """
    from ..errors import InputError
    from ..questions.importing import ImportOptions, import_questions  # lazy: pulls datasets
    from ..questions.tables import TableSource

    result = import_questions(TableSource(str(path)), ImportOptions(preset=preset.benchmark))
    logger.info("%s", result.describe())
    questions = sorted(result.questions, key=lambda q: q.id)
    need = preset.n_members + preset.n_non_members
    if len(questions) < need:
        raise InputError(f"{path}: {len(questions)} questions, fewer than the {need} the splits need")
    random.Random(f"benchmark-splits-{seed}").shuffle(questions)
    clean = questions[need:] if preset.n_clean_ref is None else questions[need : need + preset.n_clean_ref]
    labelled = (
        ("member", 1, questions[: preset.n_members]),
        ("non_member", 0, questions[preset.n_members : need]),
        ("clean_ref", None, clean),
    )
    return [
        {
            "id": q.id,
            "question": user_turn(q.question),
            "label": label,
            "answer": q.answer,
            "source": f"{preset.benchmark}-testbed",
            "split": split,
            "extra": {"problem": q.question, **q.extra},
        }
        for split, label, chosen in labelled
        for q in chosen
    ]


def build_benchmark_testbed(
    out: Path, benchmark: Path, preset_name: str, seed: int = 0, work: Path | None = None, overwrite: bool = False
) -> dict[str, Any]:
    """Build (or resume building) the testbed into ``out``; returns its manifest.

    Raises:
        FileExistsError: ``out`` exists and ``overwrite`` is off.
    """
    from .smollm_build import _load, default_work_dir  # lazy: pulls torch

    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass --overwrite to replace it")
    preset = BENCHMARK_PRESETS[preset_name]
    work = work or default_work_dir(preset_name, seed)
    stages = Stages(work)
    started = time.time()
    rows = stages.once("splits", lambda: benchmark_rows(benchmark, preset, seed))["value"]
    start = str(WARM_UP) if preset.start == "sft" else BASE
    before = stages.once("before", lambda: _pass_rates_of(_load(start), rows, preset, seed))
    levels = {k: work / f"rl-epoch{k}" for k in preset.keep_epochs}
    if not all((d / "adapter_config.json").is_file() for d in levels.values()):
        _grpo_levels(_load(start), rows, preset, work, levels)
    after = {
        k: stages.once(
            f"after-epoch{k}", lambda adapter=adapter: _pass_rates_of(_load(str(adapter), start), rows, preset, seed)
        )
        for k, adapter in levels.items()
    }
    lifts = {k: summarise_lift(before["value"], a["value"]) for k, a in after.items()}
    manifest = _manifest(preset_name, preset, seed, rows, before, after, lifts, work, time.time() - started)
    manifest["benchmark_file"] = {"name": benchmark.name, "sha256": _sha256(benchmark)}
    _ship(out, levels, rows, manifest, preset, overwrite, work)
    return manifest


def _pass_rates_of(loaded: Any, rows: list[dict[str, Any]], preset: BenchmarkPreset, seed: int) -> dict:
    return pass_rates(loaded.model, loaded.tokenizer, rows, preset, seed)


def _grpo_levels(
    policy: Any, rows: list[dict[str, Any]], preset: BenchmarkPreset, work: Path, levels: dict[int, Path]
) -> None:
    """GRPO on the members, the adapter saved (float16) into ``levels[k]`` after epoch ``k``."""
    from .trl_grpo import train_grpo  # lazy: pulls trl

    policy.model.requires_grad_(True)
    policy.model.train()
    members = [r for r in rows if r["split"] == "member"]
    train_grpo(
        policy.model,
        policy.tokenizer,
        [r["question"] for r in members],
        [r["answer"] for r in members],
        work / "grpo",
        preset.grpo,
        keep={k: d for k, d in levels.items()},
    )


def _manifest(
    name: str,
    preset: BenchmarkPreset,
    seed: int,
    rows: list[dict],
    before: dict,
    after: dict[int, dict],
    lifts: dict[int, dict],
    work: Path,
    seconds: float,
) -> dict[str, Any]:
    from .smollm_build import training_seconds  # lazy: pulls torch

    last = max(after)
    by_stage = {"splits": None, "before": before["seconds"]}
    by_stage.update({f"after_epoch{k}": a["seconds"] for k, a in after.items()})
    by_stage["grpo"] = training_seconds(work / "grpo" / "train_log.jsonl")
    return {
        "format": FORMAT,
        "preset": name,
        "seed": seed,
        "command": f"lara testbed build --out OUT --preset {name} --benchmark FILE --seed {seed}",
        "base": BASE,
        "start": "the SmolLM2 testbed's warm-up (smollm-seed0/sft)" if preset.start == "sft" else "the base",
        "instruction": INSTRUCTION,
        "settings": asdict(preset),
        "splits": {s: sum(r["split"] == s for r in rows) for s in ("member", "non_member", "clean_ref")},
        "rl_trained_on": sorted(r["id"] for r in rows if r["split"] == "member"),
        "levels": {f"epoch{k}": ("rl" if k == last else f"rl-epoch{k}") for k in after},
        "pass_rates": {"before_rl": before["value"], **{f"after_epoch{k}": a["value"] for k, a in after.items()}},
        "lift": lifts[last],
        "lift_by_epoch": {f"epoch{k}": v for k, v in lifts.items()},
        "learned": lift_ok(lifts[last]),
        "reference": "the start checkpoint (before RL)",
        "seconds": {**{k: v for k, v in by_stage.items() if v is not None}, "this_invocation": round(seconds, 1)},
    }


def _ship(
    out: Path,
    levels: dict[int, Path],
    rows: list[dict],
    manifest: dict,
    preset: BenchmarkPreset,
    overwrite: bool,
    work: Path,
) -> None:
    """Write the testbed into a temporary sibling of ``out`` and rename it into place."""
    from lara_core.files import file_sha256

    tmp = out.with_name(out.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    last = max(levels)
    for k, adapter in levels.items():
        target = tmp / ("rl" if k == last else f"rl-epoch{k}")
        copy_adapter(adapter, target, _start_from(out / target.name, preset))
    (tmp / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp / "LICENSE.md").write_text(
        f"The questions in questions.jsonl are the {preset.benchmark.upper()} benchmark's, unchanged but for the "
        f"answer instruction after each.\nLicence: {preset.licence}.\n",
        encoding="utf-8",
    )
    log = work / "grpo" / "train_log.jsonl"
    shutil.copyfile(log, tmp / "train_log.jsonl") if log.is_file() else (tmp / "train_log.jsonl").write_text("")
    manifest["files"] = {str(p.relative_to(tmp)): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    (tmp / "testbed.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    if out.exists() and overwrite:
        shutil.rmtree(out)
    tmp.rename(out)


def _start_from(adapter_dir: Path, preset: BenchmarkPreset) -> str:
    """The start checkpoint as the shipped adapter names it: the warm-up by a path relative to the
    adapter's own directory, or the base's ``package:`` spec."""
    if preset.start == "base":
        return BASE
    import os

    return os.path.relpath(WARM_UP, adapter_dir.resolve())


def _sha256(path: Path) -> str:
    from lara_core.files import file_sha256

    return file_sha256(path)
