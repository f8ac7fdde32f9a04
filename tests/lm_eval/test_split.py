"""Back to the harness (issue 44, item 3): ``lara questions split RUN`` on a run whose questions were
imported from a local lm-eval task writes an lm-eval task per subset; lm-eval's own loader loads it,
and its documents are exactly the subset's, in order. Needs the lm-eval extra."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

lm_eval_tasks = pytest.importorskip("lm_eval.tasks")

from generation.records import read_questions  # noqa: E402
from probes.cli import main  # noqa: E402

from .test_lm_eval_import import TEST, tasks_dir  # noqa: E402,F401  (the fixture)


def _fake_run(tmp_path: Path, questions: Path, flagged: dict[str, str]) -> Path:
    """A run directory as `lara run` leaves it, reduced to what the split reads: the resolved
    config and the audited model's decisions."""
    run = tmp_path / "run"
    (run / "rl").mkdir(parents=True)
    (run / "config.resolved.yaml").write_text(yaml.safe_dump({"questions": str(questions), "name": "rl"}))
    with (run / "rl" / "questions.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "rank", "mode", "p_value", "q_value", "flagged"])
        for rank, (qid, flag) in enumerate(flagged.items(), start=1):
            writer.writerow([qid, rank, "reference", 0.01 * rank, 0.02 * rank, flag])
    return run


def test_the_split_task_loads_through_lm_eval_with_exactly_the_not_flagged_documents(tasks_dir, tmp_path, capsys):  # noqa: F811
    questions = tmp_path / "arith.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_arith", "--include-path", str(tasks_dir)]
    assert main([*argv, "--num-fewshot", "task", "-o", str(questions)]) == 0
    ids = [q.id for q in read_questions(questions)]
    flags = {qid: "1" if i in (1, 4) else "0" for i, qid in enumerate(ids)}
    run = _fake_run(tmp_path, questions, flags)
    out = tmp_path / "split"
    assert main(["questions", "split", str(run), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 not flagged question(s)" in printed and "toy_arith_not_flagged" in printed
    assert [q.id for q in read_questions(out / "not_flagged.jsonl")] == [i for i in ids if flags[i] == "0"]
    assert [q.id for q in read_questions(out / "flagged.jsonl")] == [ids[1], ids[4]]

    manager = lm_eval_tasks.TaskManager(include_path=str(out / "lm_eval"))
    for subset, keep in (("not_flagged", "0"), ("flagged", "1")):
        task = manager.load(f"toy_arith_{subset}")["tasks"][f"toy_arith_{subset}"]
        expected = [doc for doc, qid in zip(TEST, ids) if flags[qid] == keep]
        assert [dict(d) for d in task.eval_docs] == expected
        # the harness's own prompt for each kept document: the task's template and its few-shot split
        task.set_config(key="num_fewshot", value=2)
        task.set_fewshot_seed(seed=1234)
        for doc in task.eval_docs:
            context = task.fewshot_context(doc, 2, gen_prefix=task.doc_to_prefix(doc))
            assert context.endswith(f"Question: {doc['question']}\nAnswer:") and context.count("Question:") == 3
    meta = json.loads((out / "not_flagged.meta.json").read_text())
    assert meta["split_from"]["subset"] == "not_flagged" and meta["provenance"][0]["kind"] == "lm_eval_task"


def test_a_run_without_calibrated_decisions_is_refused(tasks_dir, tmp_path, capsys):  # noqa: F811
    questions = tmp_path / "arith.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_arith", "--include-path", str(tasks_dir)]
    assert main([*argv, "-o", str(questions)]) == 0
    run = _fake_run(tmp_path, questions, {q.id: "" for q in read_questions(questions)})
    assert main(["questions", "split", str(run), "-o", str(tmp_path / "out")]) == 2
    assert "no calibrated decisions" in capsys.readouterr().err


def test_the_split_tasks_move_with_their_directory(tasks_dir, tmp_path, capsys, monkeypatch):  # noqa: F811
    """Issue 55: the split's YAMLs named their data by absolute paths, so the directory could not move.
    Now no path in it is absolute: copied elsewhere with the task it includes (its originals
    gone), and read from another working directory, each task loads exactly its documents."""
    import shutil

    questions = tmp_path / "arith.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_arith", "--include-path", str(tasks_dir)]
    assert main([*argv, "--num-fewshot", "task", "-o", str(questions)]) == 0
    ids = [q.id for q in read_questions(questions)]
    flags = {qid: "1" if i in (0, 2) else "0" for i, qid in enumerate(ids)}
    out = tmp_path / "work" / "split"
    assert main(["questions", "split", str(_fake_run(tmp_path, questions, flags)), "-o", str(out)]) == 0
    capsys.readouterr()
    for written in (out / "lm_eval").iterdir():
        assert str(tmp_path) not in written.read_text(), written.name
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "work", moved / "work")
    shutil.copytree(tasks_dir, moved / tasks_dir.name)
    shutil.rmtree(tmp_path / "work")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    manager = lm_eval_tasks.TaskManager(include_path=str(moved / "work" / "split" / "lm_eval"))
    task = manager.load("toy_arith_flagged")["tasks"]["toy_arith_flagged"]
    assert [dict(d) for d in task.eval_docs] == [TEST[0], TEST[2]]
