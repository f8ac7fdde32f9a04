"""HDF5 store of per-layer pooled activations, keyed by text hash, crash-safe by construction.

The file layout is in :mod:`cache.store_files`. HDF5 files are not safe against a kill in the
middle of a write, so no file that holds committed rows is ever modified in place. While a run is
going, finished rows go to shard files in ``ACTS.h5.parts/``, each written under a temporary name,
flushed, fsynced and renamed into place: a shard either exists complete or not at all. At the end,
the existing file and the shards are merged into a new temporary file that is renamed over
``ACTS.h5``; only then are the shards removed. A run killed at any point leaves the previous file
intact and every finished shard usable; the next run picks them up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import h5py
import numpy as np

from .errors import CacheError, StoreFormatError, StoreMismatchError
from .fingerprint import text_hash
from .store_files import SCHEMA_VERSION, RowBlock, as_str, merge, read_provenance, write_atomic

__all__ = ["IDENTITY_KEYS", "SCHEMA_VERSION", "ActivationStore", "RowBlock", "StoreWriter", "parts_dir"]

logger = logging.getLogger(__name__)

# Provenance entries that decide the numbers: two files (or a file and a run) may only be mixed
# when all of these agree.
IDENTITY_KEYS: tuple[str, ...] = (
    "schema_version",
    "weights_fingerprint",
    "tokenizer_fingerprint",
    "backend",
    "backend_flags",
    "layers",
    "pooling",
    "prompt",
    "compute_dtype",
    "storage_dtype",
    "d_model",
)


def identity_differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two provenances on the identity keys."""
    diffs = []
    for key in IDENTITY_KEYS:
        a, b = stored.get(key), current.get(key)
        if _canonical(a) != _canonical(b):
            diffs.append(f"  {key}: file has {_short(a)}, this run has {_short(b)}")
    return diffs


