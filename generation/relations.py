"""Arithmetic relations between a question's quantities, which its similar questions keep.

A word problem's numbers are rarely free: "gives away 5 of 3 boxes of 7" needs 3·7 ≥ 5, "shares
24 candies among 6 friends" needs 6 to divide 24, "cuts 4 m and then 9 m off a 30 m rope" needs
30 ≥ 4 + 9. A similar question whose numbers break such a relation has a negative or fractional
answer, which no real question of its kind has — so a model can tell the similars from the
originals without having trained on either, and a test that compares them is no longer calibrated
(SPEC §8.6). The offline generator therefore keeps, over the distinct quantities of a question:

* **order**: q_i < q_j stays q_i < q_j;
* **divisibility** (integers): q_j > 1 dividing q_i stays dividing it;
* **sums and products against a third** (any three distinct quantities): the sign of
  q_i − (q_j + q_k) and of q_i − q_j·q_k stays the same (equalities are not required);
* **divisibility of a sum or difference** (integers): q_k > 1 dividing q_i − q_j (> 0) or q_i + q_j
  stays dividing it — "a 1900-calorie target, 700 eaten, 400 a serving" needs 400 | 1900 − 700;
* **sums of three against a fourth**: the sign of q_i − (q_j + q_k + q_l) — "73 blocks, 49
  animals and 26 rings, 191 toys in all: how many balls?" needs 73 + 49 + 26 < 191;
* **shares** (decimals, fractions and percentages, read as the share p/100): the denominator of
  the share divides the original's — "0.5 as many" stays a half, a whole or one and a half, "20 %
  of" stays a fifth — and a share below one stays below one, so half of 20 stays a whole number;
* **percentage mark-ups** (with percentages): the sign of q_i − q_j·(1 + p/100 [+ p'/100]) and of
  q_i − q_j·p/100 — "a $440,000 budget, a $380,000 price plus 8 % and 13 % in fees" needs
  380,000 · 1.21 > 440,000 to stay;
* (up to :data:`MAX_ARITHMETIC` distinct quantities: a table of 36 numbers keeps order, divisibility
  and shares only — its triples alone would be 235,000 relations to check at every draw)
* **magnitude** (:func:`generation.numbers.vary` with ``keep_digits``): an integer keeps its number
  of digits, so "boxes of 7" do not become "boxes of 14".
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, permutations
from typing import Iterable, Sequence

MAX_ARITHMETIC = 12  # beyond this many distinct quantities, relations among three or four are not kept

Relation = tuple[str, int, tuple[int, ...], int]  # (kind, i, others, sign): q_i against the others


def relations(
    values: Sequence[Fraction | int], arithmetic: bool = True, percent: Sequence[bool] | None = None
) -> set[Relation]:
    """The relations among ``values`` (distinct quantities in order; ``percent[i]``: q_i is a
    percentage, read as the share q_i/100) that a similar must keep: order only, or
    (``arithmetic``) every relation of the module docstring."""
    n = len(values)
    out: set[Relation] = {("lt", i, (j,), 0) for i, j in permutations(range(n), 2) if values[i] < values[j]}
    if not arithmetic:
        return out
    whole = [getattr(v, "denominator", 1) == 1 for v in values]
    for i, j in permutations(range(n), 2):
        if whole[i] and whole[j] and values[i] > values[j] > 1 and values[i] % values[j] == 0:
            out.add(("div", i, (j,), 0))
    if n > MAX_ARITHMETIC:  # a table of numbers: relations among three or four of them would be most of the time
        return out | _share_relations(values, percent or [False] * n)
    for i, j in permutations(range(n), 2):
        for k in range(n):
            if k in (i, j) or not (whole[i] and whole[j] and whole[k]) or values[k] <= 1:
                continue
            if values[i] > values[j] and (values[i] - values[j]) % values[k] == 0:
                out.add(("divdiff", k, (i, j), 0))
            if i < j and (values[i] + values[j]) % values[k] == 0:
                out.add(("divsum", k, (i, j), 0))
    for i in range(n):
        others = [x for x in range(n) if x != i]
        for j, k in combinations(others, 2):
            for kind, combined in (("sum", values[j] + values[k]), ("prod", values[j] * values[k])):
                sign = _sign(values[i] - combined)
                if sign:
                    out.add((kind, i, (j, k), sign))
        for trio in combinations(others, 3):
            sign = _sign(values[i] - sum(values[x] for x in trio))
            if sign:
                out.add(("sum", i, trio, sign))
    return out | _share_relations(values, percent or [False] * n)


def _share_relations(values: Sequence[Fraction | int], percent: Sequence[bool]) -> set[Relation]:
    """The share and mark-up relations (see the module docstring); ``("den", i, (), d)``: the share
    of q_i has a denominator dividing d; ``("below1", i, (), 0)``: the share of q_i stays below 1."""
    out: set[Relation] = set()
    shares = [_share(v, p) for v, p in zip(values, percent)]
    for i, (value, share) in enumerate(zip(values, shares)):
        if percent[i] or getattr(value, "denominator", 1) != 1:
            if share.denominator > 1:
                out.add(("den", i, (), share.denominator))
            if share < 1:
                out.add(("below1", i, (), 0))
    rates = [i for i in range(len(values)) if percent[i]]
    groups = [(r,) for r in rates] + list(combinations(rates, 2))
    plain = [i for i in range(len(values)) if not percent[i]]
    for i, j in permutations(plain, 2):
        for group in groups:
            rate = sum(shares[r] for r in group)
            for kind, factor in (("markup", 1 + rate), ("part", rate)):
                sign = _sign(values[i] - values[j] * factor)
                if sign and (kind == "markup" or len(group) == 1):
                    out.add((kind, i, (j, *group), sign))
    return out


def _share(value: Fraction | int, is_percent: bool) -> Fraction:
    return Fraction(value) / 100 if is_percent else Fraction(value)


def kept(required: Iterable[Relation], values: Sequence[Fraction | int], percent: Sequence[bool] | None = None) -> bool:
    """Whether ``values`` (``percent`` as in :func:`relations`) satisfy every relation in ``required``."""
    for kind, i, others, sign in required:
        if kind in ("den", "below1", "markup", "part"):
            if not _share_kept(kind, i, others, sign, values, percent or [False] * len(values)):
                return False
            continue
        if kind == "lt" and not values[i] < values[others[0]]:
            return False
        if kind == "div" and (values[others[0]] <= 1 or values[i] % values[others[0]] != 0):
            return False
        if kind in ("divdiff", "divsum"):
            a, b = values[others[0]], values[others[1]]
            combined = a - b if kind == "divdiff" else a + b
            if values[i] <= 1 or combined <= 0 or combined % values[i] != 0:
                return False
        if kind == "sum" and _sign(values[i] - sum(values[x] for x in others)) != sign:
            return False
        if kind == "prod" and _sign(values[i] - values[others[0]] * values[others[1]]) != sign:
            return False
    return True


def _share_kept(
    kind: str, i: int, others: tuple[int, ...], sign: int, values: Sequence[Fraction | int], percent: Sequence[bool]
) -> bool:
    if kind == "den":
        return sign % _share(values[i], percent[i]).denominator == 0
    if kind == "below1":
        return _share(values[i], percent[i]) < 1
    rate = sum(_share(values[r], True) for r in others[1:])
    factor = 1 + rate if kind == "markup" else rate
    return _sign(values[i] - values[others[0]] * factor) == sign


def _sign(x: Fraction | int) -> int:
    return (x > 0) - (x < 0)
