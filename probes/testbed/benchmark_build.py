"""``lara testbed build --preset smollm-svamp --benchmark SVAMP.json``: SmolLM2 RL-trained on a
real benchmark's questions (docs/testbed.md, "a testbed contaminated on a real benchmark").

The templated testbeds draw members and non-members from the same templates, so what GRPO teaches
a member's template its non-members learn too. Here members and non-members are a seeded random
split of one public benchmark — the design a real leak has. Steps, each kept in the work directory
so that a rerun resumes:

1. **splits** — the benchmark imported with its preset (each question as the benchmark states it,
   its facts and its ask joined, then the testbed's answer instruction; its worked solution from
   the benchmark's equation), shuffled with the seed: ``sft.n_pool`` questions for the warm-up pool
   (never audited), ``n_members`` members (label 1), ``n_non_members`` non-members (label 0), the
   rest ``clean_ref``.
1b. **warm-up** — with ``start: warmup``, a LoRA SFT of the base on the pool (user turn → the
   worked solution's steps and "The answer is N"); the checkpoint before RL is the base with it.
2. **before** — members' and non-members' pass rates at the start checkpoint, greedy and sampled;
   the build stops here, saying so, when the sampled rate lies outside ``[min_pass, max_pass]``
   (GRPO learns only from questions whose sampled rewards differ).
3. **grpo** — TRL's GRPOTrainer with a LoRA adapter on the members only, from the start checkpoint
   (the warm-up, the shipped SmolLM2 testbed's warm-up ``smollm-seed0/sft``, or the base), resuming
   from TRL's last checkpoint; the adapter is kept after each epoch of ``keep_epochs``
   (contamination levels).
4. **after** — the same pass rates with each kept adapter, loaded as it is shipped.
5. **ship** — ``questions.jsonl`` (with the benchmark's licence beside it), ``rl/`` (the last level),
   ``rl-epoch<k>/`` (the others), ``sft/`` (the warm-up), ``sft_pool.jsonl``, ``testbed.json`` and
   ``train_log.jsonl``. The adapters are stored in float16 and name their start checkpoint by a
   path relative to themselves.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lara_core.files import file_sha256

from ..errors import InputError
from .smollm import BASE, INSTRUCTION, Stages, copy_adapter, lift_ok, pass_rates, summarise_lift, user_turn
from .trl_grpo import LoraSettings, TrlGrpoSettings, save_half
from .trl_sft import TrlSftSettings

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
        start: ``warmup`` (a LoRA SFT on ``sft.n_pool`` of the benchmark's questions, never audited),
            ``sft`` (the shipped templated testbed's warm-up, :data:`WARM_UP`) or ``base``.
        sft: the warm-up's settings (``start: warmup``), its pool of ``sft.n_pool`` questions.
        min_pass / max_pass: the window the start checkpoint's sampled pass rate on the members and
            non-members must lie in for GRPO to run.
        eval_samples: sampled completions a question for the pass rates (plus one greedy).
        keep_epochs: the epochs after which the adapter is kept; the last is ``rl/``.
        grpo: TRL's GRPO settings (``epochs`` ≥ the last kept epoch).
    """

    benchmark: str = "svamp"
    licence: str = "MIT, Copyright (c) 2021 Arkil Patel (github.com/arkilpatel/SVAMP)"
    n_members: int = 150
    n_non_members: int = 150
    n_clean_ref: int | None = None
    start: str = "warmup"
    sft: TrlSftSettings = field(
        default_factory=lambda: TrlSftSettings(n_pool=250, epochs=3, lora=LoraSettings(r=8, alpha=16))
    )
    min_pass: float = 0.15
    max_pass: float = 0.7
    eval_samples: int = 4
    keep_epochs: tuple[int, ...] = (3, 6)
    grpo: TrlGrpoSettings = field(default_factory=TrlGrpoSettings)

    def __post_init__(self) -> None:
        if self.start not in ("warmup", "sft", "base"):
            raise ValueError(f"start: {self.start!r} is none of 'warmup', 'sft', 'base'")
        if not self.keep_epochs or max(self.keep_epochs) != self.grpo.epochs:
            raise ValueError(f"keep_epochs {self.keep_epochs} must end at grpo.epochs ({self.grpo.epochs})")


BENCHMARK_PRESETS = {
    # the warm-up's sampled pass rate on SVAMP is 5.5 % (greedy 10.7 %; the base 4 %, the templated
    # testbed's warm-up 2 %): no start reaches 15 % on a 135 M model (docs/testbed.md). GRPO learns from
    # the groups with mixed rewards: 17-19 % of the questions are solved at least once in 4 samples.
    "smollm-svamp": BenchmarkPreset(min_pass=0.05),
    # plumbing only (CI): a handful of questions, two short epochs
    "smollm-svamp-smoke": BenchmarkPreset(
        n_members=4,
        n_non_members=4,
        n_clean_ref=8,
        sft=TrlSftSettings(n_pool=4, batch_size=4),
        min_pass=0.0,
        max_pass=1.0,
        eval_samples=1,
        keep_epochs=(1, 2),
        grpo=TrlGrpoSettings(epochs=2, num_generations=2, prompts_per_step=2, max_completion_length=8, save_steps=1),
    ),
}


