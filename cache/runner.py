"""Cache the pooled activations of a list of texts into an HDF5 store, resumably.

The batch plan is a pure function of the (deduplicated) input texts, and a batch is skipped only
when all its texts are already stored, so a resumed run computes exactly the batches an
uninterrupted run would have: its rows are bit-for-bit the same on a deterministic device.

Launched by torchrun (RANK, WORLD_SIZE set, more than one process), each rank computes its share
of the texts still to do and commits its own shards; rank 0 merges (``cache.distributed``). Only
batch composition differs from one process, so rows agree to float precision.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import h5py
import numpy as np

from .backends import Extractor, create_extractor
from .config import CacheConfig
from .distributed import Ranks, assign
from .fingerprint import FINGERPRINT_METHOD, text_hash
from .layers import LayerSelection
from .loading import LoadedModel, load_model
from .outputs import check_free_space, check_writable
from .pool import as_text_list, check_texts, layer_selection, make_encoder, pooled_batches
from .prompts import PromptEncoder
from .store import SCHEMA_VERSION, RowBlock, StoreWriter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CacheSummary:
    """What a cache run did.

    Attributes:
        output: the store file.
        n_input / n_unique: texts given / distinct texts.
        n_already: distinct texts found in the store (or its shards) before the run.
        n_computed: texts whose rows this run wrote.
        n_truncated: texts cut to ``max_length`` among those computed.
        n_tokens: tokens run through the model (without padding).
        seconds: wall time of the extraction loop.
        n_rows: rows in the store after the run.
        layers / d_model / backend: what the rows hold.
    """

    output: Path
    n_input: int
    n_unique: int
    n_already: int
    n_computed: int
    n_truncated: int
    n_tokens: int
    seconds: float
    n_rows: int
    layers: tuple[str, ...]
    d_model: int
    backend: str

    @property
    def texts_per_s(self) -> float:
        return self.n_computed / self.seconds if self.seconds > 0 else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / self.seconds if self.seconds > 0 else float("nan")

    def describe(self) -> str:
        layers = _describe_layers(self.layers)
        return (
            f"{self.output}: {self.n_rows} rows [{len(self.layers)} layers ({layers}) x d={self.d_model}] via {self.backend}; "
            f"this run: {self.n_input} texts, {self.n_unique} distinct, {self.n_already} already cached, "
            f"{self.n_computed} computed ({self.n_truncated} truncated) in {self.seconds:.1f}s "
            f"({self.texts_per_s:.1f} texts/s, {self.tokens_per_s:.0f} tokens/s)"
        )


def run_cache(
    texts: Iterable[str],
    output: str | Path,
    config: CacheConfig,
    *,
    loaded: LoadedModel | None = None,
    extractor: Extractor | None = None,
    progress: bool = True,
) -> CacheSummary:
    """Pool the activations of ``texts`` into ``output`` (created or appended to).

    Args:
        texts: texts to cache; duplicates are computed once, texts already stored are skipped.
        output: HDF5 store path.
        config: model and extraction settings.
        loaded: an already loaded model (else ``config.model`` is loaded, and handed to the
            backend without a copy).
        extractor: an already built backend on ``loaded`` (else built from the config).
        progress: show a progress bar with texts/s and tokens/s.

    Raises:
        InputError: an empty or unusable text; ConfigError / ModelLoadError / ArchitectureError:
        bad settings or model; StoreMismatchError: ``output`` was written with another setup.
    """
    output = Path(output)
    texts = as_text_list(texts)
    check_texts(texts)
    check_writable(output, "activation store")  # before a model is loaded
    unique = list(dict.fromkeys(texts))
    keys = [text_hash(t) for t in unique]
    ex = config.extraction
    ranks = Ranks.from_env()
    if ranks is not None:  # launched by torchrun / accelerate: this process is one rank of a data-parallel job
        if loaded is None:
            config = dataclasses.replace(config, model=ranks.place(config.model))
        ranks.start_for(config.model)
    own_model = loaded is None
    loaded = loaded or load_model(config.model)
    selection = layer_selection(loaded, ex)
    encoder = make_encoder(loaded, ex)
    _ = loaded.weights_fingerprint  # hashed before any backend wraps (and may modify) the model
    extractor = extractor or create_extractor(ex.backend, loaded, own_model=own_model)
    provenance = build_provenance(loaded, extractor, selection, encoder, config)

    with StoreWriter(output, provenance, rank=ranks.rank if ranks else None) as writer:
        done = writer.existing_keys()
        if ranks is not None:
            ranks.barrier()  # every rank has read the same committed rows before any writes
        n_already = sum(k in done for k in keys)
        todo = [i for i, k in enumerate(keys) if k not in done]
        _check_room(output, len(todo), len(done), len(selection.labels) * loaded.layout.d_model, ex.storage_dtype)
        started = time.perf_counter()
        n_computed = n_truncated = n_tokens = 0
        if todo:
            encoded = encoder.encode(unique)
            work = list(range(len(unique)))
            if ranks is not None:  # this rank's share of what is left, the same split on every rank
                owner = assign([len(encoded[i]) for i in todo], [keys[i] for i in todo], ranks.world_size)
                work = [i for i, r in zip(todo, owner) if r == ranks.rank]
            job = _Job(extractor, selection, loaded, ex)
            n_computed, n_truncated, n_tokens = _extract_rows(work, unique, keys, encoded, done, writer, job, progress)
        seconds = time.perf_counter() - started
        n_rows = _commit(writer, ranks, n_computed, str(loaded.device))
    summary = CacheSummary(
        output=output,
        n_input=len(texts),
        n_unique=len(unique),
        n_already=n_already,
        n_computed=n_computed,
        n_truncated=n_truncated,
        n_tokens=n_tokens,
        seconds=seconds,
        n_rows=n_rows,
        layers=selection.labels,
        d_model=loaded.layout.d_model,
        backend=extractor.name,
    )
    logger.debug("%s", summary.describe())
    return summary


@dataclass(frozen=True)
class _Job:
    """What pools a batch: the backend, the layer selection, the model, the extraction settings."""

    extractor: Extractor
    selection: Any
    loaded: LoadedModel
    ex: Any


def _extract_rows(
    work: list[int],
    unique: list[str],
    keys: list[str],
    encoded: list[Any],
    done: set[str],
    writer: StoreWriter,
    job: _Job,
    progress: bool,
) -> tuple[int, int, int]:
    """Pool the texts ``work`` (indices into ``unique``) not yet ``done`` into ``writer``, batch by
    batch; returns (rows computed, of them truncated, tokens)."""
    extractor, selection, loaded, ex = job.extractor, job.selection, job.loaded, job.ex
    n_computed = n_truncated = n_tokens = 0
    bar = _progress_bar(sum(keys[i] not in done for i in work), progress)
    started = time.perf_counter()
    try:
        for batch, pooled in pooled_batches(work, encoded, keys, extractor, selection, loaded, ex, unique, done):
            items = [encoded[i] for i in batch]
            fresh = [j for j, i in enumerate(batch) if keys[i] not in done]
            writer.add(
                RowBlock(
                    keys=[keys[batch[j]] for j in fresh],
                    texts=[unique[batch[j]] for j in fresh],
                    activations=pooled[fresh],
                    n_tokens=np.array([len(items[j]) for j in fresh], dtype=np.int32),
                    n_pooled=np.array([items[j].n_pooled for j in fresh], dtype=np.int32),
                    truncated=np.array([items[j].truncated for j in fresh], dtype=bool),
                ),
                flush_every=ex.flush_every,
            )
            n_computed += len(fresh)
            n_truncated += sum(items[j].truncated for j in fresh)
            n_tokens += sum(len(items[j]) for j in fresh)
            bar.update(len(fresh))
            bar.set_postfix_str(f"{n_tokens / max(time.perf_counter() - started, 1e-9):.0f} tok/s", refresh=False)
    finally:
        bar.close()
    return n_computed, n_truncated, n_tokens


def _check_room(output: Path, n_new: int, n_stored: int, values_per_row: int, storage_dtype: str) -> None:
    """Refuse before extraction when the disk cannot hold what this run writes: its shards and the
    merged file (old and new rows) side by side."""
    if not n_new:
        return
    row = values_per_row * np.dtype(storage_dtype).itemsize + 512  # + key, text, counts and HDF5 overhead
    check_free_space(output.parent, row * (2 * n_new + n_stored), "activation store")


def _commit(writer: StoreWriter, ranks: Ranks | None, n_computed: int, device: str) -> int:
    """Merge the committed shards into the store (rank 0, once every rank has flushed); its rows."""
    if ranks is None:
        return writer.consolidate()
    writer.flush()
    shares = ranks.gather({"rank": ranks.rank, "rows": n_computed, "device": device})  # also waits for every rank
    if ranks.rank == 0:
        writer.provenance["distributed"] = {
            "world_size": ranks.world_size,
            "rows_per_rank": [s["rows"] for s in shares],
            "devices": [s["device"] for s in shares],
        }
        n_rows = writer.consolidate()
    ranks.barrier()  # the merged file is in place
    if ranks.rank != 0:
        with h5py.File(writer.path, "r") as f:
            n_rows = int(f["keys"].shape[0])
    return n_rows


def build_provenance(
    loaded: LoadedModel,
    extractor: Extractor,
    selection: LayerSelection,
    encoder: PromptEncoder,
    config: CacheConfig,
) -> dict[str, Any]:
    """Everything about how rows are made; :data:`cache.store.IDENTITY_KEYS` must match to mix."""
    prompt = encoder.describe()
    pool_span = prompt.pop("pool_span")
    model = loaded.model
    return {
        "schema_version": SCHEMA_VERSION,
        "toolkit_version": _version("lara-probes"),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": {
            "source": loaded.source.spec,
            "identity": loaded.source.identity(),  # a GGUF file's sha256; an adapter's and its base's (SPEC §9)
            "location": loaded.source.location,
            "is_local": loaded.source.is_local,
            "revision": loaded.source.revision,
            "commit": loaded.commit,
            "class": type(model).__name__,
            "model_type": getattr(model.config, "model_type", None),
            "n_blocks": loaded.layout.n_blocks,
            "blocks_path": loaded.layout.blocks_path,
            "final_norm_path": loaded.layout.final_norm_path,
        },
        "weights_fingerprint": loaded.weights_fingerprint,
        "fingerprint_method": FINGERPRINT_METHOD,
        "tokenizer_fingerprint": loaded.tokenizer_fingerprint,
        "backend": extractor.name,
        "backend_flags": extractor.processing_flags(),
        "layers": list(selection.labels),
        "pooling": {"kind": "mean", "span": pool_span},
        "prompt": prompt,
        "compute_dtype": str(loaded.dtype).removeprefix("torch."),
        "storage_dtype": config.extraction.storage_dtype,
        "d_model": loaded.layout.d_model,
        "device": str(loaded.device),
        "libraries": {
            name: _version(name) for name in ("torch", "transformers", "transformer-lens", "nnsight", "h5py", "numpy")
        },
        "config": config.to_dict(),
    }


def _progress_bar(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="text", disable=not enabled, dynamic_ncols=True, desc="caching")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _describe_layers(labels: tuple[str, ...]) -> str:
    if len(labels) <= 6:
        return ", ".join(labels)
    return f"{labels[0]}, {labels[1]}, …, {labels[-1]}"
