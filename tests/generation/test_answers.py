"""Answers of similar questions re-solved from the original's worked solution
(:mod:`generation.answers`): each answer checked against a hand computation, and every rule that
refuses to guess checked on the case it exists for."""

from __future__ import annotations

import json

import pytest

from generation.answers import answers_for, attach_answers, read_solution
from generation.config import GenerationConfig
from generation.pipeline import run_generation
from generation.records import Question, read_sets

GUS = "Gus has 6 boxes with 2 pencils in each box and 16 loose pencils. How many pencils does Gus have?"


def test_the_testbeds_worked_solution_gives_each_similar_its_answer():
    solution = "6 * 2 = 12. 12 + 16 = 28. The answer is 28."
    variants = [
        "Gus has 8 boxes with 4 pencils in each box and 32 loose pencils. How many pencils does Gus have?",
        "Gus has 9 boxes with 3 pencils in each box and 24 loose pencils. How many pencils does Gus have?",
    ]
    answers, why = answers_for(GUS, solution, 28, variants)
    assert why is None
    assert answers == [8 * 4 + 32, 9 * 3 + 24]


def test_unit_words_between_numbers_and_gsm8k_annotations():
    question = "There are 120 fourth-graders. 62 of them are girls. 3 boys are absent. How many boys are present?"
    solution = "So 120 students - 62 girls = 58 boys.\nThere were 58 boys - 3 absent = 55 boys.\n#### 55"
    variant = "There are 140 fourth-graders. 70 of them are girls. 5 boys are absent. How many boys are present?"
    assert answers_for(question, solution, 55, [variant])[0] == [140 - 70 - 5]
    annotated = "He has 120-62=<<120-62=58>>58 boys, and 58-3=<<58-3=55>>55 present.\n#### 55"
    assert answers_for(question, annotated, "55", [variant])[0] == [65]


def test_constants_stay_and_a_short_decimal_answer_is_given():
    question = "A class watches 3 films of 90 minutes each. How many hours is that?"
    solution = "3 * 90 = 270 minutes. 270 / 60 = 4.5 hours.\n#### 4.5"
    worked = read_solution(question, solution, 4.5)
    assert not isinstance(worked, str)
    assert worked.answer_for("A class watches 4 films of 75 minutes each. How many hours is that?") == 5  # 300 / 60
    assert worked.answer_for("A class watches 5 films of 84 minutes each. How many hours is that?") == 7
    assert worked.answer_for("A class watches 2 films of 81 minutes each. How many hours is that?") == 2.7  # 162 / 60


@pytest.mark.parametrize(
    "question, solution, answer, why",
    [
        # 29 is no form of a quantity, nor one combined with another or a small number: nothing explains it
        (
            "Tom has 50 apples and gives 13 away. How many are left?",
            "50 - 13 - 29 = 8.\n#### 8",
            8,
            "a number worked out from a quantity where no step shows it (29)",
        ),
        # "half * 30 = 15" is not read, so the next step would take 15 for a constant: it rests on the
        # one quantity, and a control that holds it varies nothing
        (
            "There are half as many wasps as the 30 bees. How many insects?",
            "half * 30 bees = 15 wasps. 15 + 30 = 45.\n#### 45",
            45,
            "a result computed in a step not read here",
        ),
        # a step that does not compute is no step: its result is computed nowhere
        ("Tom has 5 apples and buys 3. How many?", "5 + 3 = 9.\n#### 9", 9, "no step of the worked solution yields"),
        (
            "Tom has 5 apples and buys 3. How many?",
            "He has eight apples.\n#### 8",
            8,
            "no step of the worked solution yields",
        ),
        ("Tom has 5 apples and buys 3. How many?", "5 + 3 = 8", "\\sqrt{2}", "the known answer is not a number"),
        ("Tom has 5 apples and buys 3. How many?", None, 8, "no worked solution"),
    ],
)
def test_a_solution_that_cannot_be_trusted_gives_no_answer_with_its_reason(question, solution, answer, why):
    variant = question.replace("5 apples", "6 apples").replace("50 apples", "60 apples").replace("30 bees", "40 bees")
    answers, reason = answers_for(question, solution, answer, [variant])
    assert answers == [None]
    assert reason is not None and reason.startswith(why), reason


