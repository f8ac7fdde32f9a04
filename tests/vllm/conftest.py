"""vLLM's tests (issue 33): run where the ``vllm`` extra is installed (CI's vllm step:
``constraints-vllm.txt``), skipped elsewhere. One in-process engine per shipped testbed model and
one ``vllm serve`` on 127.0.0.1, each started once per session (~25 s each on 2 CPU cores)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

CHECKPOINTS = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints"
TESTBEDS = {"cpu": CHECKPOINTS / "cpu-seed0", "gsm": CHECKPOINTS / "gsm-seed0"}
TEMPLATE = "Q: {prompt}\nA:"  # both testbeds' prompt format
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture(scope="session")
def raw_format():
    from probes.responders.local import PromptFormat

    return PromptFormat(mode="raw", template=TEMPLATE)


@pytest.fixture(scope="session")
def engines(raw_format):
    """testbed -> (vLLM responder, HF responder) of its RL checkpoint; the cpu testbed's engine
    sends the whole vocabulary (max_logprobs −1: exact entropies and μ/σ), the gsm one the top 20."""
    from cache.config import ModelConfig
    from cache.loading import load_model
    from probes.responders.local import LocalResponder
    from probes.responders.vllm_engine import VLLMResponder

    out = {}
    for name, root in TESTBEDS.items():
        source = str(root / "rl")
        vllm = VLLMResponder(
            source,
            raw_format,
            dtype="float32",
            top_logprobs=-1 if name == "cpu" else 20,
            engine_args={"enforce_eager": True},
        )
        hf = LocalResponder(load_model(ModelConfig(source=source, device="cpu", dtype="float32")), raw_format)
        out[name] = (vllm, hf)
    yield out
    for vllm, _ in out.values():
        vllm.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_servers(tmp_path_factory):
    """testbed -> the base URL of ``vllm serve`` of its RL checkpoint on 127.0.0.1 (``python -m
    vllm.entrypoints.openai.api_server``: vllm-cpu's ``vllm`` command cannot read its own version),
    started on first use."""
    started: dict[str, tuple[str, subprocess.Popen]] = {}

    def url(testbed: str) -> str:
        if testbed not in started:
            started[testbed] = _serve(
                TESTBEDS[testbed] / "rl", tmp_path_factory.mktemp(f"vllm-{testbed}") / "serve.log"
            )
        return started[testbed][0]

    yield url
    for _, process in started.values():
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _serve(checkpoint: Path, log: Path) -> tuple[str, subprocess.Popen]:
    from probes.responders.vllm_server import start_server

    return start_server(checkpoint, "testbed-rl", _free_port(), log)
