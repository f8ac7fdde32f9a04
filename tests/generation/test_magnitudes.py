"""A redrawn quantity moves as often down as up (generation/magnitudes.py), checked against
probabilities computed here by hand and by simulation within binomial error."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction

import pytest

from generation.magnitudes import balanced_weights, draw_near, round_values, weighted_order
from generation.numbers import find_slots, int_support, vary
from generation.value_draws import DrawPlan, _options, draw_values


def test_a_new_value_is_below_the_old_as_often_as_above():
    """Uniform on [n/2, 2n] put a new value above n two times in three (the upper side is twice
    as long); each side now has half the mass. 20,000 draws: ±2 s.e. is ±0.007."""
    rng = random.Random(0)
    for n in (7, 40, 120, 5000):
        draws = [draw_near(n, max(1, n // 2), max(2 * n, n + 4), rng) for _ in range(20_000)]
        assert n not in draws
        assert abs(sum(d > n for d in draws) / len(draws) - 0.5) < 0.01, n


def test_within_a_side_the_draw_is_log_uniform():
    """P(v) = log((v + ½)/(v − ½)) / log((b + ½)/(a − ½)) on the side [a, b]: on [11, 20] above 10."""
    rng = random.Random(1)
    draws = Counter(draw_near(10, 5, 20, rng) for _ in range(40_000))
    above = sum(c for v, c in draws.items() if v > 10)
    for v in range(11, 21):
        expected = math.log((v + 0.5) / (v - 0.5)) / math.log(20.5 / 10.5)
        assert draws[v] / above == pytest.approx(expected, abs=0.01), v


def test_one_side_only_where_the_other_is_empty():
    rng = random.Random(2)
    assert {draw_near(1, 1, 5, rng) for _ in range(500)} == {2, 3, 4, 5}
    with pytest.raises(ValueError, match="no integer"):
        draw_near(3, 3, 3, rng)


def test_a_center_between_integers():
    """A share's value in steps need not be whole (0.3 in steps of 1/5 is 1.5), nor a center inside the range."""
    rng = random.Random(3)
    draws = [draw_near(Fraction(3, 2), 1, 3, rng) for _ in range(4000)]
    assert set(draws) == {1, 2, 3} and abs(draws.count(1) / 4000 - 0.5) < 0.03
    assert {draw_near(10, 1, 5, rng) for _ in range(200)} == {1, 2, 3, 4, 5}  # all below: the range holds


def test_balanced_weights_by_hand():
    # below 2: {1}, half the mass; above: 3, 4, 5 ∝ 1/v, 1/3 + 1/4 + 1/5 = 47/60
    weights = balanced_weights([1, 3, 4, 5], 2)
    assert weights == pytest.approx([0.5, 0.5 * (1 / 3) * 60 / 47, 0.5 * (1 / 4) * 60 / 47, 0.5 * (1 / 5) * 60 / 47])
    assert balanced_weights([2, 4], 1) == pytest.approx([2 / 3, 1 / 3])  # one side holds it all


def test_weighted_order_draws_its_first_item_by_the_weights():
    rng = random.Random(4)
    firsts = Counter(weighted_order(["a", "b", "c"], [0.5, 0.3, 0.2], 2, rng)[0] for _ in range(20_000))
    for item, weight in zip("abc", (0.5, 0.3, 0.2)):
        assert firsts[item] / 20_000 == pytest.approx(weight, abs=0.012)
    assert len(set(weighted_order(["a", "b", "c"], [0.5, 0.3, 0.2], 3, rng))) == 3


def test_round_numbers_stay_round_and_move_both_ways():
    assert list(round_values(40, 1)) == [20, 30, 50, 60, 70, 80]
    assert list(round_values(100, 2)) == [50, 60, 70, 80, 90, *range(110, 201, 10)]  # 1..9 hundreds were all above
    assert list(round_values(3000, 3)) == [2000, 4000, 5000, 6000]
    rng = random.Random(5)
    slot = find_slots("She paid 100 dollars.")[0]
    drawn = [int(vary(slot, rng)) for _ in range(4000)]
    assert set(drawn) <= set(round_values(100, 2))
    assert abs(sum(d < 100 for d in drawn) / 4000 - 0.5) < 0.03


def test_vary_moves_integers_decimals_and_shares_both_ways():
    """Through :func:`vary` and the search's pools: each kind below its old value about half the time."""
    rng = random.Random(6)
    for text, old in [("He ran 37 miles.", 37), ("It weighs 2.5 kg.", Fraction(5, 2)), ("He ran 9 miles.", 9)]:
        slot = find_slots(text)[0]
        values = [Fraction(vary(slot, rng)) for _ in range(6000)]
        assert abs(sum(v < old for v in values) / 6000 - 0.5) < 0.03, text
    plan = DrawPlan.of(find_slots("He ran 37 miles."), arithmetic=True)
    assert int_support(plan.quantities[0]) is not None  # the search tries enumerated values, weighted
    firsts = [int(_options(plan, 0, rng, False, None, 5)[0]) for _ in range(6000)]
    assert abs(sum(v < 37 for v in firsts) / 6000 - 0.5) < 0.03


def test_the_search_tries_values_below_as_often_as_above():
    """The search (draw_values with no joint draw) takes each quantity's first weighted value first:
    taken from the wrong end of the order, 95 % of its first tries for 250 were above it."""
    plan = DrawPlan.of(find_slots("He ran 250 miles."), arithmetic=True)
    rng = random.Random(7)
    drawn = [int(draw_values(plan, rng, joint=0)[0][0]) for _ in range(3000)]
    assert abs(sum(v < 250 for v in drawn) / 3000 - 0.5) < 0.04


def test_a_percentage_stays_under_100_without_piling_on_99():
    """Capped after the draw, the upper half of 75 % fell on 99; the cap now bounds the range, and
    vary's draws and the search's weights agree."""
    slot = find_slots("a 75% discount")[0]
    rng = random.Random(8)
    drawn = Counter(int(vary(slot, rng)) for _ in range(8000))
    assert max(drawn) <= 99 and drawn[99] / 8000 < 0.06
    assert abs(sum(c for v, c in drawn.items() if v > 75) / 8000 - 0.5) < 0.03
    support = [int(v) for v in int_support(slot)]
    weights = dict(zip(support, balanced_weights(support, 75)))
    for v in (40, 60, 80, 99):
        assert drawn[v] / 8000 == pytest.approx(weights[v], abs=0.01), v


def test_a_power_of_ten_that_keeps_its_digits_has_values_on_its_grid():
    slot = find_slots("She paid 100 dollars.")[0]
    rng = random.Random(9)
    assert {vary(slot, rng, keep_digits=True) for _ in range(500)} == {str(v) for v in range(110, 201, 10)}


def test_a_percentage_of_100_that_cannot_keep_its_digits_is_drawn_at_once():
    """Under its cap of 99, 100 % has no 3-digit value: vary used to spend 100 draws before taking
    a 2-digit one (26 draws a value on a GSM8K question with "100%", 0.64 s for its set)."""
    from generation.numbers import _room

    assert not _room(find_slots("a 100% rise")[0])
    assert _room(find_slots("a 99% share")[0]) and _room(find_slots("He ran 9 miles.")[0])
    calls = Counter()
    rng = random.Random(10)

    class Counting(random.Random):
        def random(self) -> float:
            calls["draws"] += 1
            return rng.random()

    slot = find_slots("a 100% rise")[0]
    assert 50 <= int(vary(slot, Counting(), keep_digits=True)) <= 90
    assert calls["draws"] <= 3
