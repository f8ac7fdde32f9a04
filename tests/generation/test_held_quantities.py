"""Controls that keep the quantities a doubtful number of the worked solution rests on
(:mod:`generation.held_quantities`), and controls that vary fewer quantities where varying them all
gives no answer (:meth:`generation.value_draws.DrawPlan.narrowings`): each rule on hand-computed
values, and every answer a control gets checked against the problem solved by hand."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest

from generation.answers import answers_for, attach_answers, read_solution
from generation.config import GenerationConfig
from generation.held_quantities import origins
from generation.numbers import find_slots
from generation.offline import OfflineGenerator
from generation.records import Question
from generation.value_draws import DrawPlan

F = Fraction
EXCERPT = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks" / "gsm8k_test_excerpt.jsonl"


def test_a_doubtful_number_rests_on_the_simplest_ways_that_write_it():
    none = frozenset()
    # a form of a quantity alone: only that quantity (the 0.5 of a stated 50 %), though 1 + ... also writes it
    assert origins(F(1, 2), {F(1, 2): frozenset({0}), F(1): frozenset({1}), F(3, 2): frozenset({2})}) == {0}
    # else every way two numbers write it: 3 = 2 + 1 (hours) and 3 = 6 / 2
    numbers = {F(2): frozenset({0}), F(1): frozenset({1}), F(6): frozenset({2}), F(150): frozenset({3})}
    assert origins(F(3), numbers) == {0, 1, 2}
    # two constants that rest on nothing explain nothing; a quantity two away from it does, last
    assert origins(F(19), {F(7): none, F(12): none}) is None
    assert origins(F(19), {F(7): none, F(12): none, F(21): frozenset({0})}) == {0}
    assert origins(F(8), {F(7): none, F(12): none, F(4): frozenset({1})}) == {1}  # 4 times 2
    # nothing writes it: the solution is refused
    assert origins(F(29), {F(50): frozenset({0}), F(13): frozenset({1})}) is None


def test_a_fraction_read_as_its_inverse_and_a_percentage_as_per_share_vary_with_them():
    """'1/3 as many' computed as '66 / 3', '50 %' as '52 / 2': the divisor is the quantity's inverse,
    so it follows the quantity (before: a constant, and the question was refused)."""
    question = "He delivers 66 messages to Ms. Thompson and 1/3 as many messages to Mr. Yu. How many in total?"
    solution = "66 / 3 = <<66/3=22>>22\n66 + 22 = <<66+22=88>>88"
    answers, why = answers_for(question, solution, 88, [question.replace("1/3", "2/3").replace("66", "60")])
    assert why is None and answers == [60 + 40]
    # a 4 that multiplies is no 1/4: a control keeps the fraction ("4 weeks * $600" beside "1/4 of the
    # employees" read 4 as the fraction's inverse, and a hand check found half the right pay)
    question = "Peter's locker is 1/4 as big as Zack's locker. Peter's locker is 5 cubic inches. How big is Zack's?"
    variants = [question.replace("1/4", "1/3").replace("5 c", "7 c"), question.replace("5 c", "7 c")]
    assert answers_for(question, "5*4=<<5*4=20>>20", 20, variants)[0] == [None, 28]
    # a percentage read per share only where it divides: "100 - 60" beside "1 percentage-point" is full charge
    question = "A phone charges 1 percentage-point per 3 minutes. It is at 60% now. How many minutes to full charge?"
    variants = [question.replace("1 percentage", "2 percentage"), question.replace("60%", "50%")]
    assert answers_for(question, "100-60=<<100-60=40>>40\n40*3=<<40*3=120>>120", 120, variants)[0] == [None, 150]
    question = "A choir has 52 members, 50% of them girls. Half of the girls are ill. How many girls sing?"
    solution = "52/2 = <<52/2=26>>26 girls\nHalf are ill: 26/2 = <<26/2=13>>13"
    answers, _ = answers_for(question, solution, 13, [question.replace("52", "60").replace("50%", "30%")])
    assert answers == [9]  # 60 * 30 % = 18, half of them


def test_an_answer_whole_in_the_original_stays_whole_though_money_with_cents_feeds_it():
    """A hand check found $2.40 a serving where the question says "Round to the nearest integer", and
    6.72 pairs of shoes: an answer whole in the original stays whole (none otherwise)."""
    question = (
        "Antoine's soup serves 6 people. The onions cost $2.00 a pound and he needs 4 pounds; the stock costs "
        "$4.00. What is the cost per serving? (Round to the nearest integer.)"
    )
    solution = "4*2 = $8.00\n8+4 = $<<8+4=12.00>>12.00\n12/6 = $<<12/6=2.00>>2.00 a serving"
    variants = [question.replace("serves 6", "serves 5"), question.replace("serves 6", "serves 3")]
    assert answers_for(question, solution, 2, variants)[0] == [None, 4]
    question = "Jessica makes $2,000.00 a month and sets 25% aside. Shoes cost $1,000.00 a pair. How many pairs a year?"
    solution = "2000*.25 = $<<2000*.25=500.00>>500.00\n500*12 = $<<500*12=6000.00>>6,000.00\n6000/1000 = 6 pairs"
    assert answers_for(question, solution, 6, [question.replace("25%", "28%")])[0] == [None]


def test_prices_the_solution_rounds_are_kept():
    """'round all his prices to the nearest dollar': 12 x $3 reads $2.74 rounded, so a control keeps
    the prices and varies the pots (a hand check found $1.76 varied and $3 still read: 116 for 95)."""
    question = (
        "Artie sells marigolds for $2.74 per pot and begonias for $2.12 per pot. He rounds all his prices to the "
        "nearest dollar. If he sells 12 pots of marigolds and 17 pots of begonias, how much will he make?"
    )
    solution = "12 x $3 = $<<12*3=36>>36\n17 x $2 = $<<17*2=34>>34\n$36 + $34 = $<<36+34=70>>70"
    worked = read_solution(question, solution, 70)
    assert not isinstance(worked, str) and {worked.keys[i][1] for i in worked.held} == {F("2.74"), F("2.12")}
    assert worked.answer_for(question.replace("12 pots", "10 pots")) == 64
    assert worked.answer_for(question.replace("$2.74", "$1.76")) is None


def test_a_quantity_also_stated_as_a_kept_number_or_enumerated_by_an_ordinal_is_kept():
    """'page 32 … a 32-page tabloid': the 32 a step reads may be the kept one; '3 classes … the third
    class': a similar with 4 classes leaves the fourth out (both found by a hand check)."""
    question = (
        "A sheet holds 4 pages: page 1 on the left, page 32 on the right. How many sheets make a 32-page tabloid?"
    )
    worked = read_solution(question, "32/4=<<32/4=8>>8", 8)
    assert not isinstance(worked, str) and {worked.keys[i][1] for i in worked.held} == {1, 32}  # and the unread 1
    assert worked.answer_for(question.replace("4 pages", "8 pages")) == 4
    question = (
        "Each class has 20 students. There are 3 classes. Half the school is girls. The first class has 15 "
        "girls, the second 12. How many boys are in the third class?"
    )
    solution = (
        "3 x 20 = <<3*20=60>>60\n60 x .5 = <<60*.5=30>>30\n30 - 15 - 12 = <<30-15-12=3>>3\n20 - 3 = <<20-3=17>>17"
    )
    worked = read_solution(question, solution, 17)
    assert not isinstance(worked, str) and [worked.keys[i][1] for i in worked.held] == [3]
    assert worked.answer_for(question.replace("has 15", "has 14")) == 16
    assert worked.answer_for(question.replace("3 classes", "4 classes")) is None


