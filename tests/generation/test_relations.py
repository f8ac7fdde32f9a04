"""Similar questions keep the arithmetic relations of their original (generation.relations): by
hand, and on the testbed's templates, whose similars must keep whole, non-negative answers."""

from __future__ import annotations

import random
import re
from collections import Counter
from fractions import Fraction

from generation.config import GenerationConfig
from generation.numbers import find_slots, vary
from generation.offline import OfflineGenerator
from generation.records import Question
from generation.relations import kept, relations
from generation.value_draws import DrawPlan, draw_values
from probes.testbed.problems import TEMPLATES, make_splits, solve

F = Fraction


def test_relations_by_hand():
    # "3 boxes of 7 pencils, gives away 5": 3 < 5 < 7; 3·7 > 5, 3 + 5 > 7 …
    rel = relations([F(3), F(7), F(5)])
    assert ("lt", 0, (1,), 0) in rel and ("lt", 2, (1,), 0) in rel and ("prod", 2, (0, 1), -1) in rel
    assert ("sum", 1, (0, 2), -1) in rel  # 7 < 3 + 5
    assert not any(r[0] == "div" for r in rel)
    assert ("div", 0, (1,), 0) in relations([F(24), F(6)])  # 6 divides 24
    assert kept(relations([F(24), F(6)]), [F(30), F(5)]) and not kept(relations([F(24), F(6)]), [F(30), F(7)])
    assert not kept(relations([F(30), F(4), F(9)]), [F(10), F(4), F(9)])  # 30 > 4 + 9 must stay
    assert relations([F(3), F(7), F(5)], arithmetic=False) == {r for r in rel if r[0] == "lt"}
    # 73 + 49 + 26 < 191 toys in all: a sum of three against a fourth must stay (or the answer is negative)
    toys = relations([F(73), F(49), F(26), F(191)])
    assert ("sum", 3, (0, 1, 2), 1) in toys
    assert not kept(toys, [F(66), F(45), F(27), F(113)]) and kept(toys, [F(66), F(45), F(27), F(150)])


def valid_share(relations_mode: str, n: int = 120) -> float:
    """Share of the testbed problems' similar questions whose answer stays a small whole
    non-negative number by the template's own solution (the rules its problems are drawn under)."""
    splits = make_splits(300, n, 10, seed=2)
    generator = OfflineGenerator(
        GenerationConfig.from_dict({"similars": 3, "paraphrases": 2, "offline": {"relations": relations_mode}}), "test"
    )
    good = total = 0
    for i, problem in enumerate(splits.members):
        template = TEMPLATES[problem.template]
        names = [k for k in re.findall(r"\{([a-z])\}", template.text) if k != "n"]
        for similar in generator.generate(Question(id=f"p{i}", question=problem.question)).similars:
            values = [int(s.value) for s in find_slots(similar)]
            total += 1
            good += len(values) == len(names) and solve(template, dict(zip(names, values))) is not None
    return good / total


def test_similars_of_the_testbed_keep_whole_non_negative_answers():
    arithmetic, order = valid_share("arithmetic"), valid_share("order")
    assert arithmetic >= 0.9 and order < arithmetic - 0.15


def test_a_quantity_near_2000_is_a_year_only_after_a_year_word():
    """'a target of 1900 calories' was drawn as a year (1950–2029), which broke 400 | 1900 − 700."""
    question = (
        "A bag of bread has 400 calories per serving. If a 48 ounces bag has 4 servings, how many ounces can you "
        "eat if your daily calorie target is 1900 and you have already consumed 700 calories?"
    )
    assert [s.year for s in find_slots(question)] == [False] * 5
    assert [s.year for s in find_slots("In 2015 she had 3 cats; since 1990, 12 more.")] == [True, False, True, False]
    generator = OfflineGenerator(GenerationConfig.from_dict({"similars": 5, "paraphrases": 1}), "test")
    for similar in generator.generate(Question(id="cal", question=question)).similars:
        calories, ounces, servings, target, consumed = (int(s.value) for s in find_slots(similar))
        assert target > consumed and (target - consumed) % calories == 0 and ounces % servings == 0, similar


def test_share_and_markup_relations_by_hand():
    # "0.5 as many as 20": the share 1/2 keeps a denominator dividing 2 and stays below one
    half = relations([F(1, 2), F(20)])
    assert ("den", 0, (), 2) in half and ("below1", 0, (), 0) in half
    assert kept(half, [F(1, 2), F(30)]) and not kept(half, [F(3, 2), F(30)]) and not kept(half, [F(1, 3), F(30)])
    # "20 % bigger than 600": a percentage is the share p/100 = 1/5
    bigger = relations([F(20), F(600)], percent=[True, False])
    assert ("den", 0, (), 5) in bigger and ("below1", 0, (), 0) in bigger
    assert kept(bigger, [F(40), F(600)], [True, False]) and not kept(bigger, [F(21), F(630)], [True, False])
    # "a $440,000 budget, a $380,000 house plus 8 % and 13 % in fees": 380,000 · 1.21 = 459,800 > 440,000
    fees = relations([F(440000), F(380000), F(8), F(13)], percent=[False, False, True, True])
    assert ("markup", 0, (1, 2, 3), -1) in fees and ("markup", 0, (1, 2), 1) in fees  # 380,000 · 1.08 < 440,000
    assert ("part", 1, (0, 2), 1) in fees  # 380,000 > 8 % of 440,000
    assert not kept(fees, [F(440000), F(350000), F(8), F(13)], [False, False, True, True])  # 423,500 < 440,000
    markups = {r for r in fees if r[0] in ("markup", "part")}  # (the fees' own 25ths and 100ths aside)
    assert kept(markups, [F(500000), F(430000), F(9), F(12)], [False, False, True, True])  # 520,300 > 500,000
    # divisibility of a sum: 5 | 12 + 8
    assert ("divsum", 2, (0, 1), 0) in relations([F(12), F(8), F(5)])
    assert not kept({("divsum", 2, (0, 1), 0)}, [F(12), F(9), F(5)])