@pytest.mark.parametrize(
    "question, solution, answer, held, kept, changed",
    [
        # 12 months a year equals the stated 12: which 12 is the constant cannot be told, so a control keeps it
        (
            "A field gives 80 crops, harvested every 12 months. How many crops a year?",
            "80 x 12 / 12 = 80.\n#### 80",
            80,
            {"12"},
            ("80 crops", "90 crops", 90),
            ("12 months", "6 months"),
        ),
        # days in a week equal the stated 7 tacos
        (
            "He eats 7 tacos a day and she eats 8. How many tacos in a week?",
            "7 + 8 = 15. 15 * 7 = 105.\n#### 105",
            105,
            {"7"},
            ("eats 8", "eats 9", 112),
            ("7 tacos", "6 tacos"),
        ),
        # "150 / 3" after 2 and 1 hours: 3 is 2 + 1, so both hours are kept, the distance varies
        (
            "Ann drives 150 miles: 2 hours before lunch and 1 hour after. What is her speed?",
            "150 / 3 = 50.\n#### 50",
            50,
            {"2", "1"},
            ("150 miles", "210 miles", 70),
            ("2 hours", "4 hours"),
        ),
        # "the first two have 200 each": 200 + 200 is two times 200, so "two" and 200 are kept
        (
            "John has 3 complexes. The first two have 200 apartments each and the last one has 100. How many apartments?",
            "200 + 200 = <<200+200=400>>400\n400 + 100 = <<400+100=500>>500",
            500,
            {"two", "200"},
            ("has 100", "has 150", 550),
            ("first two", "first four"),
        ),
    ],
)
def test_a_control_that_keeps_what_a_doubtful_number_rests_on_gets_its_answer(
    question, solution, answer, held, kept, changed
):
    """A number the solution cannot vouch for (a unit's constant or a stated quantity, a number worked
    out in words, a quantity read in another form) rests on some quantities: a variant that keeps
    them is answered by the program, one that changes them is not (nor a similar, which changes
    every quantity)."""
    worked = read_solution(question, solution, answer)
    assert not isinstance(worked, str), worked
    assert {worked.slots[[s.key for s in worked.slots].index(worked.keys[i])].text for i in worked.held} == held
    assert worked.answer_for(question.replace(kept[0], kept[1])) == kept[2]
    assert worked.answer_for(question.replace(kept[0], kept[1]).replace(*changed)) is None


def test_a_number_that_is_a_quantity_and_a_result_is_read_the_way_that_uses_every_result():
    """'9 / 3 = 3. 3 + 8 = 11': the second 3 may be the stated 3 albums or the first step's result;
    read as the albums, the first step would be worked out for nothing, so it is the result."""
    question = "Gus splits 9 stickers into 3 albums and adds 8 to one. How many are in that album?"
    worked = read_solution(question, "9 / 3 = 3. 3 + 8 = 11. The answer is 11.", 11)
    assert not isinstance(worked, str)
    assert worked.answer_for("Gus splits 8 stickers into 4 albums and adds 6 to one. How many are in that album?") == 8
    assert worked.answer_for("Gus splits 16 stickers into 4 albums and adds 5 to one. How many are in that album?") == 9


def test_where_two_readings_leave_as_much_unread_they_must_agree():
    """'5 + 5 = 10' after "5 red and five blue": either 5 could be either quantity, and the sum is
    the same both ways; in '5 - 5 + 7' it is not."""
    question = "Ann has 5 red pens and five blue pens. How many pens does she have?"
    worked = read_solution(question, "5 + 5 = 10.\n#### 10", 10)
    assert not isinstance(worked, str) and len(worked.alternatives) == 2
    assert worked.answer_for("Ann has 7 red pens and three blue pens. How many pens does she have?") == 10
    question = "Ann had 5 red pens, gave away five and found 7. How many red pens has she?"
    worked = read_solution(question, "5 - 5 + 7 = 7.\n#### 7", 7)
    assert not isinstance(worked, str)
    assert worked.answer_for("Ann had 9 red pens, gave away three and found 7. How many red pens has she?") is None


