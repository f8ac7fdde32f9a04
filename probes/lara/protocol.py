"""The LaRA detection protocol (SPEC §4): compression, clean-reference robust standardisation,
alignment and aggregation, with the clean reference never containing the sample it scores.

1. m̃ = sign(m)·log(1 + |m|).
2. Per (metric, layer): centre = median, scale = 1.4826·MAD (the normalised MAD, by the
   toolkit's one robust standardisation, :mod:`probes.robust`) over a clean reference;
   z = (m̃ − centre) / (scale + ε). A zero MAD is divided by ε as SPEC §4 says (or dropped),
   and reported.
3. ẑ = +z for zRSM, |z| for DC (``dc="signed"``: +z), −z for zRSI; ``outer_abs`` wraps all in |·|.
4. S_LaRA = mean of ẑ over the chosen metrics × layers.

A sample that is also in the reference is scored with a reference that leaves it out
(cross-fitting, :func:`score_against_pool`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from lara_core.files import write_text_atomically
from lara_core.version import __version__

from ..errors import ConfigError, InputError, MismatchError
from ..robust import robust_scale, zero_mad
from .geometry import DEFAULT_EPS, METRIC_NAMES
from .layers import select_layers

logger = logging.getLogger(__name__)

MIN_REFERENCE = 3  # fewer clean samples than this cannot give a median/MAD worth the name
REFERENCE_KIND = "lara-reference"
REFERENCE_SCHEMA = 1
DcMode = Literal["abs", "signed"]
ZeroScaleMode = Literal["eps", "drop"]


def compress(m: np.ndarray) -> np.ndarray:
    """Signed log compression sign(m)·log(1 + |m|) (elementwise, NaN kept)."""
    m = np.asarray(m, dtype=np.float64)
    return np.sign(m) * np.log1p(np.abs(m))


@dataclass(frozen=True)
class ScoreOptions:
    """How clean-reference z-scores become one score (SPEC §4 defaults).

    Attributes:
        metric_set: metric names aggregated (subset of zRSM, DC, zRSI).
        layers: layer selection (``"all"``, ``"early"``, ``"0-8"``, ``"0,5"``, or column indices).
        dc: ``"abs"`` |z| for DC (default) or ``"signed"`` +z (the seed's equation 5).
        outer_abs: wrap every aligned z in |·| (the public code's behaviour; cancels alignment).
        eps: added to the scale.
        zero_scale: cells whose reference scale is ≤ ε: ``"eps"`` divides by ε as SPEC §4 says
            (and reports them); ``"drop"`` leaves them out of the mean.
    """

    metric_set: tuple[str, ...] = METRIC_NAMES
    layers: str | tuple[int, ...] = "all"
    dc: DcMode = "abs"
    outer_abs: bool = False
    eps: float = DEFAULT_EPS
    zero_scale: ZeroScaleMode = "eps"

    def __post_init__(self) -> None:
        object.__setattr__(self, "metric_set", tuple(self.metric_set))  # a list from YAML or a caller
        unknown = [m for m in self.metric_set if m not in METRIC_NAMES]
        if unknown or not self.metric_set:
            raise ConfigError(f"metric set {list(self.metric_set)}: choose from {', '.join(METRIC_NAMES)}")
        if self.dc not in ("abs", "signed"):
            raise ConfigError(f"dc: {self.dc!r}; choose abs or signed")
        if self.zero_scale not in ("eps", "drop"):
            raise ConfigError(f"zero_scale: {self.zero_scale!r}; choose eps or drop")
        if not self.eps > 0:
            raise ConfigError(f"eps must be > 0, got {self.eps}")

    def metric_index(self) -> list[int]:
        return [METRIC_NAMES.index(m) for m in self.metric_set]

    def layer_index(self, layer_labels: Sequence[str], n_blocks: int | None = None) -> list[int]:
        if isinstance(self.layers, str):
            return select_layers(self.layers, layer_labels, n_blocks)
        index = [int(i) for i in self.layers]
        if not index or min(index) < 0 or max(index) >= len(layer_labels):
            raise ConfigError(f"layer columns {index} out of range 0..{len(layer_labels) - 1}")
        return index


@dataclass(frozen=True)
class Reference:
    """A fitted clean reference: centre and scale of m̃ per (metric, layer).

    Attributes:
        center, scale: ``[3, L]`` float64.
        n: clean samples it was fitted on.
        layer_labels: the L layer labels.
        question_hashes: sha256 of the fitted samples' question texts (to refuse scoring them).
        provenance: where it came from.
    """

    center: np.ndarray
    scale: np.ndarray
    n: int
    layer_labels: tuple[str, ...]
    question_hashes: tuple[str, ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(
        cls,
        metrics: np.ndarray,
        layer_labels: Sequence[str] | None = None,
        question_hashes: Sequence[str] = (),
        provenance: dict[str, Any] | None = None,
    ) -> "Reference":
        """Fit on clean samples' raw metrics ``[C, 3, L]``; rows with non-finite values are left out."""
        metrics = _check_metrics(metrics, "reference")
        usable = np.isfinite(metrics).all(axis=(1, 2))
        if usable.sum() < MIN_REFERENCE:
            raise InputError(
                f"the clean reference has {int(usable.sum())} usable sample(s) (of {len(metrics)}); "
                f"at least {MIN_REFERENCE} are needed and 20+ are advisable"
            )
        fitted = robust_scale(compress(metrics[usable]), tol=DEFAULT_EPS)
        center, scale = fitted.center, fitted.mad  # SPEC §4: 1.4826·MAD (+ ε when dividing), no fallback
        labels = tuple(str(x) for x in (layer_labels if layer_labels is not None else range(metrics.shape[2])))
        hashes = tuple(h for h, ok in zip(question_hashes, usable) if ok) if len(question_hashes) else ()
        return cls(
            center=center,
            scale=scale,
            n=int(usable.sum()),
            layer_labels=labels,
            question_hashes=hashes,
            provenance=dict(provenance or {}),
        )

    def zscores(self, metrics: np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
        """Robust z-scores ``[N, 3, L]`` of raw metrics ``[N, 3, L]``."""
        metrics = _check_metrics(metrics, "metrics")
        if metrics.shape[1:] != self.center.shape:
            raise MismatchError(f"metrics are {metrics.shape[1:]} per sample but the reference is {self.center.shape}")
        return (compress(metrics) - self.center) / (self.scale + eps)

    def zero_scale(self, eps: float = DEFAULT_EPS) -> np.ndarray:
        """``[3, L]`` bool: cells whose scale is ≤ ε (MAD = 0: over half the reference shares one value),
        by the toolkit's one zero-scale test (:func:`probes.robust.zero_mad`)."""
        return zero_mad(self.scale, eps)

    def zero_scale_cells(self, eps: float = DEFAULT_EPS) -> list[str]:
        """``"metric@layer"`` names of the zero-scale cells."""
        return [f"{METRIC_NAMES[i]}@{self.layer_labels[j]}" for i, j in zip(*np.nonzero(self.zero_scale(eps)))]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": REFERENCE_KIND,
            "schema_version": REFERENCE_SCHEMA,
            "metric_names": list(METRIC_NAMES),
            "layer_labels": list(self.layer_labels),
            "n": self.n,
            "center": self.center.tolist(),
            "scale": self.scale.tolist(),
            "zero_scale_cells": self.zero_scale_cells(),
            "question_hashes": list(self.question_hashes),
            "provenance": self.provenance,
        }

    def save(self, path: str | Path) -> None:
        """Write as JSON (centres/scales per metric × layer, the fitted samples' hashes, provenance)."""
        write_text_atomically(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Reference":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"no reference file at {path}; save one with `lara score ... --save-reference {path}`")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: not a JSON reference file ({err})") from None
        if not isinstance(data, dict) or data.get("kind") != REFERENCE_KIND:
            raise InputError(f"{path} is not a LaRA reference file (kind {REFERENCE_KIND!r})")
        if data.get("metric_names") != list(METRIC_NAMES):
            raise InputError(f"{path}: metrics {data.get('metric_names')}, expected {list(METRIC_NAMES)}")
        center, scale = np.array(data["center"], dtype=np.float64), np.array(data["scale"], dtype=np.float64)
        if center.shape != (len(METRIC_NAMES), len(data["layer_labels"])) or scale.shape != center.shape:
            raise InputError(f"{path}: centre/scale are not [{len(METRIC_NAMES)}, {len(data['layer_labels'])}]")
        return cls(
            center=center,
            scale=scale,
            n=int(data["n"]),
            layer_labels=tuple(data["layer_labels"]),
            question_hashes=tuple(data.get("question_hashes", ())),
            provenance=data.get("provenance", {}),
        )


def align(z: np.ndarray, dc: DcMode = "abs", outer_abs: bool = False) -> np.ndarray:
    """Aligned deviations ``[N, 3, L]``: +z zRSM, |z| (or +z) DC, −z zRSI; optional outer |·|."""
    out = np.array(z, dtype=np.float64)
    if dc == "abs":
        out[:, 1] = np.abs(out[:, 1])
    out[:, 2] = -out[:, 2]
    return np.abs(out) if outer_abs else out


def aggregate(
    zhat: np.ndarray, metric_index: Sequence[int], layer_index: Sequence[int], drop: np.ndarray | None = None
) -> np.ndarray:
    """Mean of ``zhat`` [N, 3, L] over the chosen cells; ``drop`` [N, 3, L] marks cells to leave out."""
    # each sample's cells as one contiguous row, summed along it: the same additions in the same
    # order whatever else is in the batch, so a score does not depend on its batch mates
    n = len(zhat)
    cells = np.ascontiguousarray(zhat[:, metric_index][:, :, layer_index]).reshape(n, -1)  # [N, m·l]
    keep = (
        np.ones(cells.shape, dtype=bool) if drop is None else ~drop[:, metric_index][:, :, layer_index].reshape(n, -1)
    )
    count = keep.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(keep, cells, 0.0).sum(axis=1) / np.where(count > 0, count, np.nan)


@dataclass(frozen=True)
class PoolScoring:
    """Aligned z-scores of N samples against a clean pool, cross-fitted where they overlap.

    Attributes:
        zhat: ``[N, 3, L]`` aligned deviations.
        zero_scale: ``[N, 3, L]`` cells whose reference scale was ≤ ε for that sample.
        folds: ``[N]`` the pool fold left out of the sample's reference, −1 = the full pool.
        reference: the reference fitted on the whole pool.
        n_folds: folds the pool was split into (0 when no sample overlapped it).
    """

    zhat: np.ndarray
    zero_scale: np.ndarray
    folds: np.ndarray
    reference: Reference
    n_folds: int

    def scores(self, options: ScoreOptions, layer_labels: Sequence[str], n_blocks: int | None = None) -> np.ndarray:
        """S_LaRA ``[N]`` over the metrics and layers of ``options``."""
        drop = self.zero_scale if options.zero_scale == "drop" else None
        return aggregate(self.zhat, options.metric_index(), options.layer_index(layer_labels, n_blocks), drop)


def against_reference(metrics: np.ndarray, reference: Reference, options: ScoreOptions = ScoreOptions()) -> PoolScoring:
    """Aligned z-scores of ``metrics`` [N, 3, L] against one fitted reference (no cross-fitting)."""
    zhat = align(reference.zscores(metrics, options.eps), options.dc, options.outer_abs)
    zero = np.broadcast_to(reference.zero_scale(options.eps), zhat.shape).copy()
    return PoolScoring(zhat=zhat, zero_scale=zero, folds=np.full(len(zhat), -1), reference=reference, n_folds=0)


def fold_assignment(keys: Sequence[str], n_folds: int | None, seed: int = 0) -> dict[str, int]:
    """Fold of each distinct key: keys ordered by sha256(seed:key) and dealt round-robin, so the
    assignment does not depend on the order of the samples. ``n_folds=None``: one fold per key."""
    distinct = sorted(set(keys), key=lambda k: hashlib.sha256(f"{seed}:{k}".encode()).hexdigest())
    folds = len(distinct) if n_folds is None else n_folds
    return {key: i % max(folds, 1) for i, key in enumerate(distinct)}


def score_against_pool(
    metrics: np.ndarray,
    keys: Sequence[str],
    pool: np.ndarray,
    pool_keys: Sequence[str],
    options: ScoreOptions = ScoreOptions(),
    n_folds: int | None = 5,
    seed: int = 0,
    layer_labels: Sequence[str] | None = None,
    provenance: dict[str, Any] | None = None,
) -> PoolScoring:
    """Aligned z-scores of ``metrics`` [N, 3, L] against the clean ``pool`` [C, 3, L].

    A sample whose key (e.g. its question hash) is also a pool key is scored with a reference
    fitted on the pool without that key's fold (k-fold cross-fitting over the pool, SPEC §4.2);
    every other sample uses the whole pool. ``n_folds=None`` leaves out one key at a time.
    """
    metrics = _check_metrics(metrics, "metrics")
    pool = _check_metrics(pool, "reference")
    if len(keys) != len(metrics) or len(pool_keys) != len(pool):
        raise ValueError("one key per sample and per pool row is needed")
    if n_folds is not None and n_folds < 2:
        raise ConfigError(f"cross-fitting needs at least 2 folds, got {n_folds}")
    labels = tuple(str(x) for x in (layer_labels if layer_labels is not None else range(metrics.shape[2])))
    full = Reference.fit(pool, labels, question_hashes=list(pool_keys), provenance=provenance)
    folds = np.full(len(metrics), -1, dtype=np.int64)
    zhat = np.empty_like(metrics)
    zero = np.empty(metrics.shape, dtype=bool)
    pool_set = set(pool_keys)
    overlapping = [k for k in keys if k in pool_set]
    assignment = fold_assignment(pool_keys, n_folds, seed) if overlapping else {}
    pool_fold = np.array([assignment.get(k, -1) for k in pool_keys])
    for i, key in enumerate(keys):
        if key in pool_set:
            folds[i] = assignment[key]
    for fold in np.unique(folds):
        rows = folds == fold
        ref = full if fold < 0 else Reference.fit(pool[pool_fold != fold], labels)
        part = against_reference(metrics[rows], ref, options)
        zhat[rows], zero[rows] = part.zhat, part.zero_scale
    n_used = len(set(assignment.values())) if assignment else 0
    return PoolScoring(zhat=zhat, zero_scale=zero, folds=folds, reference=full, n_folds=n_used)


def score(metrics: np.ndarray, reference: "np.ndarray | Reference", **options: Any) -> np.ndarray:
    """S_LaRA of each sample.

    Args:
        metrics: ``[N, 3, L]`` raw metrics (rows zRSM, DC, zRSI) of the samples to score.
        reference: ``[C, 3, L]`` raw metrics of clean samples, or a fitted :class:`Reference`.
            A sample whose metrics row also appears (bit for bit) in the reference array is
            scored with a reference that leaves that row out.
        **options: fields of :class:`ScoreOptions` (``metric_set``, ``layers``, ``dc``,
            ``outer_abs``, ``eps``, ``zero_scale``).

    Returns:
        ``[N]`` float64, higher = more likely a member.
    """
    opts = ScoreOptions(**options)
    metrics = _check_metrics(metrics, "metrics")
    if isinstance(reference, Reference):
        return against_reference(metrics, reference, opts).scores(opts, reference.layer_labels)
    pool = _check_metrics(reference, "reference")
    keys = [_row_key(row) for row in metrics]
    pool_keys = [_row_key(row) for row in pool]
    scoring = score_against_pool(metrics, keys, pool, pool_keys, opts, n_folds=None)
    return scoring.scores(opts, scoring.reference.layer_labels)


def reference_provenance(**fields: Any) -> dict[str, Any]:
    """Provenance stamp for a saved reference (time and toolkit version added)."""

    return {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "toolkit_version": __version__,
        **fields,
    }


def _row_key(row: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(row, dtype=np.float64).tobytes()).hexdigest()


def _check_metrics(metrics: np.ndarray, name: str) -> np.ndarray:
    metrics = np.asarray(metrics, dtype=np.float64)
    if metrics.ndim != 3 or metrics.shape[1] != len(METRIC_NAMES):
        raise ValueError(
            f"{name} must be [N, {len(METRIC_NAMES)}, L] (rows {', '.join(METRIC_NAMES)}); got shape {metrics.shape}"
        )
    return metrics
