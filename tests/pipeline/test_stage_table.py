"""``lara run`` is driven by its stage table (issue 35, item 2): a stage is one declared entry, and
adding one — the worked example of docs/development.md — is that entry plus its key and body; the
ledger then names it, skips it when its input is unchanged and reruns it when its input changes."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from probes.pipeline import STAGES, load_run_config, run_pipeline
from probes.pipeline import stage_table as table_module
from probes.pipeline.stage_table import Stage
from probes.scores import ScoreTable
from tests.pipeline.test_run import write_config


def test_the_table_declares_the_stages_in_their_order():
    assert [s.name for s in STAGES] == [
        "generate",
        "cache",
        "metrics",
        "score",
        "detect",
        "fuse",
        "verdict",
        "evaluate",
    ]
    assert [s.phase for s in STAGES] == ["inputs"] + ["model"] * 4 + ["report"] * 3


def _ranks_body(run_dir: Path, name: str) -> None:
    """The docs' example stage: each question's rank by its ``zlib`` score (1 = lowest)."""
    table = ScoreTable.read_csv(run_dir / name / "scores.csv")
    order = np.argsort(np.argsort(table.columns["zlib"], kind="stable"), kind="stable") + 1
    with open(run_dir / name / "ranks.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["id", "rank"], *zip(table.ids, order.tolist())])


RANKS = Stage(
    "ranks",
    "report",
    key=lambda run, m: {"scores": run.digests[run.layout.model(m).scores[0]]},
    outputs=lambda run, m: [f"{m}/ranks.csv"],
    body=lambda run, m: _ranks_body(run.run_dir, m),
)


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
    stages = list(STAGES)
    stages.insert(stages.index(table_module.FUSE) + 1, RANKS)
    monkeypatch.setattr(table_module, "STAGES", tuple(stages))
    first = run_pipeline(load_run_config(path), progress=False)
    assert first.ran == ["detect/rl", "fuse/rl", "ranks/rl", "evaluate/rl"]
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
    assert changed.ran == ["detect/rl", "fuse/rl", "ranks/rl", "evaluate/rl"]