def test_a_negative_result_written_again_is_that_result_not_a_quantity_negated():
    """'4 - 8 = -4', then '-4 + 5 = 1' (SVAMP's equations give such steps): the -4 is the first
    step's result; read as the question's 4 negated, a control with 3, 9 and 7 would get 4, not 1.
    Without an earlier -4 the minus negates the quantity, as before."""
    question = "Dan has $ 4. He bought a candy bar for $ 8. Then his friend gave him $ 5. How much money is left?"
    worked = read_solution(question, "4 - 8 = <<4-8=-4>>-4\n-4 + 5 = <<-4+5=1>>1", 1)
    assert not isinstance(worked, str)
    control = "Dan has $ 3. He bought a candy bar for $ 9. Then his friend gave him $ 7. How much money is left?"
    assert worked.answer_for(control) == 1
    question = "The temperature fell by 4 degrees from 0, then rose by 10. What is it now?"
    worked = read_solution(question, "-4 + 10 = <<-4+10=6>>6", 6)
    assert not isinstance(worked, str)
    assert worked.answer_for("The temperature fell by 3 degrees from 0, then rose by 12. What is it now?") == 9


def test_a_variant_less_whole_than_the_original_or_of_another_shape_gives_none():
    question = "A baker makes 4 trays of 6 muffins and sells 7. How many remain?"
    worked = read_solution(question, "4 * 6 = 24. 24 - 7 = 17.", 17)
    assert not isinstance(worked, str)
    assert worked.answer_for("A baker makes 2 trays of 3 muffins and sells 9. How many remain?") is None  # -3 muffins
    assert worked.answer_for("A baker makes 4 trays of 6 muffins. How many remain?") is None  # another slot structure
    assert worked.answer_for("A baker makes 5 trays of 8 muffins and sells 9. How many remain?") == 31


@pytest.mark.parametrize("testbed", ["cpu-seed0", pytest.param("smollm-seed0", marks=pytest.mark.slow)])
def test_every_shipped_testbed_similar_answer_equals_the_templates_own(tmp_path, testbed):
    """On the shipped testbeds the templates' own computation is the truth: every re-solved answer of
    a generated similar or control equals it (none wrong), and most similars get one. The real-model
    testbed's questions carry their worked solution too (before, they did not: none of its controls
    had an answer, so reward gain and the gold answer's shift could not be calibrated on them)."""
    from pathlib import Path

    from generation.records import read_questions
    from probes.testbed.problems import TEMPLATES

    shipped = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints" / testbed
    questions = read_questions(shipped / "questions.jsonl")[:60]
    run_generation(questions, tmp_path / "sets.jsonl", GenerationConfig(controls=5))
    answered = total = 0
    for record in read_sets(tmp_path / "sets.jsonl"):
        info = record.question.extra["extra"]
        template = TEMPLATES[info["template"]]
        given = [*record.answers["similars"], *record.answers["controls"]]
        for text, answer in zip([*record.similars, *record.controls], given):
            total += 1
            if answer is None:
                continue
            answered += 1
            problem = text.split("\n", 1)[0]  # the real model's question: the problem, then the instruction
            numbers = _numbers_of(template.text, problem)
            assert answer == _plain_solve(template, numbers), (text, answer)
    assert total == 600 and answered / total > 0.85, (answered, total)  # 532 of 600: the rest negative or ambiguous


def _numbers_of(template_text: str, text: str) -> dict[str, int]:
    import re

    pattern = re.escape(template_text)
    pattern = pattern.replace(re.escape("{n}"), r"(?P<n>[A-Z][a-z]+)", 1).replace(re.escape("{n}"), r"(?P=n)")
    for k in "abcdefg":
        pattern = pattern.replace(re.escape("{%s}" % k), r"(?P<%s>\d+)" % k, 1).replace(
            re.escape("{%s}" % k), r"(?P=%s)" % k
        )
    match = re.fullmatch(pattern, text)
    assert match is not None, text
    return {k: int(v) for k, v in match.groupdict().items() if k != "n"}


