"""Byte-level file helpers every package shares: a file's sha256 (what binds a score file to its
meta, a sets file to its metrics, a checkpoint to its manifest) and a text written so that a kill
mid-write leaves the old file or the new one, never half of either."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """The sha256 hex digest of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_text_atomically(path: str | Path, text: str) -> None:
    """``text`` (UTF-8) into ``path`` through a temporary file beside it, renamed over it."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
