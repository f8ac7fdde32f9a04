"""Where outputs go, checked before the work: a read-only or full disk is found before a model is
loaded or an hour of extraction is spent, and said in one line with what to do.

* :func:`check_writable` creates the directory and a probe file in it (and removes it).
* :func:`check_free_space` compares an estimate of what a stage will write with the free space.
* :func:`disk_error_message` turns an ``OSError`` of a full or read-only disk (or a SQLite
  error that says so) into that one line; the CLI prints it and exits with status 2. Work
  committed before the failure (store shards, response-store rows, finished stages) is kept and
  the rerun resumes from it.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import uuid
from pathlib import Path

from .errors import CacheError

DISK_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


class OutputError(CacheError):
    """An output path cannot be written (read-only, no permission, no space)."""


def check_writable(path: str | Path, what: str = "output", directory: bool = False) -> Path:
    """Create the directory that will hold ``path`` (``path`` itself with ``directory``) and prove a
    file can be created there; returns that directory."""
    path = Path(path)
    directory = path if directory else path.parent
    probe = directory / f".lara-write-check-{uuid.uuid4().hex[:8]}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"x")
        probe.unlink()
    except OSError as err:
        raise OutputError(f"cannot write the {what} {path}: {_reason(err)}; choose another location") from None
    return directory


def check_free_space(directory: str | Path, needed_bytes: int, what: str) -> None:
    """Refuse when ``directory``'s file system has less free space than ``needed_bytes``."""
    free = shutil.disk_usage(directory).free
    if needed_bytes > free:
        raise OutputError(
            f"the {what} needs about {_size(needed_bytes)} in {directory}, which has {_size(free)} free; "
            "free some space or choose another location (finished work is kept)"
        )


def disk_error_message(err: BaseException) -> str | None:
    """One line for a full or read-only disk (``OSError`` or a SQLite error), else None."""
    if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
        where = f" writing {err.filename}" if err.filename else ""
        return (
            f"{DISK_ERRNOS[err.errno]}{where} ({os.strerror(err.errno)}); work committed so far is kept: free space "
            "or fix the permissions, then rerun the same command to resume"
        )
    if isinstance(err, sqlite3.OperationalError):
        text = str(err)
        if "disk is full" in text or "readonly" in text or "read-only" in text or "unable to open" in text:
            return (
                f"the response store cannot be written ({text}); rows committed so far are kept: free space or "
                "give a writable --store / run directory, then rerun the same command to resume"
            )
    return None


def _reason(err: OSError) -> str:
    return DISK_ERRNOS.get(err.errno or 0, os.strerror(err.errno) if err.errno else str(err))


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
