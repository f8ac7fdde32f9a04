"""The activation store's file format: its layout, and writing, merging and reading HDF5 files of rows.

File layout (schema version 1)::

    /keys          [N]              S64      sha256 hex of each text's UTF-8 bytes, ascending
    /texts         [N]              str      the texts
    /activations   [N, n_layers, d] float32 (or float16)  pooled rows, layers in /attrs layer_labels order
    /n_tokens      [N]              int32    tokens in the formatted prompt (after truncation)
    /n_pooled      [N]              int32    tokens averaged
    /truncated     [N]              bool     whether the prompt was cut to max_length
    attrs: provenance_json (everything about how the rows were made), schema_version,
           layer_labels, and the provenance's top-level scalars for quick inspection.

Every file is written whole under a temporary name, fsynced and renamed into place
(:func:`write_atomic`, :func:`merge`); :mod:`cache.store` builds the crash-safe protocol on that.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import h5py
import numpy as np

from lara_core.files import atomic_path

from .errors import StoreFormatError
from .outputs import check_free_space

SCHEMA_VERSION = 1
KEY_DTYPE = "S64"
DATASETS: tuple[str, ...] = ("keys", "texts", "activations", "n_tokens", "n_pooled", "truncated")
COPY_ROWS = 2048


@dataclass
class RowBlock:
    """Rows ready to be written.

    Attributes:
        keys: text hashes, length n.
        texts: the texts, length n.
        activations: ``[n, n_layers, d]``.
        n_tokens / n_pooled: ``[n]`` int32.
        truncated: ``[n]`` bool.
    """

    keys: list[str]
    texts: list[str]
    activations: np.ndarray
    n_tokens: np.ndarray
    n_pooled: np.ndarray
    truncated: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    @staticmethod
    def concat(blocks: Sequence["RowBlock"]) -> "RowBlock":
        return RowBlock(
            keys=[k for b in blocks for k in b.keys],
            texts=[t for b in blocks for t in b.texts],
            activations=np.concatenate([b.activations for b in blocks]),
            n_tokens=np.concatenate([b.n_tokens for b in blocks]),
            n_pooled=np.concatenate([b.n_pooled for b in blocks]),
            truncated=np.concatenate([b.truncated for b in blocks]),
        )


def read_provenance(f: h5py.File, path: Path) -> dict[str, Any]:
    """Provenance of an open store file, after checking it is a store this version reads."""
    missing = [name for name in DATASETS if name not in f]
    if "provenance_json" not in f.attrs or missing:
        raise StoreFormatError(f"{path} is not a LaRA activation store (missing {missing or ['provenance']})")
    version = int(f.attrs.get("schema_version", -1))
    if version != SCHEMA_VERSION:
        raise StoreFormatError(
            f"{path} has store schema version {version}; this toolkit reads version {SCHEMA_VERSION}. "
            "Use the toolkit version that wrote it, or rebuild the cache."
        )
    return json.loads(as_str(f.attrs["provenance_json"]))


def write_atomic(path: Path, provenance: Mapping[str, Any], rows: RowBlock) -> None:
    """Write key-unique ``rows`` to ``path`` via a temporary file, fsync, rename."""
    with atomic_path(path, durable=True) as tmp, hdf5_on_disk(tmp) as f:
        write_block(create_datasets(f, provenance, len(rows), rows.activations.shape[1:]), 0, rows)


@contextlib.contextmanager
def hdf5_on_disk(path: Path) -> Iterator[h5py.File]:
    """A new HDF5 file written through a Python file object: a full or read-only disk then raises
    a plain ``OSError`` from our own handle and the half-written file is removed. (Written by
    HDF5's own driver, a failed write left handles that crashed the interpreter at exit.)"""
    handle = open(path, "w+b")  # HDF5 reads back what it wrote
    try:
        with h5py.File(handle, "w") as f:
            yield f
        handle.flush()
    except BaseException:
        with contextlib.suppress(OSError):
            handle.close()
        path.unlink(missing_ok=True)
        raise
    handle.close()


def create_datasets(f: h5py.File, provenance: Mapping[str, Any], n: int, row_shape: tuple[int, ...]) -> dict[str, Any]:
    f.attrs["provenance_json"] = json.dumps(provenance, sort_keys=True)
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["layer_labels"] = np.array(provenance["layers"], dtype=h5py.string_dtype())
    for key, value in provenance.items():
        if isinstance(value, (str, int, float, bool)) and key not in f.attrs:
            f.attrs[key] = value
    storage = np.dtype(provenance["storage_dtype"])
    return {
        "keys": f.create_dataset("keys", shape=(n,), dtype=KEY_DTYPE),
        "texts": f.create_dataset("texts", shape=(n,), dtype=h5py.string_dtype()),
        "activations": f.create_dataset("activations", shape=(n, *row_shape), dtype=storage),
        "n_tokens": f.create_dataset("n_tokens", shape=(n,), dtype=np.int32),
        "n_pooled": f.create_dataset("n_pooled", shape=(n,), dtype=np.int32),
        "truncated": f.create_dataset("truncated", shape=(n,), dtype=bool),
    }


def write_block(datasets: Mapping[str, Any], start: int, block: RowBlock) -> None:
    stop = start + len(block)
    datasets["keys"][start:stop] = np.array(block.keys, dtype=KEY_DTYPE)
    datasets["texts"][start:stop] = block.texts
    datasets["activations"][start:stop] = block.activations.astype(datasets["activations"].dtype, copy=False)
    datasets["n_tokens"][start:stop] = block.n_tokens
    datasets["n_pooled"][start:stop] = block.n_pooled
    datasets["truncated"][start:stop] = block.truncated


def merge(sources: Sequence[Path], target: Path, provenance: Mapping[str, Any]) -> int:
    """Write the union of ``sources`` (first occurrence of a key wins) sorted by key to
    ``target``, streaming ``COPY_ROWS`` rows at a time."""

    check_free_space(target.parent, sum(source.stat().st_size for source in sources), "merged activation store")
    handles = [h5py.File(source, "r") for source in sources]
    try:
        index: dict[str, tuple[int, int]] = {}
        for s, f in enumerate(handles):
            for row, key in enumerate(f["keys"][:]):
                index.setdefault(key.decode("ascii"), (s, row))
        ordered = sorted(index)
        with atomic_path(target, durable=True, suffix=f".tmp-{os.getpid()}") as tmp, hdf5_on_disk(tmp) as out:
            datasets = create_datasets(out, provenance, len(ordered), tuple(handles[0]["activations"].shape[1:]))
            for start in range(0, len(ordered), COPY_ROWS):
                chunk = ordered[start : start + COPY_ROWS]
                write_block(datasets, start, gather(handles, [index[k] for k in chunk]))
    finally:
        for handle in handles:
            handle.close()
    return len(ordered)


def gather(handles: Sequence[h5py.File], locations: Sequence[tuple[int, int]]) -> RowBlock:
    """Read rows at ``(source, row)`` locations into one block, in the given order."""
    by_source: dict[int, list[tuple[int, int]]] = {}
    for position, (source, row) in enumerate(locations):
        by_source.setdefault(source, []).append((row, position))
    positions: list[int] = []
    parts: dict[str, list[np.ndarray]] = {name: [] for name in DATASETS}
    for source, pairs in by_source.items():
        pairs.sort()  # h5py reads increasing indices
        positions += [p for _, p in pairs]
        for name in DATASETS:
            parts[name].append(handles[source][name][[r for r, _ in pairs]])
    order = np.argsort(positions)
    cols = {name: np.concatenate(parts[name])[order] for name in DATASETS}
    return RowBlock(
        keys=[as_str(k) for k in cols["keys"]],
        texts=[as_str(t) for t in cols["texts"]],
        activations=cols["activations"],
        n_tokens=cols["n_tokens"].astype(np.int32),
        n_pooled=cols["n_pooled"].astype(np.int32),
        truncated=cols["truncated"].astype(bool),
    )


def as_str(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
