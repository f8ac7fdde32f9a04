"""lm-evaluation-harness tasks as question sources (issue 44, item 1): a task built locally (JSON
data files, a ``doc_to_text`` template, a few-shot split; never a hub name) imported through
``lara questions import --lm-eval-task``; each question's text is byte-identical to the context
lm-eval renders for its document, as the audit formats it (raw, ``{prompt}``), and the task's
version and config digest are in the questions' provenance. Needs the lm-eval extra."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

lm_eval_tasks = pytest.importorskip("lm_eval.tasks")

from generation.records import read_questions  # noqa: E402
from probes.cli import main  # noqa: E402
from probes.errors import InputError  # noqa: E402
from probes.questions.importing import ImportOptions  # noqa: E402
from probes.questions.lm_eval_tasks import LmEvalSource, import_lm_eval_task  # noqa: E402
from probes.questions.question_files import read_question_meta  # noqa: E402
from probes.responders.prompting import PromptFormat, PromptTokens  # noqa: E402

TRAIN = [{"question": f"What is {a} plus {a + 1}?", "answer": str(2 * a + 1)} for a in range(1, 9)]
TEST = [{"question": f"What is {a} times 3?", "answer": str(3 * a)} for a in range(10, 16)]
CHOICE = [
    {"question": "Which is a colour?", "choices": ["red", "seven", "walk"], "label": 0},
    {"question": "Which is a number?", "choices": ["blue", "seven", "run"], "label": 1},
]


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture()
def tasks_dir(tmp_path: Path) -> Path:
    """Two local tasks: generation with a 2-shot context drawn from its train split, and multiple choice."""
    out = tmp_path / "tasks"
    out.mkdir()
    train, test, choice = _jsonl(tmp_path / "train.jsonl", TRAIN), _jsonl(tmp_path / "test.jsonl", TEST), ""
    choice = _jsonl(tmp_path / "choice.jsonl", CHOICE)
    (out / "toy_arith.yaml").write_text(
        f"""task: toy_arith
dataset_path: json
dataset_kwargs:
  data_files:
    train: {train}
    test: {test}
training_split: train
test_split: test
fewshot_split: train
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
num_fewshot: 2
generation_kwargs:
  until: ["\\n\\n"]
  do_sample: false
metric_list:
  - metric: exact_match
metadata:
  version: 2.0
"""
    )
    (out / "toy_choice.yaml").write_text(
        f"""task: toy_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {choice}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""
    )
    (out / "toy_group.yaml").write_text("group: toy_group\ntask:\n  - toy_arith\n  - toy_choice\n")
    return out


def _rendered(tasks_dir: Path, name: str, num_fewshot: int) -> tuple[dict[str, str], dict]:
    """What lm-eval renders itself: each test document's few-shot context (the sampler seeded as
    ``simple_evaluate`` seeds it), keyed as the import keys its questions; and the task's config."""
    manager = lm_eval_tasks.TaskManager(include_path=str(tasks_dir))
    task = manager.load(name)["tasks"][name]
    task.set_config(key="num_fewshot", value=num_fewshot)
    task.set_fewshot_seed(seed=1234)
    contexts = {
        f"{name}-{i}": task.fewshot_context(doc, num_fewshot, gen_prefix=task.doc_to_prefix(doc))
        for i, doc in enumerate(task.test_docs())
    }
    return contexts, task.dump_config()


def _audited(prompt: str) -> str:
    """The text a local model is given for a question under the run's raw ``{prompt}`` format."""

    class Raw(PromptTokens):
        tokenizer, max_positions = None, None

    raw = Raw()
    raw.use_prompt_format(PromptFormat(mode="raw", template="{prompt}"))
    return raw.format(prompt)


