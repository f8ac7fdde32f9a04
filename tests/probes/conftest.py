"""Fixtures of the probes tests."""

from __future__ import annotations

import pytest

from .lara_fixtures import build_audit


@pytest.fixture(scope="session")
def audit(tmp_path_factory, toy_dirs):
    """A labelled audit (questions, offline sets, tiny-GPT-2 activations) built once per session."""
    return build_audit(tmp_path_factory.mktemp("audit"), toy_dirs["gpt2"])


@pytest.fixture(scope="session")
def two_models(loaded_models, other_gpt2_dir):
    """The GPT-2 toy and another of its shape and tokenizer with other weights, loaded (the audited
    model and the reference of the generic detector checks, ``tests/detector_checks.py``)."""
    from cache.config import ModelConfig
    from cache.loading import load_model

    return loaded_models["gpt2"], load_model(ModelConfig(source=str(other_gpt2_dir), device="cpu"))
