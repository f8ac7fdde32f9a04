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
* **magnitude** (:func:`generation.numbers.vary` with ``keep_digits``): an integer keeps its number
  of digits, so "boxes of 7" do not become "boxes of 14".
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, permutations
from typing import Sequence

Relation = tuple[str, int, int, int, int]  # (kind, i, j, k, sign)


def relations(values: Sequence[Fraction | int], arithmetic: bool = True) -> set[Relation]:
    """The relations among ``values`` (distinct quantities in order) that a similar must keep:
    order only, or (``arithmetic``) order, divisibility and sum/product signs."""
    out: set[Relation] = {("lt", i, j, 0, 0) for i, j in permutations(range(len(values)), 2) if values[i] < values[j]}
    if not arithmetic:
        return out
    whole = [getattr(v, "denominator", 1) == 1 for v in values]
    for i, j in permutations(range(len(values)), 2):
        if whole[i] and whole[j] and values[i] > values[j] > 1 and values[i] % values[j] == 0:
            out.add(("div", i, j, 0, 0))
    for i in range(len(values)):
        for j, k in combinations([x for x in range(len(values)) if x != i], 2):
            for kind, combined in (("sum", values[j] + values[k]), ("prod", values[j] * values[k])):
                sign = _sign(values[i] - combined)
                if sign:
                    out.add((kind, i, j, k, sign))
    return out


def kept(required: set[Relation], values: Sequence[Fraction | int]) -> bool:
    """Whether ``values`` satisfy every relation in ``required``."""
    for kind, i, j, k, sign in required:
        if kind == "lt" and not values[i] < values[j]:
            return False
        if kind == "div" and (values[j] <= 1 or values[i] % values[j] != 0):
            return False
        if kind == "sum" and _sign(values[i] - values[j] - values[k]) != sign:
            return False
        if kind == "prod" and _sign(values[i] - values[j] * values[k]) != sign:
            return False
    return True


def _sign(x: Fraction | int) -> int:
    return (x > 0) - (x < 0)
