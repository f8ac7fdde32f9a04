"""GRPO with TRL's ``GRPOTrainer`` and a LoRA adapter, rewarded by the toolkit's verifier (SPEC §9).

The policy is the checkpoint right before RL (the pretrained base, or the base with an SFT
adapter merged); only a LoRA adapter trains. Prompts are chat turns (TRL applies the model's own
chat template), rewards are 1/0 from :func:`probes.accuracy.verifier.judge` on the completion against the
question's answer, the rollout temperature is the paper's 1.0 and there is no KL term unless
asked for. TRL checkpoints every ``save_steps`` into ``work_dir``; a rerun resumes from the last
one, so the build can stop and go on across sessions.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from ..accuracy.verifier import judge

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter (SPEC §9: r = 16, α = 32, every linear layer)."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: str = "all-linear"


@dataclass(frozen=True)
class TrlGrpoSettings:
    """GRPO's settings: ``num_generations`` completions per prompt (≥ 8), ``prompts_per_step``
    prompts per optimiser step, ``max_completion_length`` tokens per completion."""

    epochs: int = 6
    num_generations: int = 8
    prompts_per_step: int = 4
    max_completion_length: int = 48
    learning_rate: float = 2e-4
    temperature: float = 1.0
    beta: float = 0.0
    loss_type: str = "grpo"
    save_steps: int = 10
    seed: int = 0
    gradient_checkpointing: bool = False
    lora: LoraSettings = LoraSettings()


def verifier_reward(completions: list[Any], answer: list[Any], **_: Any) -> list[float]:
    """TRL reward function: 1 when the verifier reads the right final answer, else 0. A
    conversational completion is a list of messages; its last message's content is judged."""
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [judge(text, gold).reward for text, gold in zip(texts, answer)]


def train_grpo(
    model: Any,
    tokenizer: Any,
    user_turns: Sequence[str],
    answers: Sequence[Any],
    work_dir: Path,
    settings: TrlGrpoSettings,
    keep: dict[int, Path] | None = None,
) -> Any:
    """Train a LoRA adapter on ``model`` by GRPO over the member questions; resume from the last
    checkpoint in ``work_dir`` when there is one.

    Args:
        model: the policy before RL (a ``*ForCausalLM``, float32, CPU or GPU).
        user_turns: each member's user turn [n]; answers: each one's final answer [n].
        work_dir: TRL's output directory (checkpoints, and ``train_log.jsonl``).
        keep: ``{epoch: directory}``: the adapter saved there (float16) when that epoch ends.

    Returns:
        The trained ``PeftModel``.
    """
    from datasets import Dataset  # lazy: datasets
    from trl import GRPOConfig, GRPOTrainer  # lazy: trl

    work_dir.mkdir(parents=True, exist_ok=True)
    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": t}] for t in user_turns], "answer": [str(a) for a in answers]}
    )
    config = GRPOConfig(
        **run_args(work_dir, settings.seed),
        per_device_train_batch_size=settings.prompts_per_step * settings.num_generations,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature,
        top_p=1.0,
        top_k=0,
        learning_rate=settings.learning_rate,
        beta=settings.beta,
        loss_type=settings.loss_type,
        num_train_epochs=settings.epochs,
        save_steps=settings.save_steps,
        save_total_limit=2,
        logging_steps=1,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=5,
        # activations of 32 completions of a 135 M model fit in memory: recomputing them
        # (TRL's default) costs time and saves nothing here
        gradient_checkpointing=settings.gradient_checkpointing,
    )
    parts = trainer_parts(model, tokenizer, dataset, settings.lora, work_dir, "grpo")
    if keep:
        parts["callbacks"].append(keep_callback(keep))
    trainer = GRPOTrainer(reward_funcs=verifier_reward, args=config, **parts)
    logger.info("GRPO on %d members (%s)", len(user_turns), asdict(settings))
    trained = train_resuming(trainer, work_dir)
    last = max(keep) if keep else None
    if last is not None and not (keep[last] / "adapter_config.json").is_file():  # resumed from the very end
        save_half(trained, keep[last])
    return trained


def run_args(work_dir: Path, seed: int) -> dict[str, Any]:
    """The training arguments both stages share: output, seeds, no reporting, float32 (on the CPU
    unless a GPU is there), no progress bars."""
    import torch  # lazy: torch

    return {
        "output_dir": str(work_dir),
        "seed": seed,
        "data_seed": seed,
        "report_to": [],
        "use_cpu": not torch.cuda.is_available(),
        "bf16": False,
        "fp16": False,
        "disable_tqdm": True,
    }


def trainer_parts(
    model: Any, tokenizer: Any, dataset: Any, lora: LoraSettings, work_dir: Path, stage: str
) -> dict[str, Any]:
    """A TRL trainer's model, data, tokenizer, LoRA adapter and log callback (``train_log.jsonl``,
    its records marked ``stage``)."""
    callback = log_callback(work_dir / "train_log.jsonl", stage)
    return {
        "model": model,
        "train_dataset": dataset,
        "processing_class": tokenizer,
        "peft_config": lora_config(lora),
        "callbacks": [callback],
    }


def lora_config(lora: LoraSettings) -> Any:
    """PEFT's ``LoraConfig`` of ``lora`` for a causal LM."""
    from peft import LoraConfig  # lazy: peft

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def train_resuming(trainer: Any, work_dir: Path) -> Any:
    """Run a TRL trainer, from its last checkpoint in ``work_dir`` when there is one; the trained model."""
    resume = any(work_dir.glob("checkpoint-*"))
    if resume:
        logger.info("resuming from the last checkpoint in %s", work_dir)
    trainer.train(resume_from_checkpoint=True if resume else None)
    return trainer.model


def keep_callback(keep: dict[int, Path]) -> Any:
    """A ``TrainerCallback`` saving the adapter (float16) into ``keep[k]`` when epoch ``k`` ends,
    unless it is there already (a resumed run)."""
    from transformers import TrainerCallback  # lazy: transformers

    class KeepEpochs(TrainerCallback):
        def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **_: Any) -> None:
            target = keep.get(round(state.epoch or 0))
            if target is not None and model is not None and not (target / "adapter_config.json").is_file():
                save_half(model, target)
                logger.info("kept the adapter after epoch %d in %s", round(state.epoch), target)

    return KeepEpochs()


def save_half(model: Any, target: Path) -> None:
    """Save ``model``'s adapter into ``target`` with its weights in float16 (half the bytes; the
    loader casts them back to the model's dtype), atomically."""
    import shutil

    from safetensors.torch import load_file, save_file  # lazy: safetensors

    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    weights = tmp / "adapter_model.safetensors"
    tensors = load_file(weights)
    save_file({k: v.half().contiguous() for k, v in tensors.items()}, weights, metadata={"format": "pt"})
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def log_callback(path: Path, stage: str) -> Any:
    """A ``TrainerCallback`` appending each of TRL's log records (step, reward and its std,
    lengths, KL…) to the JSONL file ``path``."""
    from transformers import TrainerCallback  # lazy: transformers

    started = time.time()

    class LogLines(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **_: Any) -> None:
            if not logs:
                return
            record = {"stage": stage, "step": state.global_step, "epoch": state.epoch}
            record["seconds"] = round(time.time() - started, 1)
            record.update({k: v for k, v in logs.items() if isinstance(v, (int, float, str))})
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    return LogLines()
