"""The paper's setup (configs/eurus-2-7b-prime.yaml) builds its questions with the import commands
written in its header. Here those very lines run on local look-alikes of the two hub datasets
(Eurus-2-RL-Data's chat schema, MathArena's AIME schema), built with ``datasets``.

The Eurus look-alike follows the real data where it matters (issue 21, item 8): ``data_source``
values are ``numina_olympiads``, ``numina_cn_k12``, ``numina_amc_aime``; ``extra_info.index`` is
not unique; every user turn ends with the answer-format instruction that only members would carry.
Before, the config filtered on ``olympiads`` (0 rows of the real data, reported as "empty table"),
a repeated index failed the import, and the instruction stayed in the members' text."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from generation.records import read_questions
from probes.cli import main
from probes.pipeline import load_run_config

datasets = pytest.importorskip("datasets")

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "eurus-2-7b-prime.yaml"
SYSTEM = "Your task is to follow a systematic, thorough reasoning process before providing the final solution."
SUFFIX = "\n\nPresent the answer in LaTex format: \\boxed{Your answer}"


def eurus_like(root: Path) -> Path:
    rows = []
    for k in range(90):
        source = ("numina_olympiads", "numina_cn_k12", "numina_amc_aime")[k % 3]
        rows.append(
            {
                "data_source": source,
                "ability": "math",
                "reward_model": {"ground_truth": str(k), "style": "rule"},
                "extra_info": {"split": "train", "index": k % 20},  # not unique, as in the real data
                "prompt": [
                    {"role": "system", "content": SYSTEM},
                    {
                        "role": "user",
                        "content": f"Determine the largest even integer below ${100 + k}$ that is not "
                        f"a sum of two odd composites.{SUFFIX}",
                    },
                ],
            }
        )
    path = root / "eurus"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows), "validation": datasets.Dataset.from_list(rows[:3])}
    ).save_to_disk(str(path))
    return path


def aime_like(root: Path) -> Path:
    rows = [
        {
            "problem_idx": k,
            "problem": f"Find the number of ordered pairs $(x, y)$ with $x + y = {k + 7}$ and $xy > {k}$.",
            "answer": str(k * 3),
            "problem_type": ["Combinatorics"],
        }
        for k in range(1, 31)
    ]
    path = root / "aime"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
    return path


def test_the_header_commands_build_the_papers_question_file(tmp_path, capsys):
    local = {"PRIME-RL/Eurus-2-RL-Data": str(eurus_like(tmp_path)), "MathArena/aime_2026": str(aime_like(tmp_path))}
    commands = [
        line.lstrip("#").strip()
        for line in CONFIG.read_text().splitlines()
        if line.lstrip("# ").startswith("lara questions")
    ]
    assert len(commands) == 3
    for command in commands:
        argv = [local.get(a, a.replace("configs/", f"{tmp_path}/")) for a in shlex.split(command)[1:]]
        assert main(["-q", *argv]) == 0, command
    questions = read_questions(tmp_path / "eurus-questions.jsonl")
    members = [q for q in questions if q.label == 1]
    assert len(members) == 30 and sum(q.label == 0 for q in questions) == 30
    assert all(q.source == "numina_olympiads" and q.extra["chat"] == {"system": SYSTEM} for q in members)
    assert all(q.question.startswith("Determine the largest even integer") for q in members)
    assert all(q.question.endswith("odd composites.") for q in members)  # the members-only instruction is gone
    assert all(q.id.startswith("q") and len(q.id) == 13 for q in members)  # text hashes: the index repeats
    meta = json.loads((tmp_path / "eurus-questions.meta.json").read_text())
    members_meta = meta["provenance"][0]
    assert [p["where"] for p in meta["provenance"]] == [{"data_source": "numina_olympiads"}, None]
    assert members_meta["rows_selected"] == 30 and members_meta["sample"] == 30
    assert members_meta["strip_suffix"] == SUFFIX and members_meta["suffix"] == {"stripped": 30, "absent": 0}
    assert "ids from text hashes" in members_meta["ids_note"] and "extra_info.index" in members_meta["ids_note"]
    config = load_run_config(CONFIG, [f"questions={tmp_path / 'eurus-questions.jsonl'}"])
    assert (
        Path(config.questions) == tmp_path / "eurus-questions.jsonl"
        and config.model.source == "PRIME-RL/Eurus-2-7B-PRIME"
    )


def test_a_filter_that_matches_nothing_says_so_with_the_values_there_are(tmp_path, capsys):
    path = eurus_like(tmp_path)
    capsys.readouterr()
    assert (
        main(
            [
                "questions",
                "import",
                str(path),
                "--split",
                "train",
                "--preset",
                "chat",
                "--where",
                "data_source=olympiads",
                "-o",
                str(tmp_path / "m.jsonl"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "0 of 90 rows matched" in err and "'numina_olympiads' (30)" in err


def test_without_the_question_file_the_run_says_how_to_build_it(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                str(CONFIG),
                "--set",
                f"questions={tmp_path / 'missing.jsonl'}",
                "--set",
                f"run_dir={tmp_path / 'run'}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "questions file not found" in err and "lara questions import" in err
