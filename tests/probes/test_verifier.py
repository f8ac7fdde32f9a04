"""The rule-based verifier reads the answer a completion *states* (SPEC §5, reward gain): the first
explicit marker wins and what follows it is ignored, else the last ``\\boxed{}``, else the last
number; Unicode minus, digit-group commas, a trailing period, lettered choices and scientific
notation are normalised. It agrees with the testbed's own GRPO reward on that reward's format."""

from __future__ import annotations

import pytest

from probes.accuracy.verifier import RULES, judge
from probes.testbed.problems import parse_answer

STATED = [  # (completion, known answer): each states the known answer
    ("The answer is 42. Check: 6 * 2 = 12.", 42),  # a check after the marker is ignored
    ("12 + 16 = 28. The answer is 28. Then 28 \u2212 1 = 27", 28),  # the first marker wins
    ("The answer is \u22125.", -5),  # U+2212 MINUS SIGN
    ("#### \u22125", -5),
    ("\u22125", -5),
    ("(B)", "B"),
    ("B)", "B"),
    ("B.", "B"),
    ("Answer: (B)", "B"),
    ("The answer is (B).", "B"),
    ("1e3", 1000),
    ("The answer is 1.5e-3", 0.0015),
    ("2.5E2", 250),
    ("The answer is 1,234.", 1234),
]

NOT_STATED = [  # (completion, known answer): none states the known answer
    ("The answer is 41. Check: 42", 42),
    ("(B)", "C"),
    ("The answer is 28. Then 27", 27),
    ("12 + 16 = 28. The answer is 28. Then 28 \u2212 1 = 27", 27),
    ("#### 5\nThe answer is 6.", 6),  # a #### line first: it decides
    ("\u22125", 5),
    ("The answer is (B).", "C"),
    ("1e3", 3),
    ("", 28),
    ("The answer is 1,234.", 234),
]

PREVIOUS = [  # (completion, known answer, reward, rule): the behaviours kept from before
    ("6 * 2 = 12. 12 + 16 = 28. The answer is 28.", 28, 1.0, "math-verify"),
    ("The answer is 27.", 28, 0.0, "math-verify"),
    (r"So the answer is $\boxed{\frac{1}{2}}$", "0.5", 1.0, "math-verify"),
    (r"\boxed{2}", "0.5", 0.0, "math-verify"),
    ("so 4 + 6 = 10\n#### 1,000", "1000", 1.0, "####"),
    ("#### 12", 13, 0.0, "####"),
    ("work\n#### -7.", -7, 1.0, "####"),
    ("work\n#### \\frac{3}{4}", 0.75, 1.0, "####"),  # #### read by value
    ("#### Step 3: add them\nso \\boxed{42}", 42, 1.0, "math-verify"),  # a heading, not a marker
    ("The capital is\nParis.", "Paris", 1.0, "exact"),
    ("The answer is B.", "B", 1.0, "exact"),
    ("I think the answer is C", "B", 0.0, "exact"),
    (r"so $x = \frac{1}{2}$", 0.5, 1.0, "math-verify"),  # LaTeX, no marker: math-verify reads it
]

TESTBED_FORMAT = [  # completions in the testbed's format: "The answer is N." or a "#### N" line
    " 6 * 2 = 12. 12 + 16 = 28. The answer is 28.",
    " 5 * 2 = 12. 12 + 16 = 38. The answer is 38.",
    " 35 / 7 = 5. The answer is 5. 5 * 7 = 35. The answer is 7.",
    " 12 + 16 = 28. The answer is 28. Then 28 - 1 = 27",
    " 4 - 9 = -5. The answer is -5.",
    " 3 + 4 = 7. The answer is 7. Check: 7 - 4 = 3.",
    "So he writes 960/60=16 hours a week\n#### 16",
    "#### -3",
    "#### 16\nThe answer is 17.",
    "no final line",
]


@pytest.mark.parametrize(("completion", "answer"), STATED)
def test_the_stated_answer_is_judged_correct(completion, answer):
    assert judge(completion, answer).reward == 1.0


@pytest.mark.parametrize(("completion", "answer"), NOT_STATED)
def test_another_stated_answer_is_judged_wrong(completion, answer):
    assert judge(completion, answer).reward == 0.0


@pytest.mark.parametrize(("completion", "answer", "reward", "rule"), PREVIOUS)
def test_the_previous_behaviours_still_hold(completion, answer, reward, rule):
    assert (judge(completion, answer).reward, judge(completion, answer).rule) == (reward, rule)


@pytest.mark.parametrize("completion", TESTBED_FORMAT)
@pytest.mark.parametrize("answer", [28, 38, 5, 7, 27, -5, 16, -3, 17, 8])
def test_the_verifier_agrees_with_the_testbeds_own_reward(completion, answer):
    assert judge(completion, answer).reward == float(parse_answer(completion) == answer)


def test_every_judgement_names_one_of_the_rules():
    cases = [(c, a) for c, a in STATED + NOT_STATED] + [(c, a) for c, a, _, _ in PREVIOUS]
    assert {judge(c, a).rule for c, a in cases} == set(RULES)
