"""Data-parallel ``lara cache`` under real ``torchrun`` (gloo, 2 processes on CPU): the same rows as
one process; a rank killed mid-run fails the job, and the rerun — with 2 or with 1 process —
resumes from every committed shard and ends equal to an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cache.distributed import assign
from cache.store import ActivationStore, parts_dir

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def write_texts(path: Path, n: int) -> Path:
    path.write_text("".join(f"Item {i}: {'Ava has ' * (i % 5 + 1)}{i} apples and buys {i % 7 + 2} more. How many now?\n"
                            for i in range(n)), encoding="utf-8")
    return path


def cache_command(texts: Path, model: Path, out: Path, procs: int, *extra: str) -> list[str]:
    lara = ["-m", "probes.cli", "-q", "cache", str(texts), "--model", str(model), "-o", str(out), "--device", "cpu",
            "--no-progress", *extra]
    if procs == 1:
        return [sys.executable, *lara]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs), *lara]


def test_assign_balances_tokens_longest_first_and_is_deterministic():
    lengths, keys = [5, 9, 1, 9, 4, 2], ["f", "b", "a", "a", "e", "c"]
    # longest first, ties by key: 9(a)->r0, 9(b)->r1, 5->r0 (14), 4->r1 (13), 2->r1 (15), 1->r0 (15)
    assert assign(lengths, keys, 2) == [0, 1, 0, 0, 1, 1]
    assert assign(lengths, keys, 2) == assign(list(lengths), list(keys), 2)
    assert assign(lengths, keys, 1) == [0] * 6


@pytest.mark.slow
def test_two_processes_equal_one(tmp_path, toy_dirs):
    texts = write_texts(tmp_path / "t.txt", 60)
    one, two = tmp_path / "one.h5", tmp_path / "two.h5"
    subprocess.run(cache_command(texts, toy_dirs["gpt2"], one, 1, "--batch-size", "8"), env=ENV, check=True, capture_output=True)
    result = subprocess.run(cache_command(texts, toy_dirs["gpt2"], two, 2, "--batch-size", "8"), env=ENV, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    a, b = ActivationStore(one), ActivationStore(two)
    lines = texts.read_text().splitlines()
    assert a.keys() == b.keys() and len(b) == 60
    np.testing.assert_allclose(b.get(lines), a.get(lines), atol=1e-5, rtol=0)
    made = b.provenance["distributed"]
    assert made["world_size"] == 2 and sum(made["rows_per_rank"]) == 60 and min(made["rows_per_rank"]) > 0
    assert made["devices"] == ["cpu", "cpu"] and "distributed" not in a.provenance
    assert not parts_dir(two).exists()
    info = subprocess.run([sys.executable, "-m", "probes.cli", "info", str(two)], env=ENV, capture_output=True, text=True, check=True)
    assert "2 processes" in info.stdout


def kill_rank_one(cmd: list[str], out: Path) -> tuple[int, str]:
    """Start a 2-process job and SIGKILL its rank 1 once that rank has committed a shard."""
    import psutil

    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if list(parts_dir(out).glob("part-*-r1.h5")):
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the job finished before rank 1 could be killed; give it more texts"
    ranks = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.environ().get("RANK") == "1"]
    assert len(ranks) == 1
    ranks[0].send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


@pytest.mark.slow
@pytest.mark.parametrize("rerun_procs", [2, 1])
def test_a_killed_rank_fails_the_job_and_the_rerun_resumes(tmp_path, toy_dirs, rerun_procs):
    texts = write_texts(tmp_path / "t.txt", 1200)
    extra = ("--batch-size", "2", "--flush-every", "2")
    clean = tmp_path / "clean.h5"
    subprocess.run(cache_command(texts, toy_dirs["gpt2"], clean, 1, "--batch-size", "16"), env=ENV, check=True, capture_output=True)
    killed = tmp_path / "killed.h5"
    returncode, stderr = kill_rank_one(cache_command(texts, toy_dirs["gpt2"], killed, 2, *extra), killed)
    assert returncode != 0 and not killed.exists()
    assert "local_rank: 1" in stderr or "rank 1" in stderr.lower(), stderr[-2000:]
    committed = {p.name for p in parts_dir(killed).glob("part-*.h5")}
    assert any(n.endswith("-r1.h5") for n in committed)
    result = subprocess.run(cache_command(texts, toy_dirs["gpt2"], killed, rerun_procs, *extra), env=ENV, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = texts.read_text().splitlines()
    a, b = ActivationStore(clean), ActivationStore(killed)
    assert a.keys() == b.keys() and len(b) == 1200
    np.testing.assert_allclose(b.get(lines), a.get(lines), atol=1e-5, rtol=0)
    assert not parts_dir(killed).exists()
    if rerun_procs == 2:
        assert json.loads(json.dumps(b.provenance["distributed"]))["world_size"] == 2
