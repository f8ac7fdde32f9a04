"""The offline generator on real benchmark text (the GSM8K and MATH-500 excerpts shipped in
``tests/fixtures/benchmarks``): controls re-solved from the worked solution, checked against each
problem's own formula written out here by hand; the numbers that state MATH's answer form kept; a
question that is one computation re-solved by sympy; seeded sets identical from run to run."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from generation.answers import attach_answers
from generation.config import GenerationConfig
from generation.numbers import find_slots
from generation.offline import OfflineGenerator
from generation.records import Question

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks"


def _gsm8k(index: int) -> Question:
    row = json.loads((FIXTURES / "gsm8k_test_excerpt.jsonl").read_text().splitlines()[index])
    solution, final = row["answer"].rsplit("####", 1)
    return Question(f"gsm8k-{index}", row["question"], answer=final.strip(), extra={"solution": solution})


def _math500(index: int) -> Question:
    row = json.loads((FIXTURES / "math500_test_excerpt.jsonl").read_text().splitlines()[index])
    return Question(row["unique_id"], row["problem"], answer=row["answer"], extra={"solution": row["solution"]})


def _sets(question: Question, controls: int = 5) -> list[tuple[str, object]]:
    record = OfflineGenerator(GenerationConfig(controls=controls), "test").generate(question)
    attach_answers(record)
    texts = [*record.similars, *record.controls]
    answers = [*record.answers["similars"], *record.answers["controls"]]
    return [(t, a) for t, a in zip(texts, answers) if t is not None]


# each problem's answer from its quantities (in order of appearance), computed by hand
FORMULAS = {
    0: lambda eggs, eaten, baked, price: (eggs - eaten - baked) * price,  # Janet's ducks
    3: lambda sprints, times, meters: (
        sprints * times * meters
    ),  # "3 sprints 3 times a week": one quantity, stated twice
    4: lambda cups, _meals, morning, afternoon, flock: cups * flock - morning - afternoon,  # Wendi's chickens
    5: lambda price, percent, glasses: glasses / 2 * (price * percent / 100) + glasses / 2 * price,  # Kylar's glasses
    6: lambda times, seattle: seattle + times * seattle + 2 * times * seattle,  # "twice": a constant
    7: lambda size, rate, percent, wait: size * percent / 100 / rate + size / rate + wait,  # Carla's download
}


@pytest.mark.parametrize("index", sorted(FORMULAS))
def test_gsm8k_controls_carry_the_answer_the_problem_gives_their_numbers(index):
    """Every re-solved answer of a GSM8K question's 10 controls equals its formula on the control's
    numbers, and most controls get one (the calculator annotations re-run: before, 29 % did)."""
    question = _gsm8k(index)
    found = _sets(question)
    answered = 0
    for text, answer in found:
        if answer is None:
            continue
        answered += 1
        values = [s.value for s in find_slots(text)]
        assert Fraction(answer) == Fraction(FORMULAS[index](*values)), (text, answer)
    assert answered >= 7, [a for _, a in found]


def test_the_gsm8k_excerpt_has_controls_with_answers_for_most_questions():
    """Of the 40 questions, at least 23 have 3 or more answer-bearing controls among their 10
    (25 measured; the whole test set's figure is bench_generator_sources.py's)."""
    enough = sum(sum(a is not None for _, a in _sets(_gsm8k(i))) >= 3 for i in range(40))
    assert enough >= 23, enough


def test_math500_keeps_the_numbers_that_state_the_answer_form():
    """'Enter your answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$' is
    the same in every similar: only the point changes (before, '< 6 \\pi' made another problem)."""
    question = _math500(0)
    form = question.question[question.question.index("Enter") :]
    assert [s.text for s in find_slots(question.question)] == ["3"]
    found = _sets(question, controls=0)
    assert found and all(text.endswith(form) and "(0,3)" not in text for text, _ in found)


def test_math500_arithmetic_in_latex_is_re_run():
    """'$f(x) = \\frac{3x-2}{x-2}$ … $f(-2) +f(-1)+f(0)$': the solution's chain of fractions is a
    program; each control's answer is the function's sum at its own numbers, as a LaTeX fraction."""
    question = _math500(2)
    answered = 0
    for text, answer in _sets(question):
        if answer is None:
            continue
        answered += 1
        a, b, c, d, e = [s.value for s in find_slots(text)]  # (a x - b) / (x - c); f(-d) + f(-e) + f(0)
        expected = sum((a * x - b) / (x - c) for x in (-d, -e, Fraction(0)))
        written = str(answer).replace("\\frac{", "").replace("}{", "/").replace("}", "")
        assert Fraction(written) == expected, (text, answer)
    assert answered >= 3


def test_a_question_that_is_one_computation_is_re_solved_by_sympy():
    from generation.answers import answers_for

    answers, why = answers_for(
        "Compute $\\dbinom{31}{28}$.", None, "4495", ["Compute $\\dbinom{33}{30}$.", "Compute $\\dbinom{20}{2}$."]
    )
    assert why is None and answers == ["5456", "190"]
    answers, why = answers_for("Simplify $\\sqrt{242}$.", None, "11\\sqrt2", ["Simplify $\\sqrt{300}$."])
    assert answers == ["10 \\sqrt{3}"]
    # a reading that does not give the known answer is not trusted
    answers, why = answers_for("Compute $\\dbinom{31}{28}$.", None, "4496", ["Compute $\\dbinom{33}{30}$."])
    assert answers == [None] and why


def test_seeded_sets_on_real_text_are_identical_from_run_to_run():
    questions = [_gsm8k(i) for i in range(10)] + [_math500(i) for i in range(10)]
    config = GenerationConfig(controls=5)
    first = [OfflineGenerator(config, "a").generate(q).to_json() for q in questions]
    again = [OfflineGenerator(config, "a").generate(q).to_json() for q in reversed(questions)]
    assert first == list(reversed(again))


def _svamp_questions() -> list:
    from probes.questions.importing import ImportOptions, import_questions
    from probes.questions.tables import TableSource

    result = import_questions(TableSource(str(FIXTURES / "svamp_excerpt.json")), ImportOptions(preset="svamp"))
    return result.questions


def _equation_on(equation: str, original: str, control: str) -> Fraction | None:
    """SVAMP's equation with each of the original question's numbers replaced by the control's
    number in the same place (None where a number repeats, so the mapping is ambiguous)."""
    before, after = [s.value for s in find_slots(original)], [s.value for s in find_slots(control)]
    if len(before) != len(after) or len(set(before)) != len(before):
        return None
    swap = {Fraction(str(b)): Fraction(str(a)) for b, a in zip(before, after)}
    import ast

    def value(node):
        if isinstance(node, ast.Constant):
            return swap.get(Fraction(str(node.value)), Fraction(str(node.value)))
        left, right = value(node.left), value(node.right)
        return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right, ast.Div: left / right}[
            type(node.op)
        ]

    return value(ast.parse(equation, mode="eval").body)


def test_svamp_controls_carry_the_answer_its_equation_gives_their_numbers():
    """SVAMP gives an equation instead of a worked solution: imported with its preset, the equation
    becomes one (one annotated step an operation), and every re-solved control answer equals the
    benchmark's equation evaluated on the control's numbers; most questions get 3 or more."""
    questions = _svamp_questions()
    assert sum("solution" in q.extra for q in questions) == 40
    checked = enough = 0
    for q in questions:
        question = Question(q.id, q.question, answer=q.answer, extra={"solution": q.extra["solution"]})
        found = _sets(question)
        enough += sum(a is not None for _, a in found) >= 3
        for text, answer in found:
            expected = _equation_on(q.extra["Equation"], q.question, text) if answer is not None else None
            if expected is not None:
                checked += 1
                assert Fraction(answer) == expected, (q.question, text, answer)
    assert checked >= 150 and enough >= 32, (checked, enough)
