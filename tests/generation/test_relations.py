"""Similar questions keep the arithmetic relations of their original (generation.relations): by
hand, and on the testbed's templates, whose similars must keep whole, non-negative answers."""

from __future__ import annotations

import re
from fractions import Fraction

from generation.config import GenerationConfig
from generation.numbers import find_slots
from generation.offline import OfflineGenerator
from generation.records import Question
from generation.relations import kept, relations
from probes.testbed.problems import TEMPLATES, make_splits, solve

F = Fraction


def test_relations_by_hand():
    # "3 boxes of 7 pencils, gives away 5": 3 < 5 < 7; 3·7 > 5, 3 + 5 > 7 …
    rel = relations([F(3), F(7), F(5)])
    assert ("lt", 0, 1, 0, 0) in rel and ("lt", 2, 1, 0, 0) in rel and ("prod", 2, 0, 1, -1) in rel
    assert ("sum", 1, 0, 2, -1) in rel  # 7 < 3 + 5
    assert not any(r[0] == "div" for r in rel)
    assert ("div", 0, 1, 0, 0) in relations([F(24), F(6)])  # 6 divides 24
    assert kept(relations([F(24), F(6)]), [F(30), F(5)]) and not kept(relations([F(24), F(6)]), [F(30), F(7)])
    assert not kept(relations([F(30), F(4), F(9)]), [F(10), F(4), F(9)])  # 30 > 4 + 9 must stay
    assert relations([F(3), F(7), F(5)], arithmetic=False) == {r for r in rel if r[0] == "lt"}


def valid_share(relations_mode: str, n: int = 120) -> float:
    """Share of the testbed problems' similar questions whose answer stays a small whole
    non-negative number by the template's own solution (the rules its problems are drawn under)."""
    splits = make_splits(300, n, 10, seed=2)
    generator = OfflineGenerator(GenerationConfig.from_dict({"similars": 3, "paraphrases": 2,
                                                             "offline": {"relations": relations_mode}}), "test")
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
