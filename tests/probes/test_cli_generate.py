"""``lara generate``: offline and LLM runs, user errors, and a SIGKILL mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generation.question_bank import sample_questions
from generation.records import Question, write_questions
from probes.cli import main
from tests.generation.fake_llm import FakeLLMServer

REPO = Path(__file__).resolve().parents[2]


def test_offline_generate_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = tmp_path / "q.jsonl"
    write_questions(
        [*sample_questions(12, seed=1), Question(id="words", question="Name the capital of France.")], questions
    )
    out = tmp_path / "sets.jsonl"
    assert main(["generate", str(questions), "-o", str(out), "-K", "3", "-M", "2", "--seed", "5", "--no-progress"]) == 0
    shown = capsys.readouterr().out
    assert "13 questions: 12 complete sets, 1 incomplete (13 generated, 0 reused)" in shown
    assert "failures by reason: no_numbers 4" in shown
    first = json.loads(out.read_text().splitlines()[0])
    assert len(first["similars"]) == 3 and all(len(row) == 2 for row in first["paraphrases"])
    assert first["provenance"]["seed"] == 5

    assert main(["generate", str(questions), "-o", str(out), "-K", "3", "-M", "2", "--seed", "5", "--no-progress"]) == 0
    assert "(0 generated, 13 reused)" in capsys.readouterr().out

    assert main(["generate", str(questions), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "other settings (paraphrases: 2 there, 5 now" in err and "--overwrite" in err


@pytest.mark.parametrize(
    "args, config, message",
    [
        (["-K", "1"], None, "'similars' (K) must be at least 2"),
        (["--blanks", "0"], None, "'blanks' must be positive"),
        ([], "similar: 3\n", "unknown config key 'similar'; did you mean 'similars'?"),
        ([], "openai:\n  concurrency: many\n", "'openai.concurrency' must be of type int"),
        (
            [],
            "openai:\n  temperature:\n    paraphrase: 1\n",
            "unknown config key 'openai.temperature.paraphrase'; did you mean 'paraphrases'?",
        ),
    ],
)
def test_bad_settings_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], config: str | None, message: str
) -> None:
    questions = tmp_path / "q.jsonl"
    write_questions(sample_questions(2), questions)
    if config is not None:
        (tmp_path / "c.yaml").write_text(config)
        args = [*args, "--config", str(tmp_path / "c.yaml")]
    assert main(["generate", str(questions), "-o", str(tmp_path / "s.jsonl"), "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": 1}', "q.jsonl:2: missing required key 'question'"),
        ('{"id": "a", "question": "x"}', "q.jsonl:2: duplicate id 'a' (first on line 1)"),
        ('{"id": 2, "question": "x", "label": 2}', "q.jsonl:2: 'label' must be 1 (member), 0 (clean) or null"),
        ("not json", "q.jsonl:2: not valid JSON"),
    ],
)
def test_bad_questions_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "Add 2 and 3."}\n' + line + "\n")
    assert main(["generate", str(questions), "-o", str(tmp_path / "s.jsonl"), "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_paper_config_file_loads() -> None:
    from generation.config import GenerationConfig

    config = GenerationConfig.from_yaml(REPO / "configs" / "generation.openrouter.yaml")
    assert config.backend == "openai" and config.openai.model == "openai/gpt-4o-mini"
    assert (
        config.openai.base_url == "https://openrouter.ai/api/v1" and config.openai.api_key_env == "OPENROUTER_API_KEY"
    )
    assert (config.similars, config.paraphrases, config.blanks) == (5, 5, 1)


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    write_questions(
        [
            Question(
                id=f"q{i}",
                question=f"Shop {i} has {12 + i} apples and sells {3 + i % 4} of them. How many apples are left?",
            )
            for i in range(24)
        ],
        questions,
    )
    env = {**os.environ, "LARA_TEST_KEY": "sk-test", "PYTHONPATH": str(REPO)}

    def config(name: str, server: FakeLLMServer) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            "backend: openai\nopenai:\n"
            f"  base_url: {server.base_url}\n  model: fake\n  api_key_env: LARA_TEST_KEY\n"
            f"  cache_dir: {tmp_path / (name + '-cache')}\n  concurrency: 2\n  backoff_s: 0.01\n"
        )
        return path

    def command(cfg: Path, out: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "probes.cli",
            "generate",
            str(questions),
            "-o",
            str(out),
            "--config",
            str(cfg),
            "--no-progress",
        ]

    with FakeLLMServer(latency=0.02) as server:
        reference = tmp_path / "reference.jsonl"
        subprocess.run(
            command(config("reference", server), reference), env=env, check=True, capture_output=True, cwd=tmp_path
        )
        full_run_requests = server.requests

        out = tmp_path / "sets.jsonl"
        journal = tmp_path / "sets.jsonl.partial"
        cfg = config("killed", server)
        before = server.requests
        proc = subprocess.Popen(
            command(cfg, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not journal.exists() or len(journal.read_text().splitlines()) < 1 + 6):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_requests = server.requests - before
        assert not out.exists() and journal.exists()
        finished_before_kill = len(journal.read_text().splitlines()) - 1
        assert 6 <= finished_before_kill < 24

        before = server.requests
        result = subprocess.run(command(cfg, out), env=env, capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        resumed_requests = server.requests - before

    assert out.read_bytes() == reference.read_bytes()
    assert not journal.exists()
    assert f"({24 - finished_before_kill} generated, {finished_before_kill} reused)" in result.stdout
    # nothing answered before the kill is asked again; only requests in flight (<= concurrency) are repeated
    assert full_run_requests <= killed_requests + resumed_requests <= full_run_requests + 2


def test_every_bad_line_of_a_questions_file_is_named_in_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, item 8: a file with three bad lines took three runs (each loading the model in
    ``lara detect``); one run now names them all, in one line."""
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "x"}\nnot json\n{"id": "b"}\n{"id": "a", "question": "y"}\n')
    assert (
        main(["detect", "ppl", str(questions), "--model", str(tmp_path / "none"), "-o", str(tmp_path / "s.csv")]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: 3 bad lines: ")
    for part in (
        "q.jsonl:2: not valid JSON",
        "q.jsonl:3: missing required key 'question'",
        "q.jsonl:4: duplicate id 'a'",
    ):
        assert part in err


def test_a_table_given_as_questions_points_to_the_importer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35, item 8: ``lara detect`` on a CSV said "not valid JSON (Expecting value at column 1)"."""
    table = tmp_path / "q.csv"
    table.write_text("id,question\na,What is 2+2?\n")
    assert main(["detect", "ppl", str(table), "--model", str(tmp_path / "none"), "-o", str(tmp_path / "s.csv")]) == 2
    assert f"convert it with `lara questions import {table} -o questions.jsonl`" in capsys.readouterr().err
    same = tmp_path / "q.txt"  # a table under another name: every line fails, so the hint follows
    same.write_text(table.read_text())
    assert main(["detect", "ppl", str(same), "--model", str(tmp_path / "none"), "-o", str(tmp_path / "s.csv")]) == 2
    assert "is it a table? convert it with `lara questions import" in capsys.readouterr().err
