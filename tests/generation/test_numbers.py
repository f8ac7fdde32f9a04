"""Quantity slots: which numbers are values, and how they are varied."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from generation.numbers import find_slots, math_spans, rendered_value, signed_span, vary


def slots(text: str) -> list[tuple[str, str]]:
    return [(s.text, s.kind) for s in find_slots(text)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Janet has 16 eggs and sells 3.", [("16", "int"), ("3", "int")]),
        ("It costs $1,200.50 in 2019.", [("1,200.50", "decimal"), ("2019", "int")]),
        ("Use 3/4 cup, then $\\frac{2}{5}$ of it.", [("3/4", "fraction"), ("\\frac{2}{5}", "latex_fraction")]),
        ("Three friends share twenty apples.", [("Three", "word"), ("twenty", "word")]),
        ("The temperature drops to -5 degrees.", [("5", "int")]),
        ("A discount of 15% applies.", [("15", "int")]),
    ],
)
def test_quantities_are_found(text: str, expected: list[tuple[str, str]]) -> None:
    assert slots(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Solve $x^2 = y^{3}$ for $a_1$.",  # exponents and subscripts
        "A fair 6-sided die with a three-digit code.",  # compound modifiers
        "The 3rd and 21st rows.",  # ordinals
        "Water is H2O and x2 is a name.",  # glued to letters
        "Find $x$ such that $x + y = 0$.",  # zero
        "Compute $10^{-3}$ and $\\sqrt[3]{y}$.",  # exponent with sign, root index
    ],
)
def test_structural_numbers_are_not_quantities(text: str) -> None:
    assert [s for s in find_slots(text) if s.text not in ("10",)] == []


def test_percent_flag_and_values() -> None:
    (pct, dec, frac) = find_slots("Take 40% of 2.50 and 6/8.")
    assert pct.percent and not dec.percent
    assert dec.value == Fraction(5, 2) and dec.decimals == 2
    assert frac.value == Fraction(3, 4)


@pytest.mark.parametrize("seed", range(20))
def test_varied_values_keep_their_kind_and_change(seed: int) -> None:
    rng = random.Random(seed)
    text = "Buy 7 pens at $3.25, 40% off, 2/3 of 1,500 people, \\frac{5}{3} cups, twelve days, 150 km, in 2010."
    for slot in find_slots(text):
        new = vary(slot, rng)
        value = rendered_value(slot, new)
        assert value != slot.value and new != slot.text
        if slot.kind == "int":
            assert new.replace(",", "").isdigit() and value >= 1
            assert ("," in new) == ("," in slot.text) or value < 1000
        if slot.kind == "decimal":
            assert len(new.split(".")[1]) == 2
        if slot.kind == "fraction" and slot.value < 1:
            assert value < 1  # proper stays proper
        if slot.kind == "latex_fraction":
            assert new.startswith("\\frac{") and value > 1  # improper stays improper
        if slot.percent:
            assert value < 100
        if slot.text == "150":
            assert int(new) % 10 == 0 and 70 <= int(new) <= 300  # round, within [n/2, 2n]
        if slot.text == "2010":
            assert 1950 <= int(new) <= 2029  # a year stays a plausible year
        if slot.kind == "word":
            assert new.islower() and 2 <= value <= 19


def test_magnitude_stays_comparable() -> None:
    rng = random.Random(0)
    (slot,) = find_slots("There are 37 cows.")
    draws = [int(vary(slot, rng)) for _ in range(300)]
    assert min(draws) >= 18 and max(draws) <= 74 and 37 not in draws


def test_unary_minus_joins_the_blank_but_binary_minus_does_not() -> None:
    text = "It fell to -5 degrees; then x - 3 = -7."
    spans = [text[slice(*signed_span(text, s))] for s in find_slots(text)]
    assert spans == ["-5", "3", "-7"]


def test_currency_pairs_are_not_maths() -> None:
    text = "Pens cost $4 each and pay with a $50 bill; solve $2x + 1 = 9$."
    assert [text[a:b] for a, b in math_spans(text)] == ["$2x + 1 = 9$"]