def _plain_solve(template, numbers: dict[str, int]) -> int:
    """The template's steps, computed plainly (``problems.solve`` also refuses draws outside the
    testbed's size rules, which a similar may leave)."""
    values = dict(numbers)
    for left, op, right, result in template.steps:
        x, y = values[left], values[right]
        values[result] = {"+": x + y, "-": x - y, "*": x * y, "/": x // y}[op]
    return values[template.steps[-1][3]]


def test_sets_carry_the_answers_and_a_question_without_a_solution_carries_none(tmp_path):
    solved = Question(id="a", question=GUS, answer=28, extra={"solution": "6 * 2 = 12. 12 + 16 = 28."})
    bare = Question(id="b", question=GUS, answer=28)
    summary = run_generation([solved, bare], tmp_path / "sets.jsonl", GenerationConfig(similars=3, controls=2))
    lines = [json.loads(line) for line in (tmp_path / "sets.jsonl").read_text().splitlines()]
    assert len(lines[0]["answers"]["similars"]) == 3 and len(lines[0]["answers"]["controls"]) == 2
    assert "answers" not in lines[1]
    assert summary.answerable == 5 and 0 < summary.answered <= 5
    assert "answers re-solved from the worked solutions" in summary.describe()
    again = run_generation([solved, bare], tmp_path / "sets.jsonl", GenerationConfig(similars=3, controls=2))
    assert again.reused == 2  # the stamp is part of every set's settings, solved or not
    off = GenerationConfig(similars=3, controls=2, answers=False)
    with pytest.raises(Exception, match="other settings"):
        run_generation([solved, bare], tmp_path / "sets.jsonl", off)


def test_attach_answers_reads_the_solution_where_the_question_file_puts_it():
    from generation.records import empty_set

    record = empty_set(
        Question(id="a", question=GUS, answer=28, extra={"extra": {"solution": "6 * 2 = 12. 12 + 16 = 28."}}), 1, 1, {}
    )
    record.similars[0] = GUS.replace("16 loose", "20 loose")
    attach_answers(record)
    assert record.answers == {"similars": [32], "controls": []}
    assert record.provenance["answers"].startswith("worked-solution")


def test_the_real_model_testbeds_builder_writes_the_worked_solution_the_generator_reads():
    """``lara testbed build --preset smollm`` writes each question's worked solution where
    :func:`attach_answers` reads it, so a rebuilt testbed's controls get answers as the shipped one's do."""
    import dataclasses

    from generation.records import Question
    from probes.testbed.smollm import SmollmPreset, draw_splits, smollm_question_rows

    splits = draw_splits([15, 31], dataclasses.replace(SmollmPreset(), n_members=4, n_clean_ref=8), 0, set())
    rows = smollm_question_rows(splits)
    assert len(rows) == 16
    for row in rows:
        question = Question(**{k: row[k] for k in ("id", "question", "label", "answer", "split")}, extra=row["extra"])
        worked = read_solution(question.question, question.extra_value("solution"), question.answer)
        assert not isinstance(worked, str), (row["question"], worked)


def test_a_multiplier_on_a_steps_own_line_makes_its_number_a_constant():
    """'Dolly has two books … both read': ``3 books/person x 2 people`` sits on the line of "both", so
    its 2 is the two readers, not Dolly's books (before: five books gave 30, not 12); '2 + 1' is the books."""
    question = "Dolly has two books. Pandora has one. If both Dolly and Pandora read each others' books, how many books do they read?"
    solution = "There are 2 + 1 = <<2+1=3>>3 books in total.\nThey both read all 3 books, so 3 books/person x 2 people = <<3*2=6>>6 books total"
    answers, why = answers_for(question, solution, 6, [question.replace("two books", "five books")])
    assert why is None and answers == [12]


def test_a_percentage_and_a_count_of_the_same_value_are_told_apart_by_a_per_hundred():
    """'20 students, 20%': ``20 x 20/100`` — the 20 before ``/100`` is the percentage, the other the
    students (before: every way of reading them was tried, and they disagreed)."""
    question = "In a class of 20 students, 20% play chess. How many students do not play chess?"
    solution = "20 x 20/100 = <<20*20/100=4>>4 play chess.\nSo 20 - 4 = <<20-4=16>>16 do not."
    variant = "In a class of 40 students, 25% play chess. How many students do not play chess?"
    assert answers_for(question, solution, 16, [variant])[0] == [30]


def test_an_unknowns_coefficients_are_algebra_not_arithmetic():
    """'12A + 8A = 20A' reads no step (its 8 is 4 * 2 worked out in words), so '120 / 20' reads a
    result computed where no step shows it: no answer (before: $8 a small animal gave 10, not 240/56)."""
    question = (
        "Teresa sells large stuffed animals for three times the price of small ones. She sold twice as many small "
        "as large ones and earned $120. Each small one costs $4. How many small ones did she sell?"
    )
    solution = (
        "Large ones cost 3 * 4 = $<<3*4=12>>12.\nShe earned 12A + 4 * 2A = 12A + 8A = 20A = $120.\n"
        "So A = 120 / 20 = <<120/20=6>>6.\nShe sold 6 * 2 = <<6*2=12>>12 small ones."
    )
    answers, why = answers_for(question, solution, 12, [question.replace("$120", "$240").replace("$4", "$8")])
    assert answers == [None] and why.endswith("(20)"), why  # 20 = 12 + 4 * 2: nothing simpler writes it


def test_a_quantity_a_step_reads_in_another_form_is_no_distractor():
    """'The first two have 200 apartments each': ``200 + 200 = 400`` is two times 200, so "two" is read,
    only not as itself — no answer (before: four complexes still counted two)."""
    question = (
        "John has 3 complexes. The first two have 200 apartments each and the last one has 100. How many apartments?"
    )
    solution = "200 + 200 = <<200+200=400>>400\n400 + 100 = <<400+100=500>>500"
    answers, why = answers_for(question, solution, 500, [question.replace("two", "four").replace("3 ", "5 ")])
    assert answers == [None] and why is None  # a control keeps "two" and 200 (test above)
    # a quantity no form of which the solution shows changes nothing: a distractor
    question = "Ann has 7 red pens and 5 blue pens. Her sister is 30 years old. How many pens has Ann?"
    answers, why = answers_for(
        question, "7 + 5 = <<7+5=12>>12", 12, [question.replace("30", "40").replace("7 red", "9 red")]
    )
    assert why is None and answers == [14]


def test_a_unit_on_a_steps_line_makes_a_result_of_its_value_ambiguous():
    """'2*7=14 kgs of rice a week' after a result of 7: the 7 may be the week's days or that result,
    and both are read — they disagree on a similar, so no answer (before: the result was taken)."""
    question = (
        "Rice costs $20 per kg and the better one 35% more. He uses 2 kg a day for a week. What does the week cost?"
    )
    solution = "20*0.35=<<20*0.35=7>>7 more per kg\nSo 20+7=<<20+7=27>>27 per kg\nHe uses 2*7=<<2*7=14>>14 kgs a week\n27*14=<<27*14=378>>378"
    variant = (
        "Rice costs $30 per kg and the better one 40% more. He uses 3 kg a day for a week. What does the week cost?"
    )
    assert answers_for(question, solution, 378, [variant])[0] == [None]
    # a multiplier inside a longer word is none: "halfway" says nothing of the 2s that are results
    question = "James walks halfway to the store and back home, then to the store. His home is 4 miles away and he walks 4 miles per hour. How long does it take?"
    solution = "He walked 4/2=<<4/2=2>>2 miles there\nSo he walked 2+2+4=<<2+2+4=8>>8 miles, halfway and back\n8/4=<<8/4=2>>2 hours"
    variant = question.replace("4 miles away", "6 miles away").replace("4 miles per hour", "6 miles per hour")
    assert answers_for(question, solution, 2, [variant])[0] == [2]  # 6/2 = 3; 3 + 3 + 6 = 12; 12 / 6 = 2


def test_a_quantity_whose_value_a_step_states_in_words_is_not_read_as_it():
    """'12 inches=1 foot' states a 1 no step computes; '4*1' then reads that foot, not the stated
    '1 inch' — no answer where 12 or the inch change (before: 5 inches gave 6 * 5 for the feet)."""
    question = "Saskay lifts 12 times higher than Pompei, Kagiyami 4 times higher than Saskay. Pompei lifts 1 inch. How many feet does Kagiyami lift?"
    solution = "Saskay lifts 12*1=12 inches=1 foot.\nKagiyami lifts 4*1=<<4*1=4>>4 feet."
    variant = question.replace("12 times", "18 times").replace("4 times", "6 times").replace("1 inch", "5 inch")
    answers, why = answers_for(question, solution, 4, [variant, question.replace("4 times", "6 times")])
    assert answers == [None, None], answers  # 1 is written so many ways (12 / 12, 4 - 3 …) that it rests on all
