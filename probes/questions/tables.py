"""Open a benchmark as a ``datasets`` table: a hub dataset, a ``save_to_disk`` directory, or a
Parquet / JSON / JSONL / CSV file — always through the ``datasets`` library — with where it came
from (the provenance recorded beside the imported questions)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError

logger = logging.getLogger(__name__)

FILE_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}


@dataclass(frozen=True)
class TableSource:
    """What to open: ``source`` (path or hub name) and, for the hub or a saved DatasetDict, which part."""

    source: str
    config: str | None = None
    split: str | None = None
    revision: str | None = None


def open_table(spec: TableSource) -> tuple[Any, dict[str, Any]]:
    """The ``datasets.Dataset`` of ``spec`` and its provenance (kind, split, revision or fingerprint, sha256 of a file)."""
    path = Path(spec.source).expanduser()
    if path.is_dir():
        return _saved_dataset(path, spec)
    if path.is_file():
        return _data_file(path, spec)
    if path.suffix.lower() in FILE_BUILDERS or spec.source.startswith((".", "/", "~")):
        raise InputError(f"{spec.source}: no such file or directory")
    return _hub_dataset(spec)


def _saved_dataset(path: Path, spec: TableSource) -> tuple[Any, dict[str, Any]]:
    import datasets

    if not (
        (path / "dataset_info.json").is_file()
        or (path / "dataset_dict.json").is_file()
        or (path / "state.json").is_file()
    ):
        raise InputError(
            f"{path} is a directory but not a saved dataset (datasets' save_to_disk writes dataset_info.json "
            "or dataset_dict.json); give a dataset directory or a .parquet/.json/.jsonl/.csv file"
        )
    loaded = datasets.load_from_disk(str(path))
    table, split = _one_split(loaded, spec.split, str(path))
    return table, {
        "kind": "saved dataset",
        "source": str(path.resolve()),
        "split": split,
        "fingerprint": table._fingerprint,
    }


def _data_file(path: Path, spec: TableSource) -> tuple[Any, dict[str, Any]]:
    import datasets

    builder = FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise InputError(
            f"{path}: unknown file type {path.suffix!r}; give .parquet, .json, .jsonl or .csv "
            "(or a datasets save_to_disk directory)"
        )
    try:
        table = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as err:  # the builders raise many kinds (ArrowInvalid, DatasetGenerationError, …)
        raise InputError(
            f"{path}: could not be read as {builder} ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
        ) from err
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return table, {"kind": builder, "source": str(path.resolve()), "sha256": digest}


def _hub_dataset(spec: TableSource) -> tuple[Any, dict[str, Any]]:
    from cache.loading import hub_reachable  # lazy: pulls h5py

    if not hub_reachable():
        raise InputError(
            f"{spec.source!r} is not a local file or directory, and the Hugging Face hub is unreachable from "
            "here; on a machine with access run datasets.load_dataset(...).save_to_disk(DIR) (or .to_parquet) "
            "and import DIR"
        )
    import datasets

    try:
        loaded = datasets.load_dataset(spec.source, spec.config, split=spec.split, revision=spec.revision)
    except Exception as err:  # unknown name, config or split: the hub's own message says which
        raise InputError(
            f"{spec.source}: could not be loaded from the hub ({type(err).__name__}: {str(err).splitlines()[0][:300]})"
        ) from err
    table, split = _one_split(loaded, spec.split, spec.source)
    return table, {
        "kind": "hub",
        "source": spec.source,
        "config": spec.config,
        "split": split,
        "revision": spec.revision,
        "fingerprint": table._fingerprint,
    }


def _one_split(loaded: Any, split: str | None, where: str) -> tuple[Any, str | None]:
    """A Dataset, or the named (or only, or ``test``) split of a DatasetDict."""
    import datasets

    if isinstance(loaded, datasets.Dataset):
        return loaded, split
    names = list(loaded.keys())
    if split is not None:
        if split not in loaded:
            raise InputError(f"{where}: no split {split!r}; it has {', '.join(names)} (--split NAME)")
        return loaded[split], split
    if len(names) == 1 or "test" in loaded:
        chosen = names[0] if len(names) == 1 else "test"
        logger.info("%s: using split %s (of %s)", where, chosen, ", ".join(names))
        return loaded[chosen], chosen
    raise InputError(f"{where} has several splits ({', '.join(names)}); choose one with --split NAME")
