"""The real-model testbed's build, step by step and resumable (:mod:`.smollm` says what each
step computes; SPEC §9)."""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cache.toymodels import default_home
from lara_core.files import file_sha256

from .smollm import (
    BASE,
    FORMAT,
    INSTRUCTION,
    SMOLLM_PRESETS,
    SmollmPreset,
    Stages,
    copy_adapter,
    draw_splits,
    lift_ok,
    needs_warmup,
    pass_rates,
    screen_table,
    screen_templates,
    sft_pool,
    smollm_question_rows,
    summarise_lift,
    user_turn,
)

logger = logging.getLogger(__name__)


def default_work_dir(preset: str, seed: int) -> Path:
    """Where a build keeps its steps and TRL's checkpoints: ``$LARA_HOME/testbed-builds/…``."""
    return default_home() / "testbed-builds" / f"{preset}-seed{seed}"


def build_smollm_testbed(
    out: Path, preset_name: str = "smollm", seed: int = 0, work: Path | None = None, overwrite: bool = False
) -> dict[str, Any]:
    """Build (or resume building) the real-model testbed into ``out``; returns its manifest.

    Raises:
        FileExistsError: ``out`` exists and ``overwrite`` is off.
    """
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass --overwrite to replace it")
    preset = SMOLLM_PRESETS[preset_name]
    work = work or default_work_dir(preset_name, seed)
    stages = Stages(work)
    started = time.time()
    policy = _load(BASE)
    screens = {
        "base": stages.once("screen_base", lambda: screen_templates(policy.model, policy.tokenizer, preset, seed))
    }
    logger.info("the base's screen (pass rate per template):\n%s", screen_table(screens["base"]["value"]))
    pool: list[dict[str, Any]] = []
    sft_dir = work / "sft-adapter"
    if needs_warmup(screens["base"]["value"], preset):
        pool = stages.once("sft_pool", lambda: sft_pool(preset, seed))["value"]
        if not (sft_dir / "adapter_config.json").is_file():
            _warm_up(policy, pool, preset, work, sft_dir)
        policy = _load(str(sft_dir), base_spec=BASE)
        screens["sft"] = stages.once(
            "screen_sft", lambda: screen_templates(policy.model, policy.tokenizer, preset, seed)
        )
        logger.info("after the warm-up (pass rate per template):\n%s", screen_table(screens["sft"]["value"]))
    chosen = screens["sft" if pool else "base"]["value"]["chosen"]
    exclude = {json.dumps(row["key"]) for row in pool}
    rows = stages.once("splits", lambda: smollm_question_rows(draw_splits(chosen, preset, seed, exclude)))["value"]
    before = stages.once("before", lambda: pass_rates(policy.model, policy.tokenizer, rows, preset, seed))
    rl_dir = work / "rl-adapter"
    if not (rl_dir / "adapter_config.json").is_file():
        _grpo(policy, rows, preset, work, rl_dir)
    rl = _load(str(rl_dir), base_spec=str(sft_dir) if pool else BASE)
    after = stages.once("after", lambda: pass_rates(rl.model, rl.tokenizer, rows, preset, seed))
    lift = summarise_lift(before["value"], after["value"])
    stages_record = {"screens": screens, "before": before, "after": after, "warm_up": bool(pool)}
    stages_record["training"] = {stage: training_seconds(work / stage / "train_log.jsonl") for stage in ("sft", "grpo")}
    manifest = _manifest(preset_name, preset, seed, stages_record, rows, lift, time.time() - started)
    _ship(out, work, {"sft": sft_dir if pool else None, "rl": rl_dir}, rows, manifest, overwrite)
    return manifest


def merge_train_logs(work: Path, target: Path) -> None:
    """The warm-up's and GRPO's log records (``work/sft``, ``work/grpo``), in that order, into ``target``."""
    with target.open("w", encoding="utf-8") as log:
        for stage in ("sft", "grpo"):
            part = work / stage / "train_log.jsonl"
            if part.is_file():
                log.write(part.read_text(encoding="utf-8"))


def training_seconds(log: Path) -> float | None:
    """Wall time a TRL stage took, over every process that ran it (each resumed process restarts
    the log's ``seconds`` clock, so the total is the sum of each process's last reading); None
    when the stage did not run."""
    if not log.is_file():
        return None
    total, last = 0.0, 0.0
    for line in log.read_text(encoding="utf-8").splitlines():
        seconds = float(json.loads(line)["seconds"])
        if seconds < last:  # a new process
            total += last
        last = seconds
    return round(total + last, 1)