def test_a_count_the_solution_enumerates_is_kept_and_the_rest_varies():
    """'Two trains', read as the constant of '2 trains * 80 miles' (its line says "both"): a control
    keeps "Two" (a similar, which changes it, gets no answer), and varies the miles."""
    rows = [json.loads(line) for line in EXCERPT.read_text().splitlines()]
    row = rows[16]
    solution, answer = row["answer"].split("####")
    worked = read_solution(row["question"], solution, int(answer))
    assert not isinstance(worked, str) and [worked.keys[i][1] for i in worked.held] == [2]
    variant = row["question"].replace("80 miles", "70 miles").replace("150 miles", "120 miles")
    assert worked.answer_for(variant) == 70 + 120  # (2 * 70 + 120 * 2) / 2
    assert worked.answer_for(variant.replace("Two trains", "Three trains")) is None


def _controls(row: dict, controls: int = 5) -> tuple[list[str], list]:
    solution, answer = row["answer"].split("####")
    question = Question(id="q", question=row["question"], answer=int(answer), extra={"solution": solution})
    record = OfflineGenerator(GenerationConfig(controls=controls), "test").generate(question)
    attach_answers(record)
    return list(record.controls), record.answers["controls"]


def test_where_no_draw_that_varies_every_quantity_has_an_answer_a_control_varies_fewer():
    """'a 3 egg omelet every morning … dozens in 4 weeks': 3 * 7 * 4 / 12 is whole for no pair of new
    values the draws try, so a control varies one of the two (the similars, which vary both, have no
    answer); each answer is the problem solved by hand."""
    row = json.loads(EXCERPT.read_text().splitlines()[18])
    texts, answers = _controls(row)
    answered = [(t, a) for t, a in zip(texts, answers) if a is not None]
    assert answered  # few values keep it whole even so: (6, 4) and (3, 8) among those within half to twice
    for text, answer in answered:
        eggs, weeks = (int(v) for v in re.findall(r"(\d+) (?:egg|weeks)", text))
        assert (eggs, weeks) != (3, 4) and (eggs == 3 or weeks == 4)  # one of them varies
        assert answer == eggs * 7 * weeks / 12


