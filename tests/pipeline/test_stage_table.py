"""``lara run`` is driven by its stage table (issue 35, item 2): a stage is one declared entry, and
adding one — the worked example of docs/development.md, taken from the page as written — is three
files: its output's path, its key and body, its entry; the ledger then names it, skips it when its
input is unchanged and reruns it when its input changes."""

from __future__ import annotations

import csv

from probes.pipeline import STAGES, load_run_config, run_pipeline
from probes.pipeline import report_stages as bodies_module
from probes.pipeline import stage_table as table_module
from probes.pipeline.layout import ModelLayout
from probes.scores import ScoreTable
from tests.docs_recipes import recipe_blocks
from tests.pipeline.test_run import write_config

BUILT_IN = ["generate", "cache", "metrics", "score", "detect", "fuse", "verdict", "evaluate"]


def test_the_table_declares_the_stages_in_their_order():
    """The built-in stages in their order and phases (a stage added between them leaves this true)."""
    assert [s.name for s in STAGES if s.name in BUILT_IN] == BUILT_IN
    phases = [s.phase for s in STAGES]
    assert phases == sorted(phases, key=("inputs", "model", "report").index)
    assert {s.name: s.phase for s in STAGES if s.name in BUILT_IN} == dict(
        zip(BUILT_IN, ["inputs"] + ["model"] * 4 + ["report"] * 3)
    )


def _recipe_stage(monkeypatch) -> None:
    """The page's three edits, made in memory: the layout's property, the key and body beside the
    other bodies, the table's entry (its ``STAGES`` line included)."""
    blocks = recipe_blocks("## Adding a stage")
    assert list(blocks) == [
        "probes/pipeline/layout.py",
        "probes/pipeline/report_stages.py",
        "probes/pipeline/stage_table.py",
    ]  # three files, no more
    holder: dict = {}
    exec("class _Layout:\n" + blocks["probes/pipeline/layout.py"], {}, holder)
    monkeypatch.setattr(ModelLayout, "ranks", holder["_Layout"].ranks, raising=False)
    bodies = dict(vars(bodies_module))
    exec(blocks["probes/pipeline/report_stages.py"].replace("from ..", "from probes."), bodies)
    for name in ("ranks_key", "ranks"):
        monkeypatch.setattr(bodies_module, name, bodies[name], raising=False)
    table = dict(vars(table_module))
    exec(blocks["probes/pipeline/stage_table.py"], table)
    monkeypatch.setattr(table_module, "STAGES", table["STAGES"])


def test_a_stage_added_to_the_table_runs_skips_and_reruns(smoke_testbed, tmp_path, monkeypatch):
    testbed, _ = smoke_testbed
    path = write_config(
        tmp_path,
        testbed,
        lara=False,
        controls=[],
        fusion=[],
        calibration={"controls": 0},
        detect={
            "names": ["zlib"],
            "prompt_format": "raw",
            "template": "Q: {prompt}\nA:",
            "batch_size": 64,
            "params": {"zlib": {"max_new_tokens": 4}},
        },
    )
    _recipe_stage(monkeypatch)
    first = run_pipeline(load_run_config(path), progress=False)
    assert first.ran == ["detect/rl", "accuracy/rl", "fuse/rl", "ranks/rl", "evaluate/rl"]
    run_dir = tmp_path / "run"
    scores = ScoreTable.read_csv(run_dir / "rl" / "scores.csv")
    with open(run_dir / "rl" / "ranks.csv", encoding="utf-8") as handle:
        written = {row["id"]: int(row["rank"]) for row in csv.DictReader(handle)}
    values = dict(zip(scores.ids, scores.columns["zlib"]))
    for qid, v in values.items():  # naive rank: 1 + how many score lower, ties by file order
        earlier = scores.ids.index(qid)
        expected = 1 + sum(w < v or (w == v and scores.ids.index(o) < earlier) for o, w in values.items())
        assert written[qid] == expected
    assert run_pipeline(load_run_config(path), progress=False).ran == []
    (run_dir / "rl" / "ranks.csv").unlink()  # an output gone: only it is redone
    assert run_pipeline(load_run_config(path), progress=False).ran == ["ranks/rl"]
    changed = run_pipeline(load_run_config(path, ["detect.params.zlib.max_new_tokens=5"]), progress=False)
    assert changed.ran == ["detect/rl", "accuracy/rl", "fuse/rl", "ranks/rl", "evaluate/rl"]