def benchmark_rows(path: Path, preset: BenchmarkPreset, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The testbed's questions in a seeded random split: ``{"rows": the questions file, "pool": the
    warm-up's questions}`` (the pool drawn first, from the questions with a worked solution).

    Raises:
        InputError: the file cannot be read, or holds fewer questions than the splits need.
    """
    from ..questions.importing import ImportOptions, import_questions  # lazy: pulls datasets
    from ..questions.tables import TableSource  # lazy: pulls datasets

    result = import_questions(TableSource(str(path)), ImportOptions(preset=preset.benchmark))
    logger.info("%s", result.describe())
    questions = sorted(result.questions, key=lambda q: q.id)
    random.Random(f"benchmark-splits-{seed}").shuffle(questions)
    n_pool = preset.sft.n_pool if preset.start == "warmup" else 0
    solved = [q for q in questions if "solution" in q.extra]
    pool = solved[:n_pool]
    taken = {q.id for q in pool}
    rest = [q for q in questions if q.id not in taken]
    need = preset.n_members + preset.n_non_members
    if len(pool) < n_pool or len(rest) < need:
        raise InputError(
            f"{path}: {len(questions)} questions ({len(solved)} with a worked solution), fewer than the "
            f"{n_pool} of the warm-up pool and the {need} of the two splits"
        )
    clean = rest[need:] if preset.n_clean_ref is None else rest[need : need + preset.n_clean_ref]
    labelled = (
        ("member", 1, rest[: preset.n_members]),
        ("non_member", 0, rest[preset.n_members : need]),
        ("clean_ref", None, clean),
    )
    rows = [_row(q, split, label, preset) for split, label, chosen in labelled for q in chosen]
    return {"rows": rows, "pool": [_row(q, "warmup", None, preset) for q in pool]}


def _row(question: Any, split: str, label: int | None, preset: BenchmarkPreset) -> dict[str, Any]:
    return {
        "id": question.id,
        "question": user_turn(question.question),
        "label": label,
        "answer": question.answer,
        "source": f"{preset.benchmark}-testbed",
        "split": split,
        "extra": {"problem": question.question, **question.extra},
    }


def warmup_target(solution: str, answer: Any) -> str:
    """The warm-up's assistant turn: the worked solution's steps without their calculator
    annotations, then the answer in the instruction's form (``76 - 25 = 51. The answer is 51.``)."""
    steps = [re.sub(r"<<[^<>]*>>", "", line).strip() for line in solution.splitlines() if line.strip()]
    return ". ".join([*steps, f"The answer is {answer}."])


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
    drawn = stages.once("splits", lambda: benchmark_rows(benchmark, preset, seed))["value"]
    rows, pool = drawn["rows"], drawn["pool"]
    start, warmed = _start(preset, pool, work)
    before = stages.once("before", lambda: _pass_rates_of(_load(start, warmed), rows, preset, seed))
    _check_window(before["value"], preset)
    levels = {k: work / f"rl-epoch{k}" for k in preset.keep_epochs}
    if not all((d / "adapter_config.json").is_file() for d in levels.values()):
        _grpo_levels(_load(start, warmed), rows, preset, work, levels)
    after = {
        k: stages.once(
            f"after-epoch{k}", lambda adapter=adapter: _pass_rates_of(_load(str(adapter), start), rows, preset, seed)
        )
        for k, adapter in levels.items()
    }
    lifts = {k: summarise_lift(before["value"], a["value"]) for k, a in after.items()}
    manifest = _manifest(preset_name, preset, seed, rows, before, after, lifts, work, time.time() - started)
    manifest["benchmark_file"] = {"name": benchmark.name, "sha256": file_sha256(benchmark)}
    manifest["sft_pool"] = sorted(r["id"] for r in pool)
    _ship(out, levels, {"rows": rows, "pool": pool}, manifest, preset, overwrite, work)
    return manifest


def _start(preset: BenchmarkPreset, pool: list[dict[str, Any]], work: Path) -> tuple[str, str | None]:
    """The checkpoint GRPO starts from, as (source, its base or None): the warm-up adapter trained
    here (``start: warmup``, trained first when absent), the shipped one, or the base."""
    if preset.start == "base":
        return BASE, None
    if preset.start == "sft":
        return str(WARM_UP), None
    target = work / "sft-adapter"
    if not (target / "adapter_config.json").is_file():
        from .smollm_build import _load, _trainable  # lazy: pulls torch
        from .trl_sft import train_sft  # lazy: pulls trl

        base = _load(BASE)
        turns = [r["question"] for r in pool]
        targets = [warmup_target(r["extra"]["solution"], r["answer"]) for r in pool]
        save_half(train_sft(_trainable(base), base.tokenizer, turns, targets, work / "sft", preset.sft), target)
    return str(target), BASE


def _check_window(before: dict[str, Any], preset: BenchmarkPreset) -> None:
    """Stop before GRPO when the start checkpoint solves the audited questions too rarely or too often.

    Raises:
        InputError: the sampled pass rate of members and non-members lies outside the window.
    """
    sampled = [before[split]["sampled"] for split in ("member", "non_member")]
    rate = sum(s["pass_rate"] * s["completions"] for s in sampled) / max(1, sum(s["completions"] for s in sampled))
    if not preset.min_pass <= rate <= preset.max_pass:
        raise InputError(
            f"the checkpoint before RL solves {rate:.1%} of the members' and non-members' samples, outside "
            f"[{preset.min_pass:.0%}, {preset.max_pass:.0%}]: GRPO would learn from too few questions "
            "(a warm-up, another start or another benchmark; the pass rates are kept in the work directory's before.json)"
        )


def _pass_rates_of(loaded: Any, rows: list[dict[str, Any]], preset: BenchmarkPreset, seed: int) -> dict:
    return pass_rates(loaded.model, loaded.tokenizer, rows, preset, seed)


def _grpo_levels(
    policy: Any, rows: list[dict[str, Any]], preset: BenchmarkPreset, work: Path, levels: dict[int, Path]
) -> None:
    """GRPO on the members, the adapter saved (float16) into ``levels[k]`` after epoch ``k``."""
    from .smollm_build import _trainable  # lazy: pulls torch
    from .trl_grpo import train_grpo  # lazy: pulls trl

    members = [r for r in rows if r["split"] == "member"]
    train_grpo(
        _trainable(policy),
        policy.tokenizer,
        [r["question"] for r in members],
        [r["answer"] for r in members],
        work / "grpo",
        preset.grpo,
        keep=levels,
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
    by_stage = {"before": before["seconds"], "sft": training_seconds(work / "sft" / "train_log.jsonl")}
    by_stage.update({f"after_epoch{k}": a["seconds"] for k, a in after.items()})
    by_stage["grpo"] = training_seconds(work / "grpo" / "train_log.jsonl")
    return {
        "format": FORMAT,
        "preset": name,
        "seed": seed,
        "command": f"lara testbed build --out OUT --preset {name} --benchmark FILE --seed {seed}",
        "base": BASE,
        "start": {
            "warmup": "the base with the warm-up adapter (sft/)",
            "sft": "the SmolLM2 testbed's warm-up (smollm-seed0/sft)",
            "base": "the base",
        }[preset.start],
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
    drawn: dict[str, list[dict]],
    manifest: dict,
    preset: BenchmarkPreset,
    overwrite: bool,
    work: Path,
) -> None:
    """Write the testbed into a temporary sibling of ``out`` and rename it into place."""
    tmp = out.with_name(out.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    last = max(levels)
    if preset.start == "warmup":
        copy_adapter(work / "sft-adapter", tmp / "sft", BASE)
    for k, adapter in levels.items():
        target = tmp / ("rl" if k == last else f"rl-epoch{k}")
        copy_adapter(adapter, target, _start_from(out / target.name, preset))
    for name, rows in (("questions.jsonl", drawn["rows"]), ("sft_pool.jsonl", drawn["pool"])):
        if rows:
            (tmp / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp / "LICENSE.md").write_text(
        f"The questions in questions.jsonl and sft_pool.jsonl are the {preset.benchmark.upper()} benchmark's, "
        f"unchanged but for the answer instruction after each.\nLicence: {preset.licence}.\n",
        encoding="utf-8",
    )
    from .smollm_build import merge_train_logs  # lazy: pulls torch

    merge_train_logs(work, tmp / "train_log.jsonl")
    manifest["files"] = {str(p.relative_to(tmp)): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    (tmp / "testbed.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    if out.exists() and overwrite:
        shutil.rmtree(out)
    tmp.rename(out)


def _start_from(adapter_dir: Path, preset: BenchmarkPreset) -> str:
    """The start checkpoint as a shipped RL adapter names it: the warm-up beside it (``../sft``),
    the shipped templated testbed's by a path relative to the adapter, or the base's spec."""
    if preset.start == "base":
        return BASE
    if preset.start == "warmup":
        return "../sft"
    return os.path.relpath(WARM_UP, adapter_dir.resolve())
