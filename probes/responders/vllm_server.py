"""A local ``vllm serve`` of a checkpoint on 127.0.0.1, with the settings the in-process engine uses
on a CPU (float32, every core, prompts scheduled whole so seeded draws never rewind, top-20
log-probs), started and waited for until its ``/health`` answers. The vLLM tests and
``benchmarks/bench_engines.py`` serve through it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .vllm_engine import CPU_MEMORY_FRACTION, TOP_K


def serve_command(checkpoint: str | Path, served_name: str, port: int) -> list[str]:
    """The ``vllm.entrypoints.openai.api_server`` command line."""
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(checkpoint), "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-logprobs", str(TOP_K), "--seed", "0",
        "--gpu-memory-utilization", str(CPU_MEMORY_FRACTION), "--enforce-eager", "--no-enable-chunked-prefill",
    ]  # fmt: skip


def start_server(
    checkpoint: str | Path, served_name: str, port: int, log: Path | None = None, timeout: float = 300
) -> tuple[str, subprocess.Popen]:
    """``(base URL, process)`` of a started server (every core: none reserved for vLLM's engine loop).

    Raises:
        RuntimeError: the server exited or did not answer in ``timeout`` s (with the log's tail).
    """
    env = {**os.environ, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    out = log.open("w") if log is not None else subprocess.DEVNULL
    try:
        process = subprocess.Popen(
            serve_command(checkpoint, served_name, port), stdout=out, stderr=subprocess.STDOUT, env=env
        )
    finally:
        if log is not None:
            out.close()
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return f"http://127.0.0.1:{port}/v1", process
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            tail = log.read_text()[-3000:] if log is not None else "(no log kept)"
            raise RuntimeError(f"vllm serve of {checkpoint} did not start:\n{tail}")
        time.sleep(1)
