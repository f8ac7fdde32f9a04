"""One chunk of questions of a metrics computation: its activation rows read from the store in file
order, and zRSM, DC and zRSI computed in work units that stay in a CPU's cache
(:func:`probes.lara.metrics_file.compute_metrics` streams the chunks)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cache.fingerprint import text_hash
from cache.store import ActivationStore

from .geometry import batch_metrics
from .sets import SetLayout

UNIT_BYTES = 8 << 20  # float64 working set of one kernel call


@dataclass(frozen=True)
class ChunkIndex:
    """Where each question's texts sit in a chunk's rows; missing parts point at row 0 (masked)."""

    u: np.ndarray  # [c, K+1]
    w: np.ndarray  # [c, K+1]
    phi: np.ndarray  # [c, K+1, M]
    member_ok: np.ndarray  # [c, K+1]
    paraphrase_ok: np.ndarray  # [c, K+1, M]


def read_chunk(
    part: Sequence[SetLayout], store: ActivationStore, labels: tuple[str, ...], k1: int, m: int
) -> tuple[np.ndarray, ChunkIndex]:
    """The float32 rows ``[n_texts, L, d]`` of one chunk of questions and their index."""
    c = len(part)
    texts = sorted({t for lay in part for t in lay.texts()}, key=text_hash)  # file order: read without reordering
    row = {t: i for i, t in enumerate(texts)}
    index = ChunkIndex(
        u=np.zeros((c, k1), dtype=np.int64),
        w=np.zeros((c, k1), dtype=np.int64),
        phi=np.zeros((c, k1, m), dtype=np.int64),
        member_ok=np.zeros((c, k1), dtype=bool),
        paraphrase_ok=np.zeros((c, k1, m), dtype=bool),
    )
    for q, lay in enumerate(part):
        for i, ok in enumerate(lay.member_ok):
            if not ok:
                continue
            index.member_ok[q, i] = True
            index.u[q, i] = row[lay.u[i]]
            index.w[q, i] = row[lay.w[i]]
            for j, (text, p_ok) in enumerate(zip(lay.phi[i], lay.paraphrase_ok[i])):
                if p_ok:
                    index.paraphrase_ok[q, i, j] = True
                    index.phi[q, i, j] = row[text]
    if not texts:  # no usable question in the chunk: one zero row keeps the shapes valid
        return np.zeros((1, len(labels), store.d_model), dtype=np.float32), index
    return store.get(texts, layers=labels), index


def metrics_of_chunk(
    rows: np.ndarray,
    index: ChunkIndex,
    eps: float,
    pool: ThreadPoolExecutor | None = None,
    unit_bytes: int = UNIT_BYTES,
) -> dict[str, np.ndarray]:
    """Metrics of a chunk, computed in work units of a few questions × a few layers whose float64
    arrays stay in a CPU's cache: the arithmetic then runs from cache instead of streaming the
    chunk through memory a dozen times. Every unit is one call of the vectorised kernel; units
    run on ``pool``'s threads (NumPy releases the GIL in its loops)."""
    c, k1, m = index.phi.shape
    n_layers, d = rows.shape[1], rows.shape[2]
    per_layer = (2 + m) * k1 * d * 8  # float64 bytes of one question at one layer
    layers_per_unit = max(1, min(n_layers, unit_bytes // per_layer))
    questions_per_unit = max(1, unit_bytes // (per_layer * n_layers)) if layers_per_unit == n_layers else 1
    out = {
        "metrics": np.empty((c, 3, n_layers)),
        "S": np.empty((c, k1, n_layers)),
        "R": np.empty((c, k1, n_layers)),
        "n_similars": np.zeros(c, dtype=np.int32),
    }

    def unit(bounds: tuple[int, int]) -> None:
        q, layers = slice(bounds[0], bounds[0] + questions_per_unit), slice(bounds[1], bounds[1] + layers_per_unit)
        u = rows[index.u[q], layers].astype(np.float64)  # [g, K+1, B, d]
        w = rows[index.w[q], layers].astype(np.float64)
        phi = rows[index.phi[q], layers].astype(np.float64)  # [g, K+1, M, B, d]
        result = batch_metrics(u, w, phi, index.member_ok[q], index.paraphrase_ok[q], eps, overwrite=True)
        out["metrics"][q, :, layers] = result.metrics  # units write disjoint slices
        out["S"][q, :, layers] = result.S
        out["R"][q, :, layers] = result.R
        out["n_similars"][q] = result.n_similars

    units = [(q0, l0) for q0 in range(0, c, questions_per_unit) for l0 in range(0, n_layers, layers_per_unit)]
    for _ in pool.map(unit, units) if pool is not None else map(unit, units):
        pass
    return out