def naive_share_values(slot_text: str, denominator: int) -> set[str]:
    """Every rendering ``vary_share`` may give, by enumerating the values written like the original."""
    slot = find_slots(slot_text)[0]
    out = set()
    if slot.kind == "decimal":
        for m in range(1, int(slot.value * 2 * 10**slot.decimals) + 1):
            value = F(m, 10**slot.decimals)
            if (
                slot.value / 2 <= value <= slot.value * 2
                and value != slot.value
                and denominator % value.denominator == 0
            ):
                out.add(f"{float(value):.{slot.decimals}f}")
    else:
        for p in range(1, int(slot.value * 2) + 1):
            if slot.value / 2 <= p <= slot.value * 2 and p != slot.value and denominator % F(p, 100).denominator == 0:
                out.add(str(p))
    return out


def test_vary_share_draws_exactly_the_values_on_the_share_lattice():
    import random

    from generation.numbers import vary_share

    rng = random.Random(0)
    for text, denominator in [
        ("paid 0.35 each", 20),
        ("0.5 as many", 2),
        ("0.25 of it", 4),
        ("20% bigger", 5),
        ("15% off", 20),
        ("a 12.50 ticket", 2),
        ("8% tax", 25),
    ]:
        slot = find_slots(text)[0]
        drawn = {vary_share(slot, denominator, rng) for _ in range(400)}
        assert drawn == naive_share_values(text, denominator), text
    assert vary_share(find_slots("12 apples")[0], 2, rng) is None  # a plain integer has no share


def test_a_half_stays_on_its_lattice_though_no_other_half_is_below_one():
    """'0.5 as many as Mia' has no other value below one with a denominator dividing 2: the share
    relation that cannot be kept is dropped, the denominator is kept (1.0 or 1.5, never 0.7)."""
    question = "Lucas finds 12 eggs. Ava finds 0.5 as many as Lucas. How many eggs did they find?"
    generator = OfflineGenerator(GenerationConfig.from_dict({"similars": 5, "paraphrases": 1}), "test")
    similars = generator.generate(Question(id="half", question=question)).similars
    assert all(s is not None for s in similars)
    for similar in similars:
        share = [s.value for s in find_slots(similar) if s.kind == "decimal"][0]
        assert 2 % share.denominator == 0 and share != F(1, 2), similar


def _total_variation(a: list[int], b: list[int]) -> float:
    """Total-variation distance between the empirical distributions of two samples."""
    ca, cb = Counter(a), Counter(b)
    return 0.5 * sum(abs(ca[k] / len(a) - cb[k] / len(b)) for k in set(ca) | set(cb))


def test_similars_are_drawn_uniformly_over_the_values_that_keep_the_relations():
    """Joint draws come first (draw_values): a similar's numbers are distributed as independent
    redraws conditioned on keeping the original's relations, like the template's own numbers.
    Drawing quantities one at a time in order skews them (the first ranges freely, the last is
    squeezed upward); on the testbed that skew made the clean SFT checkpoint's absolute mode
    reject 18 % of subsets instead of 5 %. Reference: a naive rejection sampler written here."""
    question = "Ann has 13 apples, 17 pears and 21 plums. How many fruits does she have?"
    slots = find_slots(question)
    assert [s.text for s in slots] == ["13", "17", "21"]
    n = 4000
    rng = random.Random(1)
    naive: list[tuple[int, ...]] = []
    while len(naive) < n:  # independent redraws, kept only when 13 < 17 < 21 still holds
        values = tuple(int(vary(s, rng)) for s in slots)
        if values[0] < values[1] < values[2]:
            naive.append(values)
    rng = random.Random(2)
    plan = DrawPlan.of(slots, arithmetic=False)
    drawn = [tuple(map(int, draw_values(plan, rng, arithmetic=False)[0])) for _ in range(n)]
    rng = random.Random(3)
    in_order = [tuple(map(int, draw_values(plan, rng, arithmetic=False, joint=0)[0])) for _ in range(n)]
    assert all(a < b < c for a, b, c in drawn + in_order)
    for i in range(3):
        # two samples of 4000 from one distribution over ~20 values: distance ≈ 0.03–0.05
        assert _total_variation([v[i] for v in naive], [v[i] for v in drawn]) < 0.07, i
    # the check has power: the order-wise draw is ≈ 0.21 away on the first two quantities
    assert _total_variation([v[0] for v in naive], [v[0] for v in in_order]) > 0.15
    assert _total_variation([v[1] for v in naive], [v[1] for v in in_order]) > 0.15
