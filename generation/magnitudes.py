"""How far a redrawn quantity moves: as often down as up.

A similar question's quantity takes a new value of comparable magnitude, within half to twice the
old one. Drawn uniformly over that range, a new value is larger than the old two times in three
(the range above the old value is twice as long as the one below), so a similar's answer ran larger
than the original's: on GSM8K's first 300 questions its median was 1.66 times the original's, and 70 %
of the re-solved answers were larger — controls systematically harder than the questions they
calibrate. Here a new value lies below the old one or above it with probability 1/2 each (the only
side there is when the other is empty: 1 can only grow), log-uniformly within its side, so the
ratio new/old has median 1 (docs/generation.md, "Similar questions").
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Sequence


def draw_near(center: int | Fraction, lo: int, hi: int, rng: random.Random) -> int:
    """An integer of ``[lo, hi]`` other than ``center`` (``1 <= lo``): below ``center`` or above it
    with probability 1/2 each where both sides hold one, log-uniform within the side
    (P(v) ∝ log((v + ½)/(v − ½)) ≈ 1/v)."""
    below = (lo, min(hi, math.ceil(center) - 1))
    above = (max(lo, math.floor(center) + 1), hi)
    sides = [s for s in (below, above) if s[0] <= s[1]]
    if not sides:
        raise ValueError(f"no integer of [{lo}, {hi}] other than {center}")
    a, b = sides[0] if len(sides) == 1 or rng.random() < 0.5 else sides[1]
    x = math.exp(rng.uniform(math.log(a - 0.5), math.log(b + 0.5)))
    return min(b, max(a, math.floor(x + 0.5)))


def balanced_weights(values: Sequence[int | Fraction], center: int | Fraction) -> list[float]:
    """``values``' weights (none equal to ``center``, all > 0): half the mass on those below
    ``center`` and half on those above (all of it on the one side there is), ∝ 1/v within a side."""
    if any(v == center or v <= 0 for v in values):
        raise ValueError(f"values to weigh around {center} must be positive and other than it")
    below = sum(1 / v for v in values if v < center)
    above = sum(1 / v for v in values if v > center)
    share = 0.5 if below and above else 1.0
    return [share / v / (below if v < center else above) for v in values]


def weighted_order(items: Sequence[str], weights: Sequence[float], k: int, rng: random.Random) -> list[str]:
    """``k`` of ``items`` drawn without replacement with probabilities ∝ ``weights``, the first drawn
    first (each item's key log(u)/w, u uniform on (0, 1], largest first: Efraimidis and Spirakis,
    2006). It takes one uniform an item whatever ``k``, so a larger ``k`` extends the same order."""
    keys = [math.log(1.0 - rng.random()) / w for w in weights]
    order = sorted(range(len(items)), key=lambda i: -keys[i])
    return [items[i] for i in order[:k]]


def round_values(n: int, zeros: int) -> tuple[int, ...]:
    """The values a round number ``n = d·10^zeros`` (one significant digit, ``n >= 30``) may become: the
    numbers of one significant digit within half to twice it (40 → 20, 30, 50, …, 80), and for a power
    of ten those of two above it (100 → 50, …, 90, 110, 120, …, 200): a round number stays round, and
    one that keeps its digits still has values to take."""
    grid = {d * 10**k for d in range(1, 10) for k in (zeros - 1, zeros, zeros + 1) if k >= 0}
    if n == 10**zeros:
        grid |= {n + d * 10 ** (zeros - 1) for d in range(1, 11)}
    return tuple(sorted(v for v in grid if n / 2 <= v <= 2 * n and v != n))
