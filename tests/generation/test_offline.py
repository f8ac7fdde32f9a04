"""The offline backend: acceptance on the question bank, determinism, and awkward questions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from generation import records as r
from generation.config import GenerationConfig
from generation.numbers import find_slots, math_spans
from generation.offline import OfflineGenerator
from generation.pipeline import run_generation
from generation.question_bank import TEMPLATES, sample_questions
from generation.records import PerturbationSet, Question, unexplained_gaps
from generation.validate import check_set


def generate(text: str, **config: object) -> PerturbationSet:
    return OfflineGenerator(GenerationConfig.from_dict(config), "test").generate(Question(id="x", question=text))


def test_bank_has_twenty_plus_templates_in_four_families() -> None:
    assert len(TEMPLATES) >= 20
    assert {t.family for t in TEMPLATES} == {"arithmetic", "geometry", "probability", "algebra"}


@pytest.mark.slow
def test_acceptance_200_questions_complete_valid_and_byte_identical(tmp_path: Path) -> None:
    questions = sample_questions(200, seed=7)
    assert len({q.source for q in questions}) >= 20
    config = GenerationConfig()  # K=5, M=5, k=1
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    summary = run_generation(questions, first, config)
    run_generation(questions, second, config)
    assert first.read_bytes() == second.read_bytes()

    sets = [PerturbationSet.from_dict(json.loads(line)) for line in first.read_text().splitlines()]
    assert [s.question.id for s in sets] == [q.id for q in questions]
    complete = sum(s.complete for s in sets)
    assert complete / len(sets) >= 0.95 and summary.complete == complete
    for s in sets:
        assert check_set(s, k=1) == [], s.question.id
        assert unexplained_gaps(s) == [], s.question.id
        if s.complete:
            assert len(s.similars) == 5 and len(s.blanked) == 6 and all(len(row) == 5 for row in s.paraphrases)
            assert all(b.count(r.BLANK) == 1 for b in s.blanked if b)

    other_seed = tmp_path / "c.jsonl"
    run_generation(questions, other_seed, GenerationConfig(seed=8))
    assert other_seed.read_bytes() != first.read_bytes()


def test_a_set_does_not_depend_on_the_rest_of_the_job() -> None:
    questions = sample_questions(30, seed=3)
    generator = OfflineGenerator(GenerationConfig(), "test")
    alone = generator.generate(questions[17]).to_json()
    assert [generator.generate(q).to_json() for q in reversed(questions)][30 - 1 - 17] == alone


def test_question_without_numbers_is_a_recorded_failure() -> None:
    record = generate("What is the capital of France?")
    assert not record.complete
    assert {f.reason for f in record.failures} == {r.NO_NUMBERS}
    assert {f.step for f in record.failures} == set(r.STEPS)
    assert unexplained_gaps(record) == []


def test_a_quantity_that_cannot_keep_its_digits_still_varies() -> None:
    """GSM-Symbolic's templates (questions nobody here wrote) say "100%": a percentage stays at
    most 99, which has one digit fewer. Before, the relation-keeping draw insisted on 3 digits and
    the generator raised ValueError, ending the whole job."""
    record = generate("A shop sells 40 pens. It sells 100% of them on Monday and 12 more on Tuesday. How many pens?")
    assert record.complete and all(s is not None and "100%" not in s for s in record.similars)


def test_same_slot_is_blanked_in_every_member_and_the_rest_is_kept() -> None:
    record = generate("A train travels 120 km in 2 hours and then 45 km more. What is its average speed?")
    assert record.complete
    assert record.key_information == "the distance measurement"
    for member, blanked in zip([record.question.question, *record.similars], record.blanked):
        assert member is not None and blanked is not None
        assert blanked.startswith("A train travels [BLANK] km in ")
        assert [s.text for s in find_slots(blanked)] == [s.text for s in find_slots(member)][1:]


def test_latex_units_decimals_negatives_and_fractions() -> None:
    record = generate("At $-3.5$ degrees, ice of mass 2.25 kg warms. Solve $\\frac{3}{4}x - 7 = -12.5$ for $x$ in kg.")
    assert record.complete, record.failures
    for similar in record.similars:
        assert similar is not None
        assert similar.count("$") == 6 and "\\frac{" in similar and " kg" in similar
        slots = find_slots(similar)
        assert [s.kind for s in slots] == ["decimal", "decimal", "latex_fraction", "int", "decimal"]
        assert slots[0].decimals == 1 and slots[1].decimals == 2
        assert "$-" in similar and "= -" in similar  # signs stay
        assert slots[2].value < 1  # proper fraction stays proper
    assert (
        record.blanked[0]
        == "At $[BLANK]$ degrees, ice of mass 2.25 kg warms. Solve $\\frac{3}{4}x - 7 = -12.5$ for $x$ in kg."
    )
    for blanked, row in zip(record.blanked, record.paraphrases):
        assert blanked is not None
        latex = [blanked[a:b] for a, b in math_spans(blanked)]
        assert len(latex) == 3
        for paraphrase in row:
            assert paraphrase is not None and all(span in paraphrase for span in latex)


def test_repeated_quantity_gets_one_new_value_and_order_is_kept() -> None:
    record = generate("Tom has 12 marbles and gives 5 to Ann. Ann now has 12 marbles too. How many does Tom keep?")
    for similar in record.similars:
        assert similar is not None
        first, second, third = (s.value for s in find_slots(similar))
        assert first == third and second < first


def test_paraphrases_never_touch_markers_numbers_or_latex() -> None:
    record = generate("If $x + y = 10$ and each of the 3 boxes holds 4.5 kg, what is the total mass in kg?")
    assert record.complete
    for blanked, row in zip(record.blanked, record.paraphrases):
        assert blanked is not None
        protected = Counter(s.text for s in find_slots(blanked))
        for paraphrase in row:
            assert paraphrase is not None and paraphrase.count(r.BLANK) == 1
            assert Counter(s.text for s in find_slots(paraphrase)) == protected
            assert "$x + y = " in paraphrase


@pytest.mark.parametrize("blanks", [2, 3])
def test_several_blanks(blanks: int) -> None:
    record = generate("Buy 3 pens at $2 and 4 pads at $5. What is the total cost?", blanks=blanks)
    assert record.complete
    assert all(b is not None and b.count(r.BLANK) == blanks for b in record.blanked)
    assert all(p is not None and p.count(r.BLANK) == blanks for row in record.paraphrases for p in row)


def test_too_few_quantities_for_the_blanks_is_recorded() -> None:
    record = generate("A fair coin is tossed 3 times. What is the chance of three heads?", blanks=3)
    assert not record.complete
    assert r.TOO_FEW_VALUES in {f.reason for f in record.failures}
    assert unexplained_gaps(record) == []


def test_little_room_to_vary_is_recorded_not_crashed() -> None:
    record = generate("Pick 1 card.", similars=12)
    assert not record.complete
    assert {f.reason for f in record.failures if f.step == "similars"} == {r.NOT_ENOUGH_DISTINCT}
    assert unexplained_gaps(record) == []
    assert check_set(record, k=1) == []


DEMO_QUESTIONS = (
    Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints" / "cpu-seed0" / "questions.jsonl"
)


def _controls_drawn(questions: list[Question], extra: int) -> dict[str, list[str]]:
    """Each question's valid similars then further controls, as the demo's settings draw them
    (K = 5 and ``extra`` further controls; the draws alone, without blanks or paraphrases)."""
    import dataclasses

    generator = OfflineGenerator(dataclasses.replace(GenerationConfig(seed=0, similars=5), controls=extra), "test")
    drawn, gaps = {}, {}
    for q in questions:
        record = r.empty_set(q, 5, 5, {}, extra)
        generator._fill_draws(record, q, find_slots(q.question))
        drawn[q.id] = [t for t in [*record.similars, *record.controls] if t is not None]
        gaps[q.id] = [g for g in unexplained_gaps(record) if g.startswith(("similars", "controls"))]
    return drawn, gaps


def _check_prefix_stable(questions: list[Question]) -> None:
    (narrow, _), (wide, wide_gaps) = _controls_drawn(questions, 5), _controls_drawn(questions, 15)
    changed = [i for i in narrow if wide[i][: len(narrow[i])] != narrow[i]]
    assert not changed, f"{len(changed)} of {len(narrow)} questions draw other first controls when more are asked for"
    # a failure records every control short of the 20 asked for (a template that runs out of distinct
    # variants: 2 of the 400 demo questions stop at 5 and 6 in both draws); a full narrow draw grows
    assert all(wide_gaps[i] == [] for i in narrow)
    assert all(len(wide[i]) > len(narrow[i]) for i in narrow if len(narrow[i]) == 10)


@pytest.mark.slow
def test_asking_for_more_controls_only_adds_on_the_first_demo_questions() -> None:
    """Issue 55: 20 of the demo's first 60 questions drew other first 10 controls in a 20-control
    draw (the relaxation schedule followed the total count); each similar now has its own draws."""
    from generation.records import read_questions

    _check_prefix_stable(read_questions(DEMO_QUESTIONS)[:30])


@pytest.mark.slow
def test_asking_for_more_controls_only_adds_on_every_demo_question() -> None:
    """The same on all 400 demo questions (139 of them differed before; about 3 minutes)."""
    from generation.records import read_questions

    _check_prefix_stable(read_questions(DEMO_QUESTIONS))
