"""Fixtures of the probes tests."""

from __future__ import annotations

import pytest

from .lara_fixtures import build_audit


@pytest.fixture(scope="session")
def audit(tmp_path_factory, toy_dirs):
    """A labelled audit (questions, offline sets, tiny-GPT-2 activations) built once per session."""
    return build_audit(tmp_path_factory.mktemp("audit"), toy_dirs["gpt2"])