def test_narrowings_hold_each_free_quantity_then_all_but_one():
    class Program:
        held = frozenset({1})

    slots = find_slots("Ann has 3 red, 5 blue, 7 green and 9 white pens.")
    plan = DrawPlan.of(slots, program=Program())
    plan.narrowings()
    assert plan.narrowing == [
        frozenset({0}),
        frozenset({2}),
        frozenset({3}),
        frozenset({2, 3}),
        frozenset({0, 3}),
        frozenset({0, 2}),
    ]
    assert plan.narrow() and plan.held == {0, 1} and plan.narrowing[0] == {2}
    two = DrawPlan.of(find_slots("Ann has 3 red and 5 blue pens."), program=type("P", (), {"held": frozenset()})())
    two.narrowings()
    assert two.narrowing == [frozenset({1}), frozenset({0})]  # two free: vary each alone


@pytest.mark.parametrize("index", range(40))
def test_every_answered_control_of_the_excerpt_keeps_what_its_answer_rests_on(index):
    """On each of the 40 shipped GSM8K questions: a control with an answer keeps every quantity the
    worked solution holds, and its answer is the program's on the control's own values."""
    row = json.loads(EXCERPT.read_text().splitlines()[index])
    solution, answer = row["answer"].split("####")
    worked = read_solution(row["question"], solution, int(answer.replace(",", "")))
    if isinstance(worked, str):
        pytest.skip(worked)
    original = {s.key: s.value for s in find_slots(row["question"])}
    for text, value in zip(*_controls(row)):
        if value is None:
            continue
        found = find_slots(text)
        for i in worked.held:
            held = [b.value for a, b in zip(worked.slots, found) if a.key == worked.keys[i]]
            assert held and all(v == original[worked.keys[i]] for v in held), (text, worked.keys[i])


