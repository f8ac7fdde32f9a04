"""``lara testbed build``: a small causal LM whose RL training set is known.

Steps: draw the splits (:mod:`.problems`), train a byte-level BPE tokenizer with one digit per
token on the SFT pool, initialise a GPT-2, SFT it on the pool, then GRPO it on the RL members
only. Written to the output directory:

* ``sft/``, ``rl/``: the two checkpoints (``from_pretrained``-loadable, safetensors);
* ``questions.jsonl``: members (label 1), template-matched non-members (label 0), and the
  held-out test problems as ``split: clean_ref`` (unlabelled; a clean reference for LaRA);
* ``sft_pool.jsonl``: the SFT problems, to check that no audited problem was in it;
* ``train_log.jsonl``: SFT and GRPO step logs;
* ``testbed.json``: preset, seed, command, split sizes, the problems GRPO trained on, accuracy of
  both checkpoints on members / non-members / test, timings, checkpoint file hashes.

The build goes to a temporary sibling directory renamed into place at the end, so a killed
build leaves no half-written testbed.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from lara_core.files import file_sha256

from ..errors import InputError
from . import gsm
from .gsm import draw_gsm, usable_templates
from .problems import PROMPT_TEMPLATE, TEMPLATES, Problem, hash_key, make_splits, question_rows
from .training import GRPOSettings, SFTSettings, accuracy, grpo, supervised_finetune

logger = logging.getLogger(__name__)

MANIFEST = "testbed.json"
BUILD_FORMAT = 1


@dataclass(frozen=True)
class Preset:
    """Sizes of a testbed build (model, splits, training)."""

    n_layer: int
    d_model: int
    n_head: int
    vocab_size: int
    n_sft: int
    n_members: int
    n_test: int
    sft: SFTSettings
    grpo: GRPOSettings
    device: str = "cpu"
    problems: str = "ours"  # "ours" (problems.TEMPLATES) or "gsm-symbolic" (gsm.py; the gsm extra)
    n_positions: int = 256


PRESETS: dict[str, Preset] = {
    # seconds on 2 CPU cores: checks the plumbing, not the contamination signal
    "smoke": Preset(
        n_layer=2,
        d_model=48,
        n_head=2,
        vocab_size=360,
        n_sft=1500,
        n_members=24,
        n_test=16,
        sft=SFTSettings(steps=120, batch_size=32, lr=3e-3, warmup=20),
        grpo=GRPOSettings(epochs=2, group_size=4, questions_per_step=12, lr=3e-4, max_new_tokens=40),
    ),
    # the shipped demo checkpoints: about 20 minutes on 2 CPU cores. 2,000 SFT steps bring the base to
    # ~40 % on held-out problems (1,200 gave 16 %), GRPO at 3e-4 then lifts the members well clear
    "cpu": Preset(
        n_layer=4,
        d_model=128,
        n_head=4,
        vocab_size=512,
        n_sft=12000,
        n_members=150,
        n_test=100,
        sft=SFTSettings(steps=2000, batch_size=32, lr=2e-3, warmup=100),
        grpo=GRPOSettings(epochs=16, group_size=8, questions_per_step=16, lr=3e-4, max_new_tokens=48),
    ),
    # a larger model and more problems, for a GPU
    "gpu": Preset(
        n_layer=8,
        d_model=384,
        n_head=6,
        vocab_size=1024,
        n_sft=60000,
        n_members=500,
        n_test=300,
        sft=SFTSettings(steps=6000, batch_size=128, lr=1e-3, warmup=300),
        grpo=GRPOSettings(epochs=15, group_size=16, questions_per_step=32, lr=5e-5, max_new_tokens=48),
        device="cuda",
    ),
    # GSM-Symbolic's templates of GSM8K test questions, their own chains of thought (reasoning-gym:
    # the gsm extra). Longer texts (median 152 tokens): batches cut by length, a 176-token budget, and
    # SFT on the solutions only (trained on whole texts, 1,600 steps reached 3 % of held-out problems:
    # the question's names and numbers drowned the gradient of copying them into the solution)
    "gsm": Preset(
        n_layer=4,
        d_model=128,
        n_head=4,
        vocab_size=1024,
        n_sft=12000,
        n_members=150,
        n_test=100,
        sft=SFTSettings(steps=1600, batch_size=32, lr=2e-3, warmup=100, length_buckets=8, prompt_loss=False),
        grpo=GRPOSettings(epochs=10, group_size=8, questions_per_step=16, lr=3e-4, max_new_tokens=176),
        problems="gsm-symbolic",
        n_positions=384,
    ),
    # the gsm build's plumbing in about a minute (CI runs it when the gsm extra is installed)
    "gsm-smoke": Preset(
        n_layer=2,
        d_model=48,
        n_head=2,
        vocab_size=512,
        n_sft=600,
        n_members=24,
        n_test=16,
        sft=SFTSettings(steps=40, batch_size=16, lr=3e-3, warmup=10, length_buckets=4, prompt_loss=False),
        grpo=GRPOSettings(epochs=1, group_size=4, questions_per_step=12, lr=3e-4, max_new_tokens=176),
        problems="gsm-symbolic",
        n_positions=384,
    ),
}


def problem_id(problem: Problem) -> str:
    """A stable id that does not reveal the split."""
    return f"tb{hash_key(problem.template, problem.numbers):016x}"[:14]


def build_testbed(
    out_dir: str | Path,
    preset: str = "cpu",
    seed: int = 0,
    device: str | None = None,
    overwrite: bool = False,
    command: str | None = None,
) -> dict[str, Any]:
    """Build a testbed into ``out_dir``; returns the manifest (also written as ``testbed.json``)."""
    if preset not in PRESETS:
        raise InputError(f"unknown testbed preset {preset!r}; choose one of {', '.join(PRESETS)}")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise InputError(f"{out_dir} exists and is not empty; pass --overwrite to replace it, or another --out")
    p = PRESETS[preset]
    device = device or p.device
    started = time.perf_counter()
    source = problem_source(p, seed)  # a missing extra is refused before anything is written
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    log_file = (tmp / "train_log.jsonl").open("w", encoding="utf-8")

    def log(record: dict[str, Any]) -> None:
        log_file.write(json.dumps(record) + "\n")
        if record.get("stage") == "sft" and record["step"] % 200 == 0:
            logger.info("SFT step %d/%d: loss %.4f", record["step"], p.sft.steps, record["loss"])

    try:
        splits = make_splits(p.n_sft, p.n_members, p.n_test, seed, **source)
        trained = _train(tmp, p, splits, TrainingRun(preset, seed, device), log)
        log_file.close()
        _write_problems(tmp, p, splits)
        seconds = {
            "sft": round(trained.sft_seconds, 1),
            "grpo": round(trained.rl_seconds, 1),
            "total": round(time.perf_counter() - started, 1),
        }
        manifest = _manifest(
            tmp,
            preset,
            seed,
            command or f"lara testbed build --out {out_dir} --preset {preset} --seed {seed}",
            asdict(p) | {"device": device},
            splits,
            sorted(trained.trained_on),
            trained.evaluation,
            seconds,
        )
        manifest.update(_problems_record(p, splits))
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it private; a testbed is meant to be shared
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if not log_file.closed:
            log_file.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


@dataclass(frozen=True)
class TrainingRun:
    """Which build a training belongs to: the preset's name, the seed, the device."""

    preset: str
    seed: int
    device: str


