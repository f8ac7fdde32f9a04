"""The testbed's problems and splits (no model)."""

from __future__ import annotations

import re

import pytest

from probes.testbed.problems import TEMPLATES, draw_problem, make_splits, parse_answer, solve


def naive_answer(template_index: int, numbers: dict[str, int]) -> int:
    """Evaluate the template's steps as Python arithmetic, independently of :func:`solve`."""
    values = dict(numbers)
    result = None
    for left, op, right, out in TEMPLATES[template_index].steps:
        result = eval(f"{values[left]} {op.replace('/', '//')} {values[right]}")  # noqa: S307 - digits and one operator
        values[out] = result
    return result


def test_a_template_solved_by_hand():
    # template 0: b boxes of c pencils plus a loose ones
    text, answer = solve(TEMPLATES[0], {"a": 5, "b": 3, "c": 4})
    assert text == "3 * 4 = 12. 12 + 5 = 17. The answer is 17."
    assert answer == 17
    assert parse_answer(text) == 17


def test_dozens_of_templates_with_several_steps():
    assert len(TEMPLATES) >= 36
    assert sum(len(t.steps) >= 2 for t in TEMPLATES) >= 30
    assert any(len(t.steps) >= 3 for t in TEMPLATES)


def test_every_drawn_problem_states_its_numbers_and_the_right_answer():
    import random

    rng = random.Random(3)
    for index in range(len(TEMPLATES)):
        drawn = [p for p in (draw_problem(index, rng) for _ in range(40)) if p is not None]
        assert drawn, f"template {index} never draws a valid problem"
        for p in drawn:
            numbers = dict(p.numbers)
            assert p.answer == naive_answer(index, numbers)
            assert p.answer >= 0
            for value in numbers.values():
                assert re.search(rf"\b{value}\b", p.question)
            assert p.solution.endswith(f"The answer is {p.answer}.")


def test_splits_are_disjoint_and_non_members_template_matched():
    s = make_splits(3000, 80, 40, seed=5)
    keys = s.all_keys()
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not keys[a] & keys[b], f"{a} and {b} share a (template, numbers) pair"
    assert len(keys["sft"]) == 3000 and len(keys["members"]) == 80 == len(keys["non_members"])
    assert [p.template for p in s.members] == [p.template for p in s.non_members]
    assert len({p.template for p in s.members}) == min(80, len(TEMPLATES))


def test_splits_are_reproducible_from_the_seed():
    a, b, c = make_splits(500, 10, 10, 1), make_splits(500, 10, 10, 1), make_splits(500, 10, 10, 2)
    assert [p.question for p in a.members] == [p.question for p in b.members]
    assert [p.question for p in a.members] != [p.question for p in c.members]


def test_too_many_problems_is_a_clear_error():
    with pytest.raises(ValueError, match="lower"):
        make_splits(10_000_000, 10, 10, 0)
