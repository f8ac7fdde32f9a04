"""One ``lara run`` per run directory: ``RUN_DIR/run.lock`` held with an exclusive ``flock``.

The kernel releases a ``flock`` when its holder exits, however it exits (SIGKILL included), so a
lock left by a killed run is free: the next run takes it over and logs whose it was. A second
run while the first lives is refused in one line naming the holder's pid. (``flock`` is advisory
and local to a machine: two nodes sharing a run directory over NFS are not guarded.)
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ..errors import InputError

logger = logging.getLogger(__name__)

LOCK_NAME = "run.lock"


@contextmanager
def run_directory_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the duration of the block, or raise :class:`InputError` if another run holds it."""
    path = Path(run_dir) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            raise InputError(
                f"run directory {run_dir} is in use by another lara run (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}, since {holder.get('since', '?')}); wait for it to finish or stop "
                "it, or give this run another run_dir"
            ) from None
        previous = _holder(fd)
        if previous:
            logger.info(
                "run directory %s: taking over the lock of an earlier run that ended without releasing it (pid %s)",
                run_dir,
                previous.get("pid"),
            )
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # a clean exit leaves an empty, unlocked file
    finally:
        os.close(fd)  # closing releases the flock


def _holder(fd: int) -> dict:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8").strip()
        return json.loads(text) if text else {}
    except (OSError, ValueError):
        return {}
