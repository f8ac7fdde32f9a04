"""One ``lara run`` per run directory: a live holder is named and the second run refused in one
line; a lock left by a killed run (SIGKILL) is taken over."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes.cli import main
from probes.errors import InputError
from probes.pipeline.lock import run_directory_lock

from .test_run import write_config

REPO = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys, time; from pathlib import Path; from probes.pipeline.lock import run_directory_lock\n"
    "with run_directory_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(120)\n"
)


def hold_lock(run_dir: Path) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_run_on_a_held_directory_is_refused_in_one_line(smoke_testbed, tmp_path, capsys):
    testbed, _ = smoke_testbed
    config = write_config(tmp_path, testbed)
    holder = hold_lock(tmp_path / "run")
    try:
        start = time.perf_counter()
        assert main(["run", str(config), "--no-progress"]) == 2
        assert time.perf_counter() - start < 10
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"pid {holder.pid}" in err and "in use by another lara run" in err
        assert not (tmp_path / "run" / "sets.jsonl").exists()  # nothing was touched
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path, caplog):
    holder = hold_lock(tmp_path)
    with pytest.raises(InputError, match=f"pid {holder.pid}"):
        with run_directory_lock(tmp_path):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert str(holder.pid) in (tmp_path / "run.lock").read_text()  # the killed holder's record is still there
    with caplog.at_level(logging.INFO, logger="probes.pipeline.lock"):
        with run_directory_lock(tmp_path):
            assert str(os.getpid()) in (tmp_path / "run.lock").read_text()
    assert f"taking over the lock of an earlier run that ended without releasing it (pid {holder.pid})" in caplog.text
    assert (tmp_path / "run.lock").read_text() == ""  # released cleanly
