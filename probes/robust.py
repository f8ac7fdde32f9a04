"""One robust standardisation for the whole toolkit (SPEC §6's zero-scale rule).

Centre = median, scale = 1.4826·MAD (the normalised MAD, statsmodels' ``mad``), both over axis 0
of a reference and ignoring non-finite entries. Discrete statistics (CDD's peak, a decision
rule, a calibrated rank) are often identical on over half of a clean reference, so their MAD is
0 and a division by it (or by ε) makes one column dominate everything it is combined with. The
rule, applied wherever a robust z-score is formed:

* MAD > tol: scale = 1.4826·MAD;
* MAD ≤ tol but the values still spread: scale = √(π/2) × mean |x − median| (the mean absolute
  deviation, scaled to estimate σ for normal data) — a **fallback**;
* even that ≤ tol: the column is **constant** on the reference and carries no information; a
  fusion leaves it out.

Fusion (:mod:`probes.fusion`) uses the fallback scale; the LaRA protocol keeps SPEC §4's numbers
(1.4826·MAD + ε) and reports its zero-scale cells through :func:`zero_mad`. Every fallback and
every constant column is recorded by the caller (:class:`ZeroScaleRecord`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

GAUSSIAN_3_4 = 0.6744897501960817  # Φ⁻¹(3/4): 1 / GAUSSIAN_3_4 = 1.4826…, statsmodels' constant
MEAN_AD_FACTOR = math.sqrt(math.pi / 2)  # E|X − μ| = σ·√(2/π) for normal X
DEFAULT_TOL = 1e-8


@dataclass(frozen=True)
class RobustScale:
    """Centre and scale of each column of a reference.

    Attributes:
        center: ``[...]`` median.
        mad: ``[...]`` 1.4826·MAD (NaN where a column has no finite value).
        scale: ``[...]`` ``mad``, or the fallback where ``mad`` ≤ tol; 0 where constant.
        fallback: ``[...]`` bool, the fallback scale is used.
        constant: ``[...]`` bool, the column is constant on the reference (scale 0).
    """

    center: np.ndarray
    mad: np.ndarray
    scale: np.ndarray
    fallback: np.ndarray
    constant: np.ndarray


def zero_mad(mad: np.ndarray, tol: float = DEFAULT_TOL) -> np.ndarray:
    """Bool mask of scales that count as 0 (≤ ``tol``; NaN is not 0)."""
    return np.asarray(mad, dtype=np.float64) <= tol


def robust_scale(values: np.ndarray, tol: float = DEFAULT_TOL) -> RobustScale:
    """Median, normalised MAD and the zero-scale rule over axis 0 of ``values`` ``[C, ...]``,
    ignoring non-finite entries column by column (a column with none gives NaN)."""
    values = np.asarray(values, dtype=np.float64)
    clean = np.where(np.isfinite(values), values, np.nan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column is NaN, silently
        center = np.nanmedian(clean, axis=0)
        deviation = np.abs(clean - center)
        mad = np.nanmedian(deviation / GAUSSIAN_3_4, axis=0)
        mean_ad = MEAN_AD_FACTOR * np.nanmean(deviation, axis=0)
    zero = zero_mad(mad, tol)
    constant = zero & zero_mad(mean_ad, tol)
    fallback = zero & ~constant
    scale = np.where(fallback, mean_ad, np.where(constant, 0.0, mad))
    return RobustScale(
        center=np.asarray(center),
        mad=np.asarray(mad),
        scale=np.asarray(scale),
        fallback=np.asarray(fallback),
        constant=np.asarray(constant),
    )


@dataclass
class ZeroScaleRecord:
    """What the zero-scale rule did to named columns, for metadata and summaries.

    Attributes:
        fallback: column → the fallback scale used (the first reference it was needed on).
        constant: columns constant on their reference (left out of a fusion).
        where: how many references (e.g. cross-fitting folds) needed each entry.
    """

    fallback: dict[str, float] = field(default_factory=dict)
    constant: list[str] = field(default_factory=list)
    where: dict[str, int] = field(default_factory=dict)

    def add(self, names: Sequence[str], fitted: RobustScale) -> None:
        """Record the fallbacks and constant columns of one fitted reference (1-D columns)."""
        for j in np.flatnonzero(np.atleast_1d(fitted.fallback)):
            self.fallback.setdefault(names[j], float(np.atleast_1d(fitted.scale)[j]))
            self.where[names[j]] = self.where.get(names[j], 0) + 1
        for j in np.flatnonzero(np.atleast_1d(fitted.constant)):
            if names[j] not in self.constant:
                self.constant.append(names[j])
            self.where[names[j]] = self.where.get(names[j], 0) + 1

    def __bool__(self) -> bool:
        return bool(self.fallback or self.constant)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": "MAD = 0: scale = sqrt(pi/2) * mean |x - median|; constant columns left out",
            "fallback": dict(self.fallback),
            "constant": list(self.constant),
            "references": dict(self.where),
        }

    def describe(self) -> str:
        """One line for a summary ('' when the rule was not needed)."""
        parts = []
        if self.fallback:
            parts.append(
                "MAD = 0, fallback scale √(π/2)·mean|x − median| for "
                + ", ".join(f"{n} ({s:.3g})" for n, s in self.fallback.items())
            )
        if self.constant:
            parts.append("constant on the reference, left out: " + ", ".join(self.constant))
        return "; ".join(parts)
