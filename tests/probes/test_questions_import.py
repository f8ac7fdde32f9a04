"""``lara questions import``: local datasets built with ``datasets`` in each preset's real schema
(save_to_disk, Parquet, JSON, JSONL, CSV), imported through the real loaders; ids, labels,
answers, chat questions and provenance come out right, and a hub name offline fails at once."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from generation.records import read_questions
from probes.cli import main

datasets = pytest.importorskip("datasets")

MATH = [
    {
        "problem": r"Find $\frac{1}{2} + \sqrt{x}$ when $x = 4$.",
        "solution": r"$\sqrt{4} = 2$, so $\boxed{\frac{5}{2}}$.",
        "answer": r"\frac{5}{2}",
        "subject": "Algebra",
        "level": 2,
        "unique_id": "test/algebra/1.json",
    },
    {
        "problem": r"How many integers $n$ satisfy $|n| < 3$?",
        "solution": r"$-2,\dots,2$: $\boxed{5}$.",
        "answer": "5",
        "subject": "Counting & Probability",
        "level": 1,
        "unique_id": "test/counting/7.json",
    },
]


def run_import(tmp_path: Path, source: Path | str, *flags: str) -> tuple[list, dict]:
    out = tmp_path / "q.jsonl"
    assert main(["-q", "questions", "import", str(source), "-o", str(out), *flags]) == 0
    return read_questions(out), json.loads(out.with_suffix(".meta.json").read_text())["provenance"][0]


def test_math500_from_a_saved_dataset_keeps_ids_latex_and_extras(tmp_path):
    datasets.Dataset.from_list(MATH).save_to_disk(str(tmp_path / "math500"))
    qs, prov = run_import(tmp_path, tmp_path / "math500", "--preset", "MATH-500", "--label", "0")
    assert [q.id for q in qs] == ["test/algebra/1.json", "test/counting/7.json"]
    assert qs[0].question == MATH[0]["problem"] and qs[0].answer == r"\frac{5}{2}"  # LaTeX untouched, byte for byte
    assert qs[0].extra == {"solution": MATH[0]["solution"], "subject": "Algebra", "level": 2}
    assert {q.label for q in qs} == {0} and qs[0].source == "math500"
    assert prov["kind"] == "saved dataset" and prov["fingerprint"] and prov["preset"] == "math500"
    assert prov["fields"] == {"id": "unique_id", "question": "problem", "answer": "answer"}


def test_aime2024_parquet_with_capitalised_columns(tmp_path):
    rows = [
        {"ID": "2024-I-1", "Problem": "Every morning Aya walks $9$ km.", "Solution": "…", "Answer": 204},
        {"ID": "2024-II-4", "Problem": "Let $x,y$ be reals.", "Solution": "…", "Answer": 33},
    ]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "aime.parquet"))
    qs, prov = run_import(tmp_path, tmp_path / "aime.parquet", "--preset", "aime2024", "--split-name", "clean_ref")
    assert [(q.id, q.answer, q.split) for q in qs] == [("2024-I-1", 204, "clean_ref"), ("2024-II-4", 33, "clean_ref")]
    assert prov["kind"] == "parquet" and len(prov["sha256"]) == 64 and prov["fields"]["question"] == "Problem"


def test_aime2025_jsonl_without_ids_gets_stable_text_hash_ids(tmp_path):
    rows = [
        {"question": "Find the sum of all bases $b > 9$.", "answer": "70"},
        {"question": "On $\\triangle ABC$ …", "answer": "588"},
    ]
    path = tmp_path / "aime25.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, _ = run_import(tmp_path, path, "--preset", "aime2025", "--label", "0")
    again, _ = run_import(tmp_path, path, "--preset", "aime2025", "--label", "0")
    assert [q.id for q in first] == [q.id for q in again] and all(
        q.id.startswith("q") and len(q.id) == 13 for q in first
    )
    assert [q.answer for q in first] == ["70", "588"] and first[1].question == rows[1]["question"]


def test_gsm8k_csv_final_answer_after_the_hashes(tmp_path):
    rows = [
        {"question": "Natalia sold clips to 48 friends …", "answer": "She sold 48/2 = 24 in May.\n48+24 = 72\n#### 72"},
        {"question": "A farm has 1,250 hens …", "answer": "It has 1,250 + 250 = 1,500.\n#### 1,500"},
    ]
    datasets.Dataset.from_list(rows).to_csv(str(tmp_path / "gsm8k.csv"), index=False)
    qs, prov = run_import(tmp_path, tmp_path / "gsm8k.csv", "--preset", "gsm8k")
    assert [q.answer for q in qs] == ["72", "1500"]
    assert qs[0].extra["solution"] == "She sold 48/2 = 24 in May.\n48+24 = 72" and prov["kind"] == "csv"


def test_amc23_json_and_minerva_datasetdict_split(tmp_path):
    amc = [
        {"id": 0, "question": "What is $2+2$?", "answer": 4.0},
        {"id": 1, "question": "What is $3^2$?", "answer": 9.0},
    ]
    datasets.Dataset.from_list(amc).to_json(str(tmp_path / "amc.json"))
    qs, _ = run_import(tmp_path, tmp_path / "amc.json", "--preset", "amc23", "--limit", "1")
    assert [(q.id, q.answer) for q in qs] == [("0", 4.0)]
    minerva = datasets.DatasetDict(
        {
            "test": datasets.Dataset.from_list([{"question": "Compute $e^{0}$.", "answer": "1"}]),
            "train": datasets.Dataset.from_list([{"question": "x", "answer": "y"}]),
        }
    )
    minerva.save_to_disk(str(tmp_path / "minerva"))
    qs, prov = run_import(tmp_path, tmp_path / "minerva", "--preset", "minerva")
    assert [q.question for q in qs] == ["Compute $e^{0}$."] and prov["split"] == "test"


def test_olympiadbench_list_answers_and_context(tmp_path):
    rows = [
        {"id": 1606, "question": "Find $n$.", "final_answer": ["$7$"], "context": None, "subfield": "Number Theory"},
        {
            "id": 1607,
            "question": "Find all $x$.",
            "final_answer": ["$1$", "$-1$"],
            "context": "Let $f(x) = x^2$.",
            "subfield": "Algebra",
        },
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ob"))
    qs, _ = run_import(tmp_path, tmp_path / "ob", "--preset", "olympiadbench")
    assert qs[0].answer == "$7$" and qs[1].answer == "$1$, $-1$" and qs[1].extra["answers"] == ["$1$", "$-1$"]
    assert qs[1].question == "Let $f(x) = x^2$.\n\nFind all $x$." and qs[0].question == "Find $n$."


def test_chat_format_rl_data_user_turn_system_turn_and_member_labels(tmp_path):
    system = "Please reason step by step, and put your final answer within \\boxed{}."
    rows = [
        {
            "data_source": "numina_olympiads",
            "ability": "math",
            "member": flag,
            "prompt": [{"role": "system", "content": system}, {"role": "user", "content": f"Solve ${k}x = {2 * k}$."}],
            "reward_model": {"ground_truth": "2", "style": "rule"},
            "extra_info": {"split": "train", "index": k},
        }
        for k, flag in ((3, True), (5, False))
    ]
    path = tmp_path / "rl.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qs, prov = run_import(tmp_path, path, "--preset", "chat")
    assert [q.question for q in qs] == ["Solve $3x = 6$.", "Solve $5x = 10$."]
    assert [q.label for q in qs] == [1, 0] and [q.answer for q in qs] == ["2", "2"]
    assert qs[0].extra["chat"] == {"system": system} and qs[0].source == "numina_olympiads" and qs[0].id == "3"
    assert prov["fields"]["prompt"] == "prompt" and prov["fields"]["answer"] == "reward_model.ground_truth"


def test_field_overrides_and_errors_name_what_to_fix(tmp_path, capsys):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"prompt_text": "What is 6*7?", "target": "42", "uid": "a"}) + "\n")
    qs, _ = run_import(tmp_path, path, "--field", "question=prompt_text", "--field", "answer=target")
    assert (qs[0].id, qs[0].question, qs[0].answer) == ("a", "What is 6*7?", "42")
    path.write_text(json.dumps({"body": "x"}) + "\n")
    assert main(["-q", "questions", "import", str(path), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "no question column among body" in capsys.readouterr().err
    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(json.dumps({"id": "same", "question": q}) + "\n" for q in ("a?", "b?")))
    # an id column found by the preset that repeats: text hashes instead, with a note (issue 21, item 8)
    assert main(["questions", "import", str(dup), "-o", str(tmp_path / "o.jsonl")]) == 0
    assert "note: ids from text hashes: the id column 'id' repeats ('same' on rows 0 and 1)" in capsys.readouterr().out
    assert [q.id for q in read_questions(tmp_path / "o.jsonl")] == [
        "q" + hashlib.sha256(f"\x00{q}".encode()).hexdigest()[:12] for q in ("a?", "b?")
    ]
    # one named with --field id= must be unique
    assert main(["-q", "questions", "import", str(dup), "--field", "id=id", "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "duplicate id 'same'" in capsys.readouterr().err
    assert main(["-q", "questions", "import", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_hub_name_offline_fails_at_once_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: the hub is unreachable
    start = time.perf_counter()
    assert (
        main(["questions", "import", "HuggingFaceH4/MATH-500", "--preset", "math500", "-o", str(tmp_path / "o.jsonl")])
        == 2
    )
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:") and "unreachable" in err and "save_to_disk" in err


def test_a_run_reports_an_imported_file_s_provenance_without_a_pairing(tmp_path):
    """Before: the report's provenance read ``meta['pairing']['inputs']`` even when there was no
    pairing, so every run on a file straight from `lara questions import` failed in its report."""
    from probes.questions.question_files import provenance_for_report, read_question_meta

    out = tmp_path / "gsm.jsonl"
    rows = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "Step.\n#### 7"}]
    source = tmp_path / "gsm.jsonl.src.json"
    source.write_text(json.dumps(rows))
    assert main(["questions", "import", str(source), "--preset", "gsm8k", "-o", str(out)]) == 0
    meta = read_question_meta(out)
    assert "pairing" not in meta
    assert provenance_for_report(out) == meta["provenance"] and meta["provenance"][0]["preset"] == "gsm8k"


SVAMP = [
    {
        "ID": "chal-1",
        "Body": "Each group of bananas has 290 bananas. There are 2 groups.",
        "Question": "How big is each group of bananas?",
        "Equation": "( 290.0 / 2.0 )",
        "Answer": 145.0,
        "Type": "Common-Division",
    },
    {
        "ID": "chal-2",
        "Body": "Jack had 8 pens and Mary had 5 pens. Jack gave 3 pens to Mary.",
        "Question": "How many pens does Jack have now?",
        "Equation": "( 8.0 - 3.0 )",
        "Answer": 5.0,
        "Type": "Subtraction",
    },
]


def test_a_two_column_problem_imported_without_a_preset_names_what_it_left_behind(tmp_path, capsys):
    """A benchmark whose facts sit in one column and its ask in another: imported without a map, the
    summary and the meta record name the text columns left unread, and the questions that state no
    number although their answer is one are counted and warned about; an integral float answer
    reads as the integer. With the facts mapped (or the svamp preset), the question is whole."""
    (tmp_path / "svamp.json").write_text(json.dumps(SVAMP))
    qs, prov = run_import(tmp_path, tmp_path / "svamp.json")
    shown = capsys.readouterr().out
    assert qs[0].question == "How big is each group of bananas?" and qs[0].answer == 145
    assert isinstance(qs[0].answer, int)
    assert prov["unused_text_columns"] == ["Body", "Equation"]
    assert prov["numberless"]["count"] == 2
    assert "text columns not imported: Body, Equation" in shown and "2 question(s) state no number" in shown
    qs, prov = run_import(tmp_path, tmp_path / "svamp.json", "--field", "context=Body")
    assert (
        qs[1].question
        == "Jack had 8 pens and Mary had 5 pens. Jack gave 3 pens to Mary.\n\nHow many pens does Jack have now?"
    )
    assert prov["unused_text_columns"] == ["Equation"] and prov["numberless"]["count"] == 0
    qs, prov = run_import(tmp_path, tmp_path / "svamp.json", "--preset", "svamp")
    assert (
        qs[0].question == "Each group of bananas has 290 bananas. There are 2 groups. How big is each group of bananas?"
    )
    assert (
        [q.id for q in qs] == ["chal-1", "chal-2"] and qs[1].answer == 5 and qs[1].extra["Equation"] == "( 8.0 - 3.0 )"
    )
    assert prov["unused_text_columns"] == [] and prov["numberless"]["count"] == 0
    assert qs[0].extra["solution"] == "290 / 2 = <<290/2=145>>145"  # the equation, as a worked solution
    assert prov["derived_solutions"] == {"derived": 2, "without": {}}


@pytest.mark.parametrize(
    "equation, answer, solution, why",
    [
        ("( ( 8.0 * 7.0 ) + 2.0 )", 58.0, "8 * 7 = <<8*7=56>>56\n56 + 2 = <<56+2=58>>58", None),
        ("( 9.0 / 2.0 )", 4.5, "9 / 2 = <<9/2=4.5>>4.5", None),
        ("( ( 4.0 - 8.0 ) + 5.0 )", 1.0, "4 - 8 = <<4-8=-4>>-4\n-4 + 5 = <<-4+5=1>>1", None),
        ("( ( 4.0 - 2.0 ) + 3.0 )", 1.0, None, "the equation does not give the answer: 5, not 1.0"),
        ("( 11.0 / 3.0 )", 3.67, None, "a step's value is no decimal of at most 6 places: 11/3"),
        ("8.0", 8.0, None, "the equation has no operation"),
        ("( x + 2.0 )", 3.0, None, "the equation holds more than numbers and + - * /: 'x'"),
        ("( 2.0 / 0.0 )", 1.0, None, "a step divides by zero"),
        ("( 2.0 +", 1.0, None, "the equation does not parse"),
    ],
)
def test_an_equation_becomes_a_worked_solution_or_says_why_not(equation, answer, solution, why):
    """SVAMP's equations as GSM8K-style annotated steps, innermost first, numbers as the question
    states them; never a solution that does not give the benchmark's answer."""
    from probes.questions.equations import worked_solution

    assert worked_solution(equation, answer) == (solution, why)
