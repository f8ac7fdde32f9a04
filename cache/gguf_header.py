"""Read a GGUF file's metadata header without the ``gguf`` package (SPEC §9).

A GGUF file opens with the magic ``GGUF``, a format version (2 or 3), the tensor count, the
metadata count and then the metadata key/value pairs (little-endian). Reading them costs
microseconds, so a file whose architecture transformers cannot load is refused before any
stage runs, and before the ``gguf`` package (needed only to load the weights) is asked for.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import ModelLoadError

MAGIC = b"GGUF"
# value type id -> struct format of a scalar (8 string, 9 array are read apart)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_KEYS = 1 << 16  # a header claiming more is corrupt


def is_gguf(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts with the GGUF magic."""
    path = Path(path)
    if not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(4) == MAGIC


def read_metadata(path: str | Path, wanted: tuple[str, ...] = ("general.architecture", "general.name")) -> dict:
    """The metadata values of ``wanted`` keys (array values are skipped, scalars and strings read),
    stopping once all are found.

    Raises:
        ModelLoadError: not a GGUF file, an unknown format version, or a truncated header.
    """
    path = Path(path)
    found: dict[str, Any] = {}
    with path.open("rb") as f:
        try:
            version, _n_tensors, n_keys = _open_header(f, path)
            for _ in range(n_keys):
                key = _string(f)
                (kind,) = _unpack(f, "<I")
                value = _value(f, kind)
                if key in wanted:
                    found[key] = value
                    if len(found) == len(wanted):
                        break
        except struct.error:
            raise ModelLoadError(f"{str(path)!r} ends inside its GGUF header: the file is truncated") from None
    found["version"] = version
    return found


@dataclass(frozen=True)
class TensorEntry:
    """One row of a GGUF file's tensor table: its dimensions, ggml type id and data offset."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int

    def n_bytes(self) -> int | None:
        """Its data's size in bytes (None for a type this table does not know)."""
        size = GGML_BLOCKS.get(self.ggml_type)
        if size is None:
            return None
        block, block_bytes = size
        return math.prod(self.dims) // block * block_bytes


# ggml type id -> (values per block, bytes per block), as the GGUF specification lists them
GGML_BLOCKS = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 40),  # Q8_1
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    16: (256, 66),  # IQ2_XXS
    17: (256, 74),  # IQ2_XS
    18: (256, 98),  # IQ3_XXS
    19: (256, 50),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (256, 110),  # IQ3_S
    22: (256, 82),  # IQ2_S
    23: (256, 136),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (256, 56),  # IQ1_M
    30: (1, 2),  # BF16
    34: (256, 54),  # TQ1_0
    35: (256, 66),  # TQ2_0
    39: (32, 17),  # MXFP4
}


def tensor_table(path: str | Path) -> tuple[list[TensorEntry], int]:
    """The file's tensor table and where its tensor data begins (the table's end, aligned to
    ``general.alignment``, 32 by default).

    Raises:
        ModelLoadError: not a GGUF file, or its header or tensor table is cut short or corrupt.
    """
    path = Path(path)
    with path.open("rb") as f:
        try:
            _version, n_tensors, n_keys = _open_header(f, path)
            alignment = 32
            for _ in range(n_keys):
                key = _string(f)
                value = _value(f, _unpack(f, "<I")[0])
                if key == "general.alignment" and isinstance(value, int) and value > 0:
                    alignment = value
            entries = []
            for _ in range(n_tensors):  # name, n_dims, dims [n_dims], type, offset
                name = _string(f)
                (n_dims,) = _unpack(f, "<I")
                if n_dims > 8:
                    raise struct.error("too many dimensions")
                dims = _unpack(f, f"<{n_dims}Q")
                ggml_type, offset = _unpack(f, "<IQ")
                entries.append(TensorEntry(name, tuple(dims), ggml_type, offset))
        except struct.error:
            raise ModelLoadError(f"{str(path)!r} ends inside its GGUF header: the file is truncated") from None
        start = -(-f.tell() // alignment) * alignment
    return entries, start


def parameter_count(path: str | Path) -> int:
    """How many weights the file's tensors hold (the product of each tensor's dimensions, summed):
    what its dequantised checkpoint holds, whatever the file's quantisation."""
    return sum(math.prod(entry.dims) for entry in tensor_table(path)[0])


def check_complete(path: str | Path) -> None:
    """Refuse a file shorter than its tensor table says (cut short while copying or downloading):
    every tensor's data, at its offset after the table, must lie inside the file.

    Raises:
        ModelLoadError: the file is truncated (or its header is corrupt).
    """
    path = Path(path)
    entries, start = tensor_table(path)
    needed = max((start + e.offset + (e.n_bytes() or 0) for e in entries), default=0)
    size = path.stat().st_size
    if size < needed:
        raise ModelLoadError(
            f"{str(path)!r} is truncated: its tensor table needs {needed:,} bytes and the file holds {size:,} "
            f"({size / needed:.0%}); copy or download it again"
        )


def _open_header(f: BinaryIO, path: Path) -> tuple[int, int, int]:
    """Check the magic and read (version, tensor count, metadata count), refusing what is corrupt."""
    if f.read(4) != MAGIC:
        raise ModelLoadError(f"{str(path)!r} is not a GGUF file (it does not start with 'GGUF')")
    (version,) = _unpack(f, "<I")
    if version not in (2, 3):
        raise ModelLoadError(f"{str(path)!r} is GGUF version {version}; versions 2 and 3 are read")
    n_tensors, n_keys = _unpack(f, "<QQ")
    if n_keys > MAX_KEYS or n_tensors > _remaining(f):
        raise ModelLoadError(
            f"{str(path)!r} claims {n_keys} metadata keys and {n_tensors} tensors: the header is corrupt"
        )
    return version, n_tensors, n_keys


def _unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise struct.error("short read")
    return struct.unpack(fmt, data)


def _string(f: BinaryIO) -> str:
    (length,) = _unpack(f, "<Q")
    if length > _remaining(f):  # a corrupt length would otherwise ask for terabytes
        raise struct.error("string past the end")
    data = f.read(length)
    if len(data) != length:
        raise struct.error("short read")
    return data.decode("utf-8", errors="replace")


def _remaining(f: BinaryIO) -> int:
    here = f.tell()
    end = f.seek(0, 2)
    f.seek(here)
    return end - here


def _value(f: BinaryIO, kind: int) -> Any:
    """One value of type ``kind``; an array is skipped (None), its elements read past."""
    if kind in _SCALARS:
        return _unpack(f, _SCALARS[kind])[0]
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        (item_kind,) = _unpack(f, "<I")
        (count,) = _unpack(f, "<Q")
        if count > _remaining(f):  # every element takes at least one byte
            raise struct.error("array past the end")
        if item_kind in _SCALARS:
            f.seek(struct.calcsize(_SCALARS[item_kind]) * count, 1)
        else:
            for _ in range(count):
                _value(f, item_kind)
        return None
    raise struct.error(f"unknown GGUF value type {kind}")