def _load(source: str, base_spec: str | None = None) -> Any:
    from cache.config import ModelConfig  # lazy: pulls h5py
    from cache.loading import load_model  # lazy: pulls h5py

    return load_model(ModelConfig(source=source, base=base_spec, dtype="float32", device="auto"))


def _trainable(loaded: Any) -> Any:
    model = loaded.model
    model.requires_grad_(True)
    model.train()
    return model


def _save_adapter(trained: Any, target: Path) -> None:
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trained.save_pretrained(tmp)
    tmp.rename(target)


def _warm_up(policy: Any, pool: list[dict[str, Any]], preset: SmollmPreset, work: Path, target: Path) -> None:
    """The LoRA SFT warm-up on the pool (user turn → worked solution); its adapter saved to ``target``."""
    from .trl_sft import train_sft  # lazy: pulls trl

    pairs = [(r["user"], r["solution"]) for r in pool]
    _save_adapter(_train(train_sft, policy, pairs, work / "sft", preset.sft), target)


def _grpo(policy: Any, rows: list[dict[str, Any]], preset: SmollmPreset, work: Path, target: Path) -> None:
    """GRPO on the members (question, final answer); the trained adapter saved to ``target``."""
    from .trl_grpo import train_grpo  # lazy: pulls trl

    pairs = [(r["question"], r["answer"]) for r in rows if r["split"] == "member"]
    _save_adapter(_train(train_grpo, policy, pairs, work / "grpo", preset.grpo), target)


def _train(trainer: Any, policy: Any, pairs: list[tuple[Any, Any]], work_dir: Path, settings: Any) -> Any:
    """``trainer`` (``train_sft`` or ``train_grpo``) on (prompt, target) ``pairs``; the trained model."""
    prompts, targets = [p for p, _ in pairs], [t for _, t in pairs]
    return trainer(_trainable(policy), policy.tokenizer, prompts, targets, work_dir, settings)


def _manifest(
    name: str, preset: SmollmPreset, seed: int, stages: dict, rows: list[dict], lift: dict, seconds: float
) -> dict[str, Any]:
    seconds_by_stage = {f"screen_{k}": v["seconds"] for k, v in stages["screens"].items()}
    seconds_by_stage.update(before=stages["before"]["seconds"], after=stages["after"]["seconds"])
    seconds_by_stage.update({k: v for k, v in stages["training"].items() if v is not None})
    seconds_by_stage["total"] = round(sum(seconds_by_stage.values()), 1)
    seconds_by_stage["this_invocation"] = round(seconds, 1)
    return {
        "format": FORMAT,
        "preset": name,
        "seed": seed,
        "command": f"lara testbed build --out OUT --preset {name} --seed {seed}",
        "base": BASE,
        "instruction": INSTRUCTION,
        "user_turn_example": user_turn("<problem>"),
        "settings": asdict(preset),
        "screens": {k: v["value"] for k, v in stages["screens"].items()},
        "warm_up": stages["warm_up"],
        "splits": {s: sum(r["split"] == s for r in rows) for s in ("member", "non_member", "clean_ref")},
        "rl_trained_on": sorted(r["id"] for r in rows if r["split"] == "member"),
        "pass_rates": {"before_rl": stages["before"]["value"], "after_rl": stages["after"]["value"]},
        "lift": lift,
        "learned": lift_ok(lift),
        "reference": "sft/ (the base with the warm-up adapter)" if stages["warm_up"] else "the base",
        "seconds": seconds_by_stage,
    }


def _ship(
    out: Path, work: Path, adapters: dict[str, Path | None], rows: list[dict], manifest: dict, overwrite: bool
) -> None:
    """Write the testbed into a temporary sibling of ``out`` and rename it into place: the RL
    adapter names ``../sft`` as its base when there was a warm-up (resolved beside it), else the
    base's ``package:`` spec; the warm-up adapter names the base."""
    tmp = out.with_name(out.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if adapters["sft"] is not None:
        copy_adapter(adapters["sft"], tmp / "sft", BASE)
    copy_adapter(adapters["rl"], tmp / "rl", "../sft" if adapters["sft"] is not None else BASE)
    (tmp / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    merge_train_logs(work, tmp / "train_log.jsonl")
    manifest["files"] = {str(p.relative_to(tmp)): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    (tmp / "testbed.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    if out.exists() and overwrite:
        shutil.rmtree(out)
    tmp.rename(out)