def test_the_audited_prompt_is_what_lm_eval_renders_with_its_few_shot_context(tasks_dir, tmp_path, capsys):
    out = tmp_path / "arith.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_arith", "--include-path", str(tasks_dir)]
    assert main([*argv, "--num-fewshot", "task", "--label", "1", "-o", str(out)]) == 0
    questions = read_questions(out)
    expected, config = _rendered(tasks_dir, "toy_arith", 2)
    assert [q.id for q in questions] == list(expected)
    for q, doc in zip(questions, TEST):
        assert _audited(q.question) == expected[q.id]
        assert q.question.endswith(f"Question: {doc['question']}\nAnswer:") and q.question.count("Question:") == 3
        assert q.answer == doc["answer"] and q.label == 1
    task = read_question_meta(out)["provenance"][0]["tasks"][0]
    assert task["task"] == "toy_arith" and task["version"] == 2.0 and task["num_fewshot"] == 2
    assert task["config_sha256"] == hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    assert "6 questions" in capsys.readouterr().out


def test_without_few_shot_the_question_is_the_bare_doc_to_text_prompt(tasks_dir, tmp_path):
    out = tmp_path / "bare.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_arith", "--include-path", str(tasks_dir)]
    assert main([*argv, "--limit", "3", "-o", str(out)]) == 0
    questions = read_questions(out)
    assert [q.question for q in questions] == [f"Question: {d['question']}\nAnswer:" for d in TEST[:3]]
    provenance = read_question_meta(out)["provenance"][0]
    assert provenance["num_fewshot"] == 0
    assert provenance["rows"] == len(TEST) and provenance["skipped"] == {"beyond --limit": len(TEST) - 3}


def test_a_multiple_choice_task_s_answer_is_the_right_choice_s_text(tasks_dir, tmp_path):
    out = tmp_path / "choice.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_choice", "--include-path", str(tasks_dir), "-o", str(out)]
    assert main(argv) == 0
    assert [(q.question, q.answer) for q in read_questions(out)] == [
        ("Which is a colour?", "red"),
        ("Which is a number?", "seven"),
    ]


def test_a_group_imports_every_task_under_it(tasks_dir, tmp_path):
    out = tmp_path / "group.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_group", "--include-path", str(tasks_dir), "-o", str(out)]
    assert main(argv) == 0
    ids = [q.id for q in read_questions(out)]
    assert sorted(ids) == sorted([f"toy_arith-{i}" for i in range(len(TEST))] + ["toy_choice-0", "toy_choice-1"])
    tasks = read_question_meta(out)["provenance"][0]["tasks"]
    assert sorted(t["task"] for t in tasks) == ["toy_arith", "toy_choice"]
    limited = tmp_path / "limited.jsonl"  # --limit counts across the group's tasks, as the harness renders them
    assert main([*argv[:-2], "--limit", str(len(TEST) + 1), "-o", str(limited)]) == 0
    assert len(read_questions(limited)) == len(TEST) + 1
    counts = {t["task"]: (t["documents"], t["imported"]) for t in read_question_meta(limited)["provenance"][0]["tasks"]}
    assert counts == {"toy_arith": (len(TEST), len(TEST)), "toy_choice": (2, 1)}


def test_an_unknown_task_and_table_flags_are_refused_in_one_line(tasks_dir, tmp_path, capsys):
    base = ["questions", "import", "--include-path", str(tasks_dir), "-o", str(tmp_path / "q.jsonl")]
    assert main([*base, "--lm-eval-task", "no_such_task"]) == 2
    assert "no task named 'no_such_task'" in capsys.readouterr().err
    assert main([*base, "--lm-eval-task", "toy_arith", "--preset", "gsm8k"]) == 2
    assert "--preset do not apply" in capsys.readouterr().err
    assert main([*base, "data.jsonl", "--lm-eval-task", "toy_arith"]) == 2
    assert "one of the two" in capsys.readouterr().err
    with pytest.raises(InputError, match="--where do not apply"):  # the Python entry refuses them too
        import_lm_eval_task(LmEvalSource("toy_arith", str(tasks_dir)), ImportOptions(where={"question": "x"}))