@dataclass
class Trained:
    """What training left besides the checkpoints: accuracies after SFT and after GRPO, the problems
    GRPO trained on, and the seconds each stage took."""

    evaluation: dict[str, Any]
    trained_on: set[str]
    sft_seconds: float
    rl_seconds: float


def _train(tmp: Path, p: Preset, splits: Any, run: TrainingRun, log: Callable[[dict[str, Any]], None]) -> Trained:
    """A fresh model SFT-ed on the pool, then GRPO-ed on the members against its frozen copy; the two
    checkpoints saved as ``tmp/sft`` and ``tmp/rl``; every step logged through ``log``."""
    tokenizer, model = _fresh_model(p, splits, run.seed, run.device)
    logger.info(
        "testbed %s (seed %d): %d SFT problems, %d members, %d non-members, %d test; GPT-2 %d x %d (%.2fM parameters)",
        run.preset,
        run.seed,
        len(splits.sft),
        len(splits.members),
        len(splits.non_members),
        len(splits.test),
        p.n_layer,
        p.d_model,
        sum(x.numel() for x in model.parameters()) / 1e6,
    )
    t0 = time.perf_counter()
    supervised_finetune(model, tokenizer, splits.sft, p.sft, run.seed, log=log)
    sft_seconds = time.perf_counter() - t0
    evaluation = {"sft": _accuracies(model, tokenizer, splits, p.grpo.max_new_tokens)}
    logger.info("after SFT: accuracy %s", _describe(evaluation["sft"]))
    model.save_pretrained(tmp / "sft")
    tokenizer.save_pretrained(tmp / "sft")

    reference = copy.deepcopy(model).requires_grad_(False)
    trained_on: set[str] = set()

    def log_rl(record: dict[str, Any]) -> None:
        trained_on.update(problem_id(x) for x in record.pop("problems"))
        log(record)

    t0 = time.perf_counter()
    grpo(model, reference, tokenizer, splits.members, p.grpo, run.seed, log=log_rl)
    rl_seconds = time.perf_counter() - t0
    evaluation["rl"] = _accuracies(model, tokenizer, splits, p.grpo.max_new_tokens)
    logger.info("after GRPO: accuracy %s", _describe(evaluation["rl"]))
    model.save_pretrained(tmp / "rl")
    tokenizer.save_pretrained(tmp / "rl")
    return Trained(evaluation, trained_on, sft_seconds, rl_seconds)


