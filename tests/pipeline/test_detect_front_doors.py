"""Detection's three front doors — ``lara detect``, the ``detect`` stage of ``lara run`` and
``probes.detect`` — are thin callers of one operation (``probes.operations.detect``), which
closes every engine it opened, on success and on error (issue 57, item 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import probes
from generation.records import Question
from probes.cli import main
from probes.pipeline import load_run_config, run_pipeline
from tests.pipeline.test_run import write_config
from tests.toy_engines import install_engine

ROOT = Path(__file__).resolve().parents[2]

TOY_ENGINE = '''
from cache.loading import load_model
from probes.responders.local import LocalResponder

OPENED, CLOSED = [], []
FAIL = []  # non-empty: every generation raises, as an engine failing mid-run


class ToyEngine(LocalResponder):
    """The hf responder, named otherwise, that records being opened and closed."""

    def generate(self, prompts, params):
        if FAIL:
            raise RuntimeError("the toy engine failed mid-run")
        return super().generate(prompts, params)

    def close(self):
        CLOSED.append(self.identity["source"])


def open_engine(model, prompt_format):
    responder = ToyEngine(load_model(model), prompt_format)
    responder.identity = {**responder.identity, "kind": "toy", "source": model.source}
    OPENED.append(model.source)
    return responder


def version():
    return "0.0.1"
'''


@pytest.fixture()
def toy_engine(tmp_path, monkeypatch):
    """A toy engine through the registry, named ``toy``."""
    return install_engine(monkeypatch, tmp_path, "toy_closing_engine", TOY_ENGINE, "toy", title="Toy")


def _questions_file(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "question": "What is 2 + 3?"}\n{"id": "b", "question": "Ann has 4 pens. How many?"}\n')
    return path


@pytest.mark.parametrize("fails", [False, True])
def test_lara_detect_closes_the_engine_it_opened(toy_engine, toy_dirs, tmp_path, fails):
    toy_engine.FAIL[:] = [True] if fails else []
    source = str(toy_dirs["gpt2"])
    argv = ["detect", "ppl", str(_questions_file(tmp_path)), "--model", source, "--engine", "toy", "--device", "cpu"]
    argv += ["--prompt-format", "raw", "--param", "ppl.max_new_tokens=4", "--store", str(tmp_path / "s.sqlite")]
    argv += ["-o", str(tmp_path / "scores.csv"), "--no-progress"]
    if fails:
        with pytest.raises(RuntimeError, match="failed mid-run"):
            main(argv)
    else:
        assert main(argv) == 0 and (tmp_path / "scores.csv").exists()
    assert toy_engine.OPENED == [source] and toy_engine.CLOSED == [source]


@pytest.mark.parametrize("fails", [False, True])
def test_probes_detect_closes_the_engine_it_opened(toy_engine, toy_dirs, tmp_path, fails):
    toy_engine.FAIL[:] = [True] if fails else []
    source = str(toy_dirs["gpt2"])
    questions = [Question("a", "What is 2 + 3?"), Question("b", "Ann has 4 pens. How many?")]
    call = dict(engine="toy", store=tmp_path / "s.sqlite", params={"ppl": {"max_new_tokens": 4}}, progress=False)
    if fails:
        with pytest.raises(RuntimeError, match="failed mid-run"):
            probes.detect(source, questions, "ppl", **call)
    else:
        assert list(probes.detect(source, questions, "ppl", **call).scores.index) == ["a", "b"]
    assert toy_engine.OPENED == [source] and toy_engine.CLOSED == [source]


@pytest.mark.parametrize("fails", [False, True])
def test_the_detect_stage_closes_the_engine_it_opened(toy_engine, smoke_testbed, tmp_path, fails):
    """The run's detect and accuracy stages each open the audited model's engine once, and close it."""
    toy_engine.FAIL[:] = [True] if fails else []
    testbed, _ = smoke_testbed
    source = str(testbed / "rl")
    detect = {"names": ["ppl"], "prompt_format": "raw", "batch_size": 64, "params": {"ppl": {"max_new_tokens": 8}}}
    path = write_config(tmp_path, testbed, controls=[], detect=detect, fusion=[], calibration={"controls": 0})
    config = load_run_config(path, ["model.engine=toy"])
    if fails:
        with pytest.raises(RuntimeError, match="failed mid-run"):
            run_pipeline(config, progress=False)
        assert toy_engine.OPENED == [source] and toy_engine.CLOSED == [source]
    else:
        run_pipeline(config, progress=False)
        assert toy_engine.OPENED == [source, source] and toy_engine.CLOSED == [source, source]  # detect, accuracy


def _own_lines(path: Path, name: str) -> int:
    """Lines of function ``name``'s body in ``path``, its docstring left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (node,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    body = (
        node.body[1:]
        if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
        else node.body
    )
    return body[-1].end_lineno - body[0].lineno + 1


@pytest.mark.parametrize(
    "path, name",
    [
        ("probes/commands/detect.py", "handle"),
        ("probes/pipeline/stages.py", "detect"),
        ("probes/api/audit.py", "detect"),
    ],
)
def test_each_front_door_of_detection_is_under_25_lines_of_its_own(path, name):
    assert _own_lines(ROOT / path, name) < 25