def test_three_readings_a_third_hand_check_found_wrong():
    """An unseen sample of 50 new answers had 46 right; of its 4 wrong, 2 came from readings fixed here
    (each fails without its fix), and 2 were ill-posed similars."""
    # "the first half" of a match is a period, not a multiplier: its 2s are the stated "2 goals fewer"
    # and a result (before: constants, so 3 goals for 4 gave 13, not 8)
    question = (
        "In the first half, team A scores 4 goals while team B scores 2 goals fewer than team A. In the second "
        "half, team A scores 1/4 of the number of goals scored by team B, which scores 4 times the number of goals "
        "it scored in the first half. What's the total number of goals scored in the match?"
    )
    solution = (
        "In the first half, team B scores 4 goals - 2 goals = <<4-2=2>>2 goals.\n"
        "The total number of goals scored in the first half is 2 goals + 4 goals = <<2+4=6>>6 goals\n"
        "During the second half, team B scores 4 goals * 2 = <<4*2=8>>8 goals.\n"
        "Team A 1/4 * 8 goals = <<1/4*8=2>>2 goals in the second half.\n"
        "The total number of goals in the second half is 8 goals + 2 goals = <<8+2=10>>10 goals\n"
        "The total number of goals in the match is 6 goals + 10 goals = <<6+10=16>>16 goals"
    )
    variant = question.replace("4 goals", "3 goals").replace("4 times", "3 times").replace("1/4", "1/3")
    # 3 goals: "2 goals + 4 goals" reads the stated 2 or the result 1, which disagree; 1/2: 2 + 4 + 8 + 4
    assert answers_for(question, solution, 16, [variant, question.replace("1/4", "1/2")])[0] == [None, 18]
    # "1 - (1/3) = 2/3", then "100 / (2/3)": that 2/3 is the result, not 2 over the fraction's inverse
    question = (
        "A ticket costs $100. Kenny sells his cards for $1.5 each. He keeps 1/3 of them and has $50 left after "
        "the ticket. How many cards did he start with?"
    )
    solution = (
        "100 + 50 = <<100+50=150>>150\n150 / 1.5 = <<150/1.5=100>>100\nThe cards he sold were 2/3 of his "
        "collection because 1 - (1/3) = 2/3\nHe started with 150 cards because 100 / (2/3) = <<100/(2/3)=150>>150"
    )
    variant = question.replace("$100", "$140").replace("1/3", "2/3").replace("$50", "$70")
    assert answers_for(question, solution, 150, [variant])[0] == [420]  # 140 cards sold, a third kept
    # algebra: "2g = 10" solves an equation of every quantity, so no control keeps enough to vary anything
    question = "Lee rears only sheep and geese. The animals have 70 legs and 20 heads. How many sheep?"
    solution = (
        "Let g be the number of geese and s the number of sheep: g + s = 20, so s = 20 - g.\n"
        "2g + 4(20-g) = 70, so 2g + 80 - 4g = 70, and 2g = 10.\nThere are 10/2 = <<10/2=5>>5 geese.\n"
        "There are 20 - 5 = <<20-5=15>>15 sheep."
    )
    answers, why = answers_for(question, solution, 15, [question.replace("70 legs", "40 legs")])
    assert answers == [None] and why.startswith("a result computed in a step not read here"), why


def test_a_number_written_twice_beside_its_multiplier_is_kept():
    """'twice the number that prefer tennis, so 2 * 2': one 2 is the multiplier, the other the 2 who play
    tennis — which, the line cannot tell, so a control keeps the tennis players (before: both read as
    the multiplier, and 4 tennis players gave 72 dancers for 68; GSM-Symbolic's template 30)."""
    question = (
        "A class of 91 students has various hobbies. 23 like to bake, 2 like to play tennis, and the rest like to "
        "either dance or play video games. How many like to dance if the number that like to play video games is "
        "twice the number that prefer playing tennis?"
    )
    solution = "The number who play video games is twice the number who like tennis, so 2 * 2 = 4\n91 - 23 - 2 - 4 = 62"
    variants = [
        question.replace("91", "92").replace("23", "12").replace("2 like", "4 like"),
        question.replace("91", "92").replace("23", "12"),
    ]
    assert answers_for(question, solution, 62, variants)[0] == [None, 74]


def test_a_result_stated_in_no_read_step_rests_on_every_way_it_is_written_and_its_expression():
    """'18=18 emails' of 18 % of 100 rests on the 100 too, though 18 is also the stated 18 % (before:
    150 emails kept 18 and gave 264 for 246); '15 x 0.6666666666666666 = 10.0', which does not compute
    exactly, rests on the numbers it is stated after (GSM-Symbolic's templates 82 and 46)."""
    question = (
        "David gets 100 emails a day. 18% of those emails don't require any response. David responds to the rest "
        "of them. How many emails does David respond to in a 3 day work week?"
    )
    solution = (
        "David receives 18=18 emails that don't require a response\nSo David responds to 100-18=82 emails per day\n"
        "In a 3 day work week, David responds to 82*3=246 emails"
    )
    variants = [question.replace("100", "150").replace("3 day", "2 day"), question.replace("3 day", "5 day")]
    assert answers_for(question, solution, 246, variants)[0] == [None, 410]
    question = (
        "I have 18 liters of mango drink that are 0.6666666666666666 water and I wish to add it to 22 liters of "
        "peach drink that is 0.5 water. But as I pour it, I spill 3 liter of the mango drink. How much water is in "
        "the remaining 37 liters?"
    )
    solution = (
        "There are 22 x 0.5 = 11.0 liters of water from the 22 liters peach drink.\nAfter 3 liter of mango drink was "
        "spilled, there were 18 - 3 = 15 liters of mango drink left.\nOut of the 15 liters, 15 x 0.6666666666666666 "
        "= 10.0 liters are water.\nThus, there are a total of 11.0 + 10.0 = 21.0 liters of water out of the 37 liters."
    )
    answers, why = answers_for(question, solution, 21, [question.replace("18 l", "12 l").replace("spill 3", "spill 4")])
    assert answers == [None] and why == "a result computed in a step not read here (10)"  # it rests on all


