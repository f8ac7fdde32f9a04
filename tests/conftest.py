"""Shared fixtures: tiny GPT-2, Llama and Qwen2 models built offline and loaded through the
real ``from_pretrained(local_dir)`` path.

The tokenizer is a byte-level BPE trained with ``tokenizers`` on a built-in corpus; the Llama
tokenizer prepends BOS (so BOS exclusion is exercised), GPT-2 has absolute positions (so
left-padding position ids are exercised), Qwen2 has attention biases. Norm weights are perturbed
away from 1 and weights drawn with std 0.2 so activations are O(1) and a folded or skipped norm
would show at the 1e-5 tolerance.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ARCHS = ("gpt2", "llama", "qwen2")
BACKEND_NAMES = ("hf", "transformer_lens", "nnsight")

SAMPLE_TEXTS = (
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "If x + 3 = 7, what is x?",
    "Hi",
    "The probability of rolling a 6 on a fair die is 1/6. Roll it [BLANK] times: what is the chance of no 6?",
    "Solve for $x$: $3x - 4 = -10$.",
)


SLOW_TIER = "python -m pytest --slow (everything) or -m slow (the tier alone); CI runs it"


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the slow tier (tests marked slow)")


def pytest_collection_modifyitems(config, items):
    """The default suite leaves the slow tier out (many processes, kills and resumes, trained
    models; about 37 minutes on 2 cores), unless --slow is given or -m chooses by marker."""
    if config.getoption("--slow") or config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)
        config._lara_slow_left_out = len(slow)


def pytest_terminal_summary(terminalreporter, config):
    left_out = getattr(config, "_lara_slow_left_out", 0)
    if left_out:
        terminalreporter.write_line(f"{left_out} tests of the slow tier left out: {SLOW_TIER}")


def toy_spec(arch: str, seed: int = 0):
    from cache.toymodels import ToyModelSpec

    return ToyModelSpec(arch=arch, n_layers=3, d_model=32, n_heads=4, max_positions=64, seed=seed, init_std=0.2)


@pytest.fixture(autouse=True)
def _seed_everything():
    import torch

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def toy_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("toy-models")


@pytest.fixture(scope="session")
def toy_dirs(toy_root) -> dict[str, Path]:
    from cache.toymodels import ensure_toy_model

    return {arch: ensure_toy_model(toy_spec(arch), toy_root) for arch in ARCHS}


@pytest.fixture(scope="session")
def other_gpt2_dir(toy_root) -> Path:
    """A GPT-2 toy of the same shape as ``toy_dirs['gpt2']`` but other weights."""
    from cache.toymodels import ensure_toy_model

    return ensure_toy_model(toy_spec("gpt2", seed=1), toy_root)


@pytest.fixture(scope="session")
def loaded_models(toy_dirs):
    """arch -> LoadedModel (loaded once per session; backends get copies)."""
    from cache.config import ModelConfig
    from cache.loading import load_model

    return {arch: load_model(ModelConfig(source=str(path), device="cpu")) for arch, path in toy_dirs.items()}


@pytest.fixture(scope="session")
def extractors(loaded_models):
    """(arch, backend) -> extractor, built lazily and shared across the session."""
    from cache.backends import create_extractor

    built: dict[tuple[str, str], object] = {}

    def get(arch: str, backend: str):
        if (arch, backend) not in built:
            built[arch, backend] = create_extractor(backend, loaded_models[arch])
        return built[arch, backend]

    return get
