"""Running ``lara`` commands as real ``torchrun`` jobs in tests (gloo on CPU), and killing one rank mid-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def lara_command(procs: int, *args: str) -> list[str]:
    """``python -m probes.cli ARGS``, under ``torch.distributed.run --standalone`` when ``procs`` > 1."""
    lara = ["-m", "probes.cli", *args]
    if procs == 1:
        return [sys.executable, *lara]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs), *lara]


def kill_rank_one_when(cmd: list[str], ready: Callable[[], bool], timeout_s: float = 240) -> tuple[int, str]:
    """Start the multi-process job ``cmd``, SIGKILL its rank 1 once ``ready()``; (return code, stderr)."""
    import psutil

    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.01)
    assert proc.poll() is None, "the job finished before rank 1 could be killed; give it more work"
    ranks = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.environ().get("RANK") == "1"]
    assert len(ranks) == 1
    ranks[0].send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


def names_rank_one(stderr: str) -> bool:
    """Whether torchrun's failure report names rank 1."""
    return "local_rank: 1" in stderr or "rank 1" in stderr.lower()


def stored_responses(path: Path, kind: str | None = None) -> int:
    """Rows committed to the SQLite response store at ``path`` so far (of ``kind``, e.g. ``generate``;
    0 before it exists)."""
    import sqlite3

    query = "SELECT COUNT(*) FROM responses" + (" WHERE kind = ?" if kind else "")
    try:
        with sqlite3.connect(path, timeout=1) as db:
            return db.execute(query, (kind,) if kind else ()).fetchone()[0]
    except sqlite3.Error:
        return 0
