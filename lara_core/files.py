"""Byte-level file helpers every package shares: a file's sha256 (what binds a score file to its
meta, a sets file to its metrics, a checkpoint to its manifest) and a file written so that a kill
mid-write leaves the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Iterator

from .errors import InputError


def file_sha256(path: str | Path) -> str:
    """The sha256 hex digest of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(path: str | Path, durable: bool = False, suffix: str = ".tmp") -> Iterator[Path]:
    """The one temp-file-then-rename writer: yields ``PATH`` + ``suffix`` to write, then renames it over
    ``path`` (a kill mid-write leaves the old file or the new one); on an error the temporary file
    is removed and the error raised. ``durable``: fsync the file before the rename and its directory
    after (what survives a power cut, for the caches that are expensive to redo)."""
    path = Path(path)
    tmp = path.with_name(path.name + suffix)
    try:
        yield tmp
        if durable:
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        with contextlib.suppress(OSError):  # not every file system lets a directory be opened
            directory = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)


def write_text_atomically(path: str | Path, text: str) -> None:
    """``text`` (UTF-8) into ``path`` through a temporary file beside it, renamed over it."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def utf8_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, line ends stripped, a leading byte-order mark
    skipped; another encoding is refused naming the line, the byte and a conversion command."""
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(
                    f"{path}:{lineno}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}). "
                    f"Convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8 {path} > fixed{path.suffix}`"
                ) from None
            yield lineno, (line.removeprefix("\ufeff") if lineno == 1 else line).rstrip("\r\n")