def check_compatible(path: Path, stored: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise :class:`StoreMismatchError` naming every identity difference."""
    diffs = identity_differences(stored, current)
    if diffs:
        stored_model = (stored.get("model") or {}).get("source")
        current_model = (current.get("model") or {}).get("source")
        raise StoreMismatchError(
            f"{path} was written with a different setup (file model: {stored_model}; this run: {current_model}):\n"
            + "\n".join(diffs)
            + "\nWrite to a new file, or rerun with the model and settings the file was made with "
            f"(`lara info {path}` shows them)."
        )


class ActivationStore:
    """Read pooled activations back by text.

    >>> store = ActivationStore("acts.h5")
    >>> store.get(["What is 2 + 2?"]).shape   # [n, n_layers, d]
    >>> store["What is 2 + 2?"].shape         # [n_layers, d]: one text
    >>> store[["a", "b"]].shape               # [2, n_layers, d]

    The file is opened for each read and closed after it, so a store object can be handed to
    worker processes; nothing is cached but the key → row index.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise StoreFormatError(f"no activation file at {self.path}; create it with `lara cache`")
        with self._open() as f:
            self.provenance: dict[str, Any] = read_provenance(f, self.path)
            keys = f["keys"][:]
            self.layer_labels: tuple[str, ...] = tuple(as_str(x) for x in f.attrs["layer_labels"])
            self.d_model = int(f["activations"].shape[2])
            self.storage_dtype = str(f["activations"].dtype)
        self._row = {k.decode("ascii"): i for i, k in enumerate(keys)}
        if parts_dir(self.path).is_dir() and any(parts_dir(self.path).glob("part-*.h5")):
            logger.warning(
                "%s has rows from an interrupted run not merged yet (%s); rerun the same `lara cache` command to finish",
                self.path,
                parts_dir(self.path),
            )

    def __len__(self) -> int:
        return len(self._row)

    def __repr__(self) -> str:
        model = self.provenance.get("model", {}).get("source", "?")
        return (
            f"ActivationStore({str(self.path)!r}: {len(self)} texts × {len(self.layer_labels)} layers × d_model {self.d_model}, "
            f"{self.storage_dtype}, model {model!r}, backend {self.provenance.get('backend', '?')!r})"
        )

    def __getitem__(self, texts: str | Sequence[str]) -> np.ndarray:
        """``store[text]`` → ``[n_layers, d]``; ``store[[texts]]`` → ``[n, n_layers, d]`` (float32)."""
        if isinstance(texts, str):
            return self.get(texts)[0]
        return self.get(texts)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text_hash(text) in self._row

    def keys(self) -> list[str]:
        """Text hashes held, in file order (ascending)."""
        return list(self._row)

    def texts(self) -> list[str]:
        """Every text held, in file order."""
        with self._open() as f:
            return [as_str(t) for t in f["texts"][:]]

    def get(
        self, texts: str | Sequence[str], layers: str | int | Sequence[str | int] | None = None, as_torch: bool = False
    ) -> Any:
        """Pooled activations of ``texts``: ``[n, n_layers, d]`` float32 (rows in the given order).

        Args:
            texts: texts to look up (repeats allowed); a plain string is one text (``n`` = 1).
            layers: labels to keep (``"embed"``, block indices — negative ones count from the
                last block, as when caching — ``"final_norm"``); one label or several; all by default.
            as_torch: return a ``torch.Tensor`` instead of a numpy array.

        Raises:
            KeyError: some texts are not in the store (count and first ones named), or a layer is not.
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        data = self.get_by_keys([text_hash(t) for t in texts], layers=layers, texts=texts)
        if as_torch:
            import torch

            return torch.from_numpy(np.ascontiguousarray(data))
        return data

    def get_by_keys(
        self,
        keys: Sequence[str],
        layers: str | int | Sequence[str | int] | None = None,
        texts: Sequence[str] | None = None,
    ) -> np.ndarray:
        """Like :meth:`get`, by text hash."""
        layer_index = self._layer_index(layers)
        data = self._read(("activations",), self._rows_of(keys, texts))["activations"]
        if not len(data):
            return np.zeros((0, len(layer_index), self.d_model), dtype=np.float32)
        if layer_index != list(range(len(self.layer_labels))):
            data = data[:, layer_index, :]
        return data.astype(np.float32, copy=False)

    def metadata(self, texts: str | Sequence[str]) -> dict[str, np.ndarray]:
        """``n_tokens``, ``n_pooled`` and ``truncated`` of ``texts`` (each ``[n]``)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        return self._read(("n_tokens", "n_pooled", "truncated"), self._rows_of([text_hash(t) for t in texts], texts))

    def check_matches(self, current: Mapping[str, Any]) -> None:
        """Refuse (StoreMismatchError) if ``current`` provenance differs on an identity key."""
        check_compatible(self.path, self.provenance, current)

    def _read(self, names: Sequence[str], rows: np.ndarray) -> dict[str, np.ndarray]:
        """Datasets ``names`` at ``rows`` (any order, repeats allowed); h5py wants increasing
        unique indices, so read those and reorder."""
        unique, inverse = np.unique(rows, return_inverse=True)
        in_order = np.array_equal(unique, rows)  # already increasing and unique: no reordering copy
        with self._open() as f:
            return {name: f[name][unique] if in_order else f[name][unique][inverse] for name in names}

    def _rows_of(self, keys: Sequence[str], texts: Sequence[str] | None) -> np.ndarray:
        missing = [i for i, k in enumerate(keys) if k not in self._row]
        if missing:
            shown = [repr(texts[i][:50]) if texts is not None else keys[i] for i in missing[:3]]
            raise KeyError(f"{len(missing)} of {len(keys)} texts are not in {self.path}, e.g. {', '.join(shown)}")
        return np.fromiter((self._row[k] for k in keys), dtype=np.int64, count=len(keys))

    def _layer_index(self, layers: str | int | Sequence[str | int] | None) -> list[int]:
        if layers is None:
            return list(range(len(self.layer_labels)))
        n_blocks = int(self.provenance.get("model", {}).get("n_blocks") or 0)
        index = []
        for layer in [layers] if isinstance(layers, (str, int, np.integer)) else layers:
            label = str(layer).strip().lower()
            if label.lstrip("-").isdigit() and int(label) < 0 and n_blocks:
                label = str(int(label) + n_blocks)  # as caching resolves it: -1 is the last block
            if label not in self.layer_labels:
                raise KeyError(f"layer {label!r} is not stored in {self.path}; stored: {', '.join(self.layer_labels)}")
            index.append(self.layer_labels.index(label))
        return index

    @contextlib.contextmanager
    def _open(self) -> Iterator[h5py.File]:
        try:
            f = h5py.File(self.path, "r")
        except OSError as err:
            raise StoreFormatError(f"{self.path} is not a readable HDF5 file: {err}") from err
        with f:
            yield f


class StoreWriter:
    """Commits rows for one run into ``path`` (see the module docstring for the protocol).

    Args:
        path: the store file.
        provenance: the run's provenance; an existing file or shard must match it.
    """

    def __init__(self, path: str | Path, provenance: Mapping[str, Any], rank: int | None = None) -> None:
        self.path = Path(path)
        self.provenance = dict(provenance)
        self.parts = parts_dir(self.path)
        self.rank = rank  # one writer of a data-parallel job: its own shards (part-N-rR.h5) and lock
        self._buffer: list[RowBlock] = []
        self._lock_files: list[Any] = []

    def __enter__(self) -> "StoreWriter":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if self.rank is None or self.rank == 0:  # the store's lock: one job at a time
                self._lock_files.append(_acquire_lock(self.path))
            if self.rank is not None:
                self._lock_files.append(_acquire_lock(self.path, f".lock.rank{self.rank}"))
            if self.rank is None:
                for stale in self.path.parent.glob(f"{self.path.name}.tmp-*"):
                    stale.unlink()
            if self.parts.is_dir():
                for stale in self.parts.glob("*.tmp" if self.rank is None else f"*-r{self.rank}.h5.tmp"):
                    stale.unlink()
            for source in self._sources():
                with h5py.File(source, "r") as f:
                    check_compatible(source, read_provenance(f, source), self.provenance)
        except BaseException:
            self._release_lock()
            raise
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        try:
            if exc_type is None or not issubclass(exc_type, OSError):  # a full or read-only disk takes no retry
                self.flush()
        finally:
            self._release_lock()

    def _release_lock(self) -> None:
        for handle in self._lock_files:
            with contextlib.suppress(OSError):
                os.unlink(handle.name)
            handle.close()
        self._lock_files = []

    def existing_keys(self) -> set[str]:
        """Keys committed in the file or in finished shards."""
        keys: set[str] = set()
        for source in self._sources():
            with h5py.File(source, "r") as f:
                keys.update(k.decode("ascii") for k in f["keys"][:])
        return keys

    @property
    def buffered(self) -> int:
        return sum(len(b) for b in self._buffer)

    def add(self, rows: RowBlock, flush_every: int) -> None:
        """Buffer rows; commit them as a shard once ``flush_every`` rows are waiting."""
        self._buffer.append(rows)
        if self.buffered >= flush_every:
            self.flush()

    def flush(self) -> None:
        """Commit buffered rows as one shard (atomic)."""
        if not self._buffer:
            return
        rows = RowBlock.concat(self._buffer)
        self.parts.mkdir(exist_ok=True)
        suffix = "" if self.rank is None else f"-r{self.rank}"
        numbers = [int(p.stem.split("-")[1]) for p in self.parts.glob(f"part-*{suffix}.h5")]
        shard = self.parts / f"part-{max(numbers, default=-1) + 1:06d}{suffix}.h5"
        write_atomic(shard, self.provenance, rows)
        self._buffer.clear()
        logger.debug("committed %d rows to %s", len(rows), shard)

    def consolidate(self) -> int:
        """Merge the file and all shards into a new file renamed over ``path``; returns its rows."""
        self.flush()
        shards = self._shards()
        if not shards and self.path.is_file():
            with h5py.File(self.path, "r") as f:
                return int(f["keys"].shape[0])
        sources = ([self.path] if self.path.is_file() else []) + shards
        n_rows = merge(sources, self.path, self.provenance)
        for shard in shards:
            shard.unlink()
        with contextlib.suppress(OSError):
            self.parts.rmdir()
        return n_rows

    def _shards(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.h5")) if self.parts.is_dir() else []

    def _sources(self) -> list[Path]:
        return ([self.path] if self.path.is_file() else []) + self._shards()


def parts_dir(path: Path) -> Path:
    """Directory holding the committed shards of an unfinished run on ``path``."""
    return path.with_name(path.name + ".parts")


def _acquire_lock(path: Path, suffix: str = ".lock") -> Any:
    """Hold an exclusive advisory lock on ``path`` + ``suffix`` so two runs never write one store
    (one lock per rank as well in a data-parallel job)."""
    handle = open(path.with_name(path.name + suffix), "a+")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no locking
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()

        raise CacheError(f"another `lara cache` run is writing {path}; wait for it to finish") from None
    return handle


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _short(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= 80 else text[:77] + "..."
