"""docs/development.md's recipe for a detector, followed to the letter: the module its code block
gives and the one-line edit of ``probes/detectors/__init__.py`` (its import, its name in ``ORDER``)
are all a new detector needs to run through ``lara detect``, the registry's listings and the
generated docs table."""

from __future__ import annotations

import importlib.util
import re
import sys

import numpy as np
import pytest

from probes.cli import main
from probes.detectors import ORDER, REGISTRY
from probes.detectors.base import order_registry
from probes.detectors.selection import detector_names
from probes.detectors.table import detector_table
from probes.scores import ScoreTable
from tests.docs_recipes import recipe_blocks


@pytest.fixture()
def recipe_detector(tmp_path):
    blocks = recipe_blocks("## Adding a detector")
    assert set(blocks) == {"probes/detectors/length.py", "probes/detectors/__init__.py"}  # two files, no more
    module_file = tmp_path / "length.py"
    module_file.write_text(blocks["probes/detectors/length.py"])
    spec = importlib.util.spec_from_file_location("probes.detectors.length", module_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    saved = dict(REGISTRY)
    try:
        spec.loader.exec_module(module)  # what `from .length import AnswerLength` does
        added = re.search(r'ORDER = \(\.\.\., "(\w+)"\)', blocks["probes/detectors/__init__.py"]).group(1)
        order_registry((*ORDER, added))  # what the name in ORDER does
        yield added
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)
        del sys.modules[spec.name]


def test_the_recipe_s_detector_runs_through_lara_detect(recipe_detector, audit, tmp_path, capsys):
    assert recipe_detector == "answer_length" and list(REGISTRY)[-1] == "answer_length"
    assert "answer_length" in detector_names("all")
    assert "| `answer_length` | tokens of the greedy answer |" in detector_table()
    out = tmp_path / "scores.csv"
    argv = ["detect", "ppl,answer_length", str(audit.questions), "--model", str(audit.model_dir), "--device", "cpu"]
    argv += ["--prompt-format", "raw", "--template", "Q: {prompt}\nA:", "--param", "answer_length.max_new_tokens=6"]
    argv += ["--param", "ppl.max_new_tokens=6", "--store", str(tmp_path / "s.sqlite"), "-o", str(out), "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    table, raw = ScoreTable.read_csv(out), ScoreTable.read_csv(out.with_suffix(".raw.csv"))
    assert list(table.columns) == ["ppl", "answer_length"]
    tokens = raw.columns["answer_tokens"]
    assert ((tokens >= 0) & (tokens <= 6)).all() and (tokens == 6).any()
    assert np.array_equal(table.columns["answer_length"], -tokens)
    bad = [a.replace("answer_length.max_new_tokens=6", "answer_length.max_new_tokens=0") for a in argv]
    assert main(bad) == 2
    assert "answer_length.max_new_tokens: must be an integer ≥ 1, got 0" in capsys.readouterr().err