@pytest.mark.parametrize(
    "question, solution, answer, variant, expected",
    [
        # 3 hours worked out in words from 2 and 1: a $2.50 rounding up to 3 is no origin of it
        (
            "Tom bikes 20 miles an hour for 2 hours and then walks 5 miles an hour for 1 hour. A snack costs $2.50. "
            "What is his average speed plus the cost of the snack?",
            "He biked 20 * 2 = <<20*2=40>>40 miles. He walked 5 * 1 = <<5*1=5>>5 miles. In total 40 + 5 = <<40+5=45>>45 "
            "miles. He traveled for 3 hours, so his speed is 45 / 3 = <<45/3=15>>15 mph. 15 + 2.50 = <<15+2.5=17.5>>17.5",
            17.5,
            ("for 2 hours", "for 5 hours"),
            None,
        ),
        # 11 hours is 2 + 5 + 4: three numbers, which two never write alone
        (
            "Tom bikes at 10 mph for 2 hours, walks at 3 mph for 5 hours and runs at 16 mph for 4 hours. What is his "
            "average speed?",
            "He biked 10 * 2 = <<10*2=20>>20 miles. He walked 3 * 5 = <<3*5=15>>15 miles. He ran 16 * 4 = <<16*4=64>>64 "
            "miles. In total 20 + 15 + 64 = <<20+15+64=99>>99 miles in 11 hours, so 99 / 11 = <<99/11=9>>9 mph.",
            9,
            ("for 2 hours", "for 13 hours"),
            None,
        ),
        # "600 / 4" beside "a month" and "each week" is 4 weeks, not 1/4's inverse; nor "200 / 4" 100/25 %
        (
            "Sam earns $800 a month and spends 1/4 of it on rent. How much does he have left each week?",
            "Rent is 800 * 1/4 = $<<800*1/4=200>>200. He has 800 - 200 = $<<800-200=600>>600 left a month. That is "
            "600 / 4 = $<<600/4=150>>150 a week.",
            150,
            ("1/4", "1/5"),
            160,
        ),
        (
            "Sam earns $800 a month and saves 25% of it. How much does he save each week?",
            "He saves 800 * 25 / 100 = $<<800*25/100=200>>200 a month. That is 200 / 4 = $<<200/4=50>>50 a week.",
            50,
            ("25%", "20%"),
            40,
        ),
        # "12 * 1/2" beside "half": that 1/2 is the half, not the earlier result 6 / 12
        (
            "Tom has 6 red marbles and 12 blue marbles. He gives away half of the blue marbles. How many marbles does "
            "he have now?",
            "The red marbles are 6 / 12 = <<6/12=1/2>>1/2 of the blue ones. He gives away 12 * 1/2 = <<12*1/2=6>>6 blue "
            "marbles. He has 6 + 12 - 6 = <<6+12-6=12>>12 marbles now.",
            12,
            ("6 red", "8 red"),
            None,
        ),
        # the unread 3 dogs were added to the 4 cats into "the 7 pets", which "a week" seems to explain
        (
            "Tom has 3 dogs and 4 cats. He buys 2 toys for each cat. Each pet eats 5 treats a week. How many toys and "
            "treats does he need for one week?",
            "He buys 4 * 2 = <<4*2=8>>8 toys. The 7 pets eat 7 * 5 = <<7*5=35>>35 treats a week. He needs 8 + 35 = "
            "<<8+35=43>>43.",
            43,
            ("4 cats", "6 cats"),
            None,
        ),
    ],
)
def test_a_review_found_these_wrong_and_they_are_refused_or_right(question, solution, answer, variant, expected):
    """Six constructed cases a review found answered wrong (37.5 for 20, 19 for 9.5, 128 for 160, 32
    for 40, 12 for 14, 47 for 57): each now gets the right answer or none."""
    answers, _ = answers_for(question, solution, answer, [question.replace(*variant)])
    assert answers == [expected]
