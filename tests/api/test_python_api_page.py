"""``docs/python-api.md`` is generated from the API's docstrings (a test fails when it drifts, as
for ``docs/cli.md``), every code block on it runs — the walkthrough on the shipped testbed
included — and the walkthrough is a whole audit in at most 25 lines of calls."""

from __future__ import annotations

import re
from pathlib import Path

import probes
from probes.api.reference import WALKTHROUGH, render

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "python-api.md"


def test_the_page_is_generated_from_the_docstrings():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/python-api.md is stale: python -m probes.api.reference > docs/python-api.md"
    )
    for name in probes.__all__[1:]:
        assert f"### `probes.{name}(" in PAGE.read_text(encoding="utf-8")


def test_every_code_block_of_the_page_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 2 and blocks[0].strip() == WALKTHROUGH.read_text(encoding="utf-8").strip()
    monkeypatch.chdir(tmp_path)  # the walkthrough writes runs/walkthrough/ where it runs
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), {"__name__": "__main__"})
    assert (tmp_path / "runs" / "walkthrough" / "roc.png").stat().st_size > 0


def test_the_walkthrough_is_at_most_25_lines_of_calls():
    code = [
        line
        for line in WALKTHROUGH.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "import ", "from "))
    ]
    assert len(code) <= 25, code
