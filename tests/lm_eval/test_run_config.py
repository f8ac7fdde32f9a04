"""A run that names an lm-eval task (issue 44, item 1): ``questions: {lm_eval_task: NAME}`` imports
the task into the run directory at the start of the run, the detectors read the harness's prompt as
it is (raw, ``{prompt}``), and a rerun of an unchanged task redoes nothing. Needs the lm-eval extra."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("lm_eval.tasks")

from probes.cli import main  # noqa: E402
from probes.errors import ConfigError  # noqa: E402
from probes.pipeline import load_run_config, run_pipeline  # noqa: E402

from .test_lm_eval_import import tasks_dir  # noqa: E402,F401  (the fixture)


def _config(tmp_path: Path, tasks: Path, model: Path, **questions) -> Path:
    config = {
        "questions": {"lm_eval_task": "toy_arith", "include_path": str(tasks), "num_fewshot": "task", **questions},
        "name": "audited",
        "model": {"source": str(model), "device": "cpu", "dtype": "float32"},
        "lara": False,
        "detect": {"names": ["ppl"], "params": {"ppl": {"max_new_tokens": 6}}},
        "evaluate": {"bootstrap": 20, "plots": False},
    }
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_run_audits_the_task_s_rendered_prompts(tasks_dir, toy_dirs, tmp_path):  # noqa: F811
    path = _config(tmp_path, tasks_dir, toy_dirs["gpt2"])
    config = load_run_config(path)
    assert config.questions_source.lm_eval_task == "toy_arith"
    assert (config.detect.prompt_format, config.detect.template) == ("raw", "{prompt}")
    result = run_pipeline(config, progress=False)
    assert {"detect/audited", "accuracy/audited", "evaluate/audited"} <= set(result.ran)
    imported = tmp_path / "imported.jsonl"
    argv = ["questions", "import", "--lm-eval-task", "toy_arith", "--include-path", str(tasks_dir)]
    assert main([*argv, "--num-fewshot", "task", "-o", str(imported)]) == 0
    run_questions = result.run_dir / "questions.jsonl"
    assert run_questions.read_bytes() == imported.read_bytes()  # the prompts `lara questions import` renders
    resolved = yaml.safe_load((result.run_dir / "config.resolved.yaml").read_text())
    assert resolved["questions"] == str(run_questions) and resolved["questions_source"]["num_fewshot"] == "task"
    assert (result.run_dir / "questions.meta.json").is_file()
    again = run_pipeline(load_run_config(path), progress=False)
    assert again.ran == []  # the task did not change: the questions file was not rewritten
    fewer = run_pipeline(load_run_config(path, ["questions.limit=3"]), progress=False)
    assert "detect/audited" in fewer.ran and len(run_questions.read_text().splitlines()) == 3


def test_a_bad_task_key_is_named_as_the_config_file_names_it(tasks_dir, toy_dirs, tmp_path):  # noqa: F811
    path = _config(tmp_path, tasks_dir, toy_dirs["gpt2"], few_shot=2)
    with pytest.raises(ConfigError, match="unknown config key 'questions.few_shot'"):
        load_run_config(path)
