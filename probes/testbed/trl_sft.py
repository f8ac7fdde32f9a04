"""A LoRA SFT warm-up with TRL's ``SFTTrainer`` on a pool disjoint from every audited question
(SPEC §9: allowed when the base's pass rates leave GRPO too few prompts with mixed rewards).

Each example is a chat exchange: the user turn (problem and answer-format instruction) and the
worked solution ending with "The answer is N"; the loss covers the assistant's turn only
(TRL's prompt-completion format). The adapter is saved; the checkpoint before RL is the base
with it merged.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from .trl_grpo import LoraSettings, run_args, train_resuming, trainer_parts

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrlSftSettings:
    """The warm-up: ``n_pool`` problems, ``epochs`` passes, ``batch_size`` examples per step."""

    n_pool: int = 1500
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 5e-4
    seed: int = 0
    lora: LoraSettings = LoraSettings()


def train_sft(
    model: Any,
    tokenizer: Any,
    user_turns: Sequence[str],
    solutions: Sequence[str],
    work_dir: Path,
    settings: TrlSftSettings,
) -> Any:
    """Train a LoRA adapter on (user turn → solution) pairs; returns the trained ``PeftModel``.

    Args:
        model: the base (a ``*ForCausalLM``, float32).
        user_turns / solutions: the pool's user turns and their worked solutions [n].
        work_dir: TRL's output directory (and ``train_log.jsonl``).
    """
    from datasets import Dataset  # lazy: datasets
    from trl import SFTConfig, SFTTrainer  # lazy: trl

    work_dir.mkdir(parents=True, exist_ok=True)
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": t}] for t in user_turns],
            "completion": [[{"role": "assistant", "content": s}] for s in solutions],
        }
    )
    config = SFTConfig(
        **run_args(work_dir, settings.seed),
        per_device_train_batch_size=settings.batch_size,
        num_train_epochs=settings.epochs,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=10,
        logging_steps=5,
        save_steps=50,
        save_total_limit=1,
        completion_only_loss=True,
        max_length=256,
    )
    trainer = SFTTrainer(args=config, **trainer_parts(model, tokenizer, dataset, settings.lora, work_dir, "sft"))
    logger.info("SFT warm-up on %d problems (%s)", len(user_turns), asdict(settings))
    return train_resuming(trainer, work_dir)