def _write_problems(tmp: Path, p: Preset, splits: Any) -> None:
    """``questions.jsonl`` (the audited questions and the clean set) and ``sft_pool.jsonl``."""
    _write_jsonl(tmp / "questions.jsonl", _question_rows(splits, "testbed" if p.problems == "ours" else "gsm-symbolic"))
    _write_jsonl(
        tmp / "sft_pool.jsonl",
        [{"id": problem_id(x), "template": x.template, "numbers": dict(x.numbers)} for x in splits.sft],
    )


def problem_source(p: Preset, seed: int) -> dict[str, Any]:
    """``make_splits``' ``draw`` and ``templates`` for the preset's problems (ours: the defaults)."""
    if p.problems == "ours":
        return {}

    return {"draw": draw_gsm, "templates": usable_templates(seed)}


def _fresh_model(p: Preset, splits: Any, seed: int, device: str) -> tuple[Any, Any]:
    """The tokenizer trained on the SFT pool (one digit per token) and a freshly initialised GPT-2."""
    import torch
    from transformers import GPT2LMHeadModel

    from cache.toymodels import ToyModelSpec, model_config, train_tokenizer  # lazy: pulls h5py

    tokenizer = train_tokenizer(p.vocab_size, texts=[x.text() for x in splits.sft], split_digits=True)
    tokenizer.chat_template = None
    shape = ToyModelSpec("gpt2", p.n_layer, p.d_model, p.n_head, len(tokenizer), max_positions=p.n_positions)
    config = model_config(shape, tokenizer)
    torch.manual_seed(seed)
    return tokenizer, GPT2LMHeadModel(config).to(device)


def _manifest(
    tmp: Path,
    preset: str,
    seed: int,
    command: str,
    settings: dict[str, Any],
    splits: Any,
    trained_on: list[str],
    evaluation: dict[str, Any],
    seconds: dict[str, float],
) -> dict[str, Any]:
    """``testbed.json``: how the testbed was made and what its checkpoints do."""
    import torch

    return {
        "format": BUILD_FORMAT,
        "preset": preset,
        "seed": seed,
        "command": command,
        "settings": settings,
        "prompt_template": PROMPT_TEMPLATE,
        "n_templates": len(TEMPLATES),
        "splits": {
            "sft": len(splits.sft),
            "members": len(splits.members),
            "non_members": len(splits.non_members),
            "test": len(splits.test),
        },
        "rl_trained_on": trained_on,
        "accuracy": evaluation,
        "seconds": seconds,
        "files": {str(f.relative_to(tmp)): file_sha256(f) for f in sorted(tmp.rglob("*.safetensors"))},
        "torch": torch.__version__,
    }


def _problems_record(p: Preset, splits: Any) -> dict[str, Any]:
    """Where the problems come from: for GSM-Symbolic, the templates used, the filter, versions."""
    if p.problems == "ours":
        return {}
    from importlib.metadata import version

    templates = sorted({x.template for x in splits.sft} | {x.template for x in splits.members})
    return {
        "problems": {
            "source": "gsm-symbolic (reasoning-gym generators, difficulty 1.0)",
            "templates": templates,
            "n_templates": len(templates),
            "filter": {
                "max_number": gsm.MAX_NUMBER,
                "max_solution_chars": gsm.MAX_SOLUTION_CHARS,
                "max_question_chars": gsm.MAX_QUESTION_CHARS,
                "min_share": gsm.MIN_SHARE,
            },
        },
        "n_templates": len(templates),
        "versions": {name: version(name) for name in ("reasoning-gym", "transformers", "tokenizers", "torch")},
    }


def _accuracies(model: Any, tokenizer: Any, splits: Any, max_new_tokens: int) -> dict[str, float]:
    return {
        name: round(accuracy(model, tokenizer, getattr(splits, name), max_new_tokens), 4)
        for name in ("members", "non_members", "test")
    }


def _describe(acc: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1%}" for k, v in acc.items())


def _question_rows(splits: Any, source: str) -> list[dict[str, Any]]:
    return question_rows(
        splits,
        source,
        id_of=problem_id,
        question_of=lambda x: x.question,
        extra_of=lambda x: {"template": x.template, "numbers": dict(x.numbers), "solution": x.solution},
    )


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def read_manifest(testbed_dir: str | Path) -> dict[str, Any]:
    """The ``testbed.json`` of a built testbed."""
    path = Path(testbed_dir) / MANIFEST
    if not path.is_file():
        raise InputError(
            f"{testbed_dir} is not a testbed (no {MANIFEST}); build one with: lara testbed build --out DIR"
        )
    return json.loads(path.read_text(encoding="utf-8"))
