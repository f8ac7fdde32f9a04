"""From perturbation sets and their cached activations to a LaRA metrics file (HDF5).

Questions are streamed in chunks sized by a memory budget, so a 7B-shaped audit (≈ 17 MB of
float32 activations per question) never holds the activation file in memory.

File layout (schema version 1)::

    /ids              [N]          str      question ids, in the sets file's order
    /question_hashes  [N]          S64      sha256 of each original question's text
    /labels           [N]          int8     1 member, 0 non-member, -1 unknown
    /splits           [N]          str      the questions' ``split`` ('' when none)
    /metrics          [N, 3, L]    float64  rows zRSM, DC, zRSI (NaN when unscorable)
    /S                [N, K+1, L]  float64  blanking shifts S_i (NaN for members not used)
    /R                [N, K+1, L]  float64  paraphrase spreads R_i (NaN for members not used)
    /n_similars       [N]          int32    similar questions used
    /reasons          [N]          str      why a question is NaN ('' when scored)
    attrs: kind = "lara-metrics", schema_version, layer_labels, metric_names, provenance_json
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np

from cache.fingerprint import text_hash
from cache.store import IDENTITY_KEYS, ActivationStore
from generation.records import read_sets
from lara_core.files import atomic_path, file_sha256
from lara_core.version import __version__

from ..errors import InputError, MismatchError
from .geometry import DEFAULT_EPS, METRIC_NAMES
from .metrics_chunks import metrics_of_chunk, read_chunk
from .sets import SetLayout, layout

logger = logging.getLogger(__name__)

KIND = "lara-metrics"
SCHEMA_VERSION = 1
DEFAULT_CHUNK_MIB = 32  # float32 rows read per chunk


@dataclass
class MetricsFile:
    """A metrics file held in memory (it is small: N × 3 × L numbers plus the raw S and R).

    Attributes:
        ids: ``[N]`` question ids.
        question_hashes: ``[N]`` sha256 of the original question texts (sample identity across files).
        labels: ``[N]`` int8, 1 / 0 / -1 (unknown).
        splits: ``[N]`` strings.
        metrics: ``[N, 3, L]`` float64.
        S, R: ``[N, K+1, L]`` float64.
        n_similars: ``[N]`` int.
        reasons: ``[N]`` strings.
        layer_labels: L labels (block indices as strings, ``embed``, ``final_norm``).
        provenance: how the file was made.
    """

    ids: list[str]
    question_hashes: list[str]
    labels: np.ndarray
    splits: list[str]
    metrics: np.ndarray
    S: np.ndarray
    R: np.ndarray
    n_similars: np.ndarray
    reasons: list[str]
    layer_labels: tuple[str, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_blocks(self) -> int | None:
        """Decoder blocks of the model the activations came from (for layer windows)."""
        return (self.provenance.get("activations") or {}).get("n_blocks")

    @property
    def weights_fingerprint(self) -> str | None:
        return (self.provenance.get("activations") or {}).get("weights_fingerprint")

    @classmethod
    def read(cls, path: str | Path) -> "MetricsFile":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"no metrics file at {path}; make it with `lara metrics SETS.jsonl ACTS.h5 -o {path}`")
        try:
            f = h5py.File(path, "r")
        except OSError as err:
            raise InputError(f"{path} is not a readable HDF5 file ({err})") from None
        with f:
            if f.attrs.get("kind") != KIND:
                raise InputError(f"{path} is not a LaRA metrics file (made by `lara metrics`)")
            if int(f.attrs["schema_version"]) != SCHEMA_VERSION:
                raise InputError(
                    f"{path} has metrics schema {f.attrs['schema_version']}; this toolkit reads {SCHEMA_VERSION}"
                )
            return cls(
                ids=_strings(f["ids"][:]),
                question_hashes=_strings(f["question_hashes"][:]),
                labels=f["labels"][:],
                splits=_strings(f["splits"][:]),
                metrics=f["metrics"][:],
                S=f["S"][:],
                R=f["R"][:],
                n_similars=f["n_similars"][:],
                reasons=_strings(f["reasons"][:]),
                layer_labels=tuple(_strings(f.attrs["layer_labels"])),
                provenance=json.loads(f.attrs["provenance_json"]),
                path=path,
            )


@dataclass(frozen=True)
class MetricsSummary:
    output: Path
    n_questions: int
    n_scored: int
    reasons: dict[str, int]
    n_layers: int
    n_texts: int
    seconds: float

    def describe(self) -> str:
        lines = [
            f"{self.n_questions} questions: {self.n_scored} with metrics at {self.n_layers} layers, "
            f"{self.n_questions - self.n_scored} NaN ({self.n_texts} texts read in {self.seconds:.1f} s) -> {self.output}"
        ]
        if self.reasons:
            lines.append("NaN by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(self.reasons.items())))
        return "\n".join(lines)


def compute_metrics(
    sets_path: str | Path,
    acts_path: str | Path,
    output: str | Path,
    layers: Sequence[str | int] | None = None,
    eps: float = DEFAULT_EPS,
    min_paraphrases: int = 2,
    chunk_mib: float = DEFAULT_CHUNK_MIB,
    progress: bool = False,
    workers: int | None = None,
) -> MetricsSummary:
    """Compute zRSM, DC and zRSI of every set of ``sets_path`` from ``acts_path`` into ``output``.

    Args:
        sets_path: perturbation sets (``lara generate`` output).
        acts_path: activation store holding every text of the sets (``lara cache``).
        output: metrics file to write (replaced atomically).
        layers: stored layer labels to use (default: every stored layer).
        eps: numerical floor of the metrics.
        min_paraphrases: paraphrases a member needs to be used.
        chunk_mib: float32 activations read per chunk of questions, in MiB (peak memory is a
            small multiple of it).
        progress: show a progress bar.
        workers: threads computing (default: up to 4, one per CPU core).
    """
    start = time.perf_counter()
    sets_path, output = Path(sets_path), Path(output)
    records = read_sets(sets_path)
    layouts = [layout(r, min_paraphrases) for r in records]
    store = ActivationStore(acts_path)
    labels = _layer_labels(store, layers)
    _check_cached(layouts, store, sets_path)

    k1 = max(lay.k for lay in layouts) + 1
    m = max(lay.m for lay in layouts)
    n_layers, d = len(labels), store.d_model
    row_bytes = n_layers * d * 4
    chunk = max(1, int(chunk_mib * 2**20 // ((2 + m) * k1 * row_bytes)))
    provenance = _provenance(records, sets_path, store, labels, eps, min_paraphrases, k1 - 1, m)
    logger.info("%d questions, %d layers, d=%d: up to %d question(s) read per chunk", len(layouts), n_layers, d, chunk)

    n_texts = 0
    non_finite: list[int] = []  # questions with a reason-less NaN/inf metric, counted from the values themselves
    workers = workers or min(4, os.cpu_count() or 1)
    with (
        atomic_path(output) as tmp,
        h5py.File(tmp, "w") as f,
        ThreadPoolExecutor(workers) if workers > 1 else contextlib.nullcontext() as pool,
    ):
        ds = _create(f, records, layouts, labels, provenance, k1)
        bar = _bar(len(layouts), progress)
        for lo in range(0, len(layouts), chunk):
            part = layouts[lo : lo + chunk]
            rows, index = read_chunk(part, store, labels, k1, m)
            n_texts += len(rows)
            result = metrics_of_chunk(rows, index, eps, pool)
            hi = lo + len(part)
            for name in ("metrics", "S", "R", "n_similars"):
                ds[name][lo:hi] = result[name]
            for k in np.flatnonzero(~np.isfinite(result["metrics"]).all(axis=(1, 2))):
                if not part[k].reason:
                    non_finite.append(lo + int(k))
                    f["reasons"][lo + int(k)] = "non_finite_values: a metric is NaN or inf"
            del rows, result
            if bar is not None:
                bar.update(len(part))
        if bar is not None:
            bar.close()
    return MetricsSummary(
        output=output,
        n_questions=len(layouts),
        n_scored=sum(not lay.reason for lay in layouts) - len(non_finite),
        reasons=_left_out_reasons(layouts, len(non_finite)),
        n_layers=n_layers,
        n_texts=n_texts,
        seconds=time.perf_counter() - start,
    )


def _left_out_reasons(layouts: Sequence[SetLayout], n_non_finite: int) -> dict[str, int]:
    """Questions left out, counted by reason (a reason's text up to its colon), the ones whose
    metrics came out NaN or inf among them."""
    reasons: dict[str, int] = {"non_finite_values": n_non_finite} if n_non_finite else {}
    for lay in layouts:
        if lay.reason:
            key = lay.reason.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
    return reasons


def _layer_labels(store: ActivationStore, layers: Sequence[str | int] | None) -> tuple[str, ...]:
    """The stored layer labels to use (all by default), checked against the store."""
    if layers is None:
        return store.layer_labels
    missing = [str(x) for x in layers if str(x) not in store.layer_labels]
    if missing:
        raise InputError(f"layer {missing[0]!r} is not in {store.path}; stored layers: {', '.join(store.layer_labels)}")
    return tuple(str(x) for x in layers)


def _check_cached(layouts: Sequence[SetLayout], store: ActivationStore, sets_path: Path) -> None:
    needed = {t for lay in layouts for t in lay.texts()}
    missing = [t for t in needed if t not in store]
    if missing:
        shown = ", ".join(repr(t[:60]) for t in sorted(missing)[:3])
        raise InputError(
            f"{len(missing)} of {len(needed)} texts of {sets_path} are not in {store.path} (e.g. {shown}); "
            f"cache them first: `lara cache {sets_path} --model MODEL -o {store.path}` (it skips texts already stored)"
        )


def _create(
    f: h5py.File, records, layouts: Sequence[SetLayout], labels: tuple[str, ...], provenance: dict, k1: int
) -> dict:
    n, n_layers = len(layouts), len(labels)
    string = h5py.string_dtype()
    f.attrs["kind"] = KIND
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["layer_labels"] = np.array(labels, dtype=string)
    f.attrs["metric_names"] = np.array(METRIC_NAMES, dtype=string)
    f.attrs["provenance_json"] = json.dumps(provenance, sort_keys=True)
    f.create_dataset("ids", data=np.array([lay.id for lay in layouts], dtype=string))
    f.create_dataset("question_hashes", data=np.array([text_hash(r.question.question) for r in records], dtype="S64"))
    f.create_dataset(
        "labels", data=np.array([-1 if r.question.label is None else r.question.label for r in records], dtype=np.int8)
    )
    f.create_dataset("splits", data=np.array([r.question.split or "" for r in records], dtype=string))
    f.create_dataset("reasons", data=np.array([lay.reason for lay in layouts], dtype=string))
    return {
        "metrics": f.create_dataset("metrics", shape=(n, len(METRIC_NAMES), n_layers), dtype=np.float64),
        "S": f.create_dataset("S", shape=(n, k1, n_layers), dtype=np.float64),
        "R": f.create_dataset("R", shape=(n, k1, n_layers), dtype=np.float64),
        "n_similars": f.create_dataset("n_similars", shape=(n,), dtype=np.int32),
    }


def _provenance(
    records,
    sets_path: Path,
    store: ActivationStore,
    labels: tuple[str, ...],
    eps: float,
    min_paraphrases: int,
    k: int,
    m: int,
) -> dict[str, Any]:
    p = store.provenance
    model = p.get("model") or {}
    generation = dict(records[0].provenance)
    return {
        "kind": KIND,
        "toolkit_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "eps": eps,
        "min_paraphrases": min_paraphrases,
        "K": k,
        "M": m,
        "metric_names": list(METRIC_NAMES),
        "activations": {
            "path": str(store.path.resolve()),
            "rows": len(store),
            "model_source": model.get("source"),
            "n_blocks": model.get("n_blocks"),
            "layers_used": list(labels),
            **{key: p.get(key) for key in IDENTITY_KEYS},
        },
        "sets": {
            "path": str(sets_path.resolve()),
            "sha256": file_sha256(sets_path),
            "n_sets": len(records),
            "generation": generation,
        },
    }


def check_same_model(a: MetricsFile, b: MetricsFile) -> None:
    """Refuse two metrics files made from different model weights or layers."""
    if a.weights_fingerprint != b.weights_fingerprint:
        raise MismatchError(
            f"{a.path} and {b.path} come from different model weights "
            f"({str(a.weights_fingerprint)[:12]}… vs {str(b.weights_fingerprint)[:12]}…); "
            "a clean reference must be measured on the audited model"
        )
    if a.layer_labels != b.layer_labels:
        raise MismatchError(
            f"{a.path} and {b.path} hold different layers ({', '.join(a.layer_labels)} vs {', '.join(b.layer_labels)})"
        )


def _strings(values: Any) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def _bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="question", desc="metrics")
