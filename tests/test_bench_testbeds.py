"""``benchmarks/bench_testbeds.py``'s AUC counts (finding 5): rows constant by construction — a
reference-based detector scored on the reference model itself — are n/a and never counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_testbeds  # noqa: E402

from probes.detectors import REGISTRY  # noqa: E402

SELF_REFERENCE = tuple(name for name, cls in REGISTRY.items() if cls.requires_reference)


def sft_report(flagged: bool) -> dict:
    """A report.json of the SFT control: every real detector's CI contains 0.5 but one; the
    reference-based ones score 0 everywhere (flagged by the report, or not: written before the flag)."""
    rows = {}
    for name in bench_testbeds.DETECTORS:
        if name in SELF_REFERENCE:
            rows[name] = (
                {"not_applicable": "self-reference", "n": 300, "n_nonfinite": 0}
                if flagged
                else {"auc": {"value": 0.5, "ci": [0.5, 0.5], "n": 300}}
            )
        else:
            lo = 0.52 if name == "cdd" else 0.44
            rows[name] = {"auc": {"value": lo + 0.06, "ci": [lo, lo + 0.12], "n": 300}}
    return {"detectors": rows}


@pytest.mark.parametrize("flagged", [True, False])
def test_self_reference_rows_are_left_out_of_the_counts(flagged, capsys):
    cells = bench_testbeds.auc_cells(sft_report(flagged), is_reference=True)
    assert {n for n, c in cells.items() if "not_applicable" in c} == set(SELF_REFERENCE)
    hits, counted, left_out = bench_testbeds.count_cis(cells, contain=True)
    assert (hits, counted) == (13, 14) and sorted(left_out) == sorted(SELF_REFERENCE)  # not "19 of 20"
    assert bench_testbeds.count_cis(cells, contain=False)[:2] == (1, 14)
    assert bench_testbeds._auc(cells["ref"], sft=True).strip() == "n/a (self-reference)"
    found = {
        "testbed": {
            "models": ["rl", "sft"],
            "auc": {"rl": bench_testbeds.auc_cells(sft_report(False), False), "sft": cells},
        }
    }
    bench_testbeds.show_auc_counts(found)
    out = capsys.readouterr().out
    assert f"SFT: 13 of 14 AUC CIs contain 0.5 ({', '.join(SELF_REFERENCE)} n/a" in out
    assert (
        f"RL: 1 of {len(bench_testbeds.DETECTORS)} AUC CIs exclude 0.5" in out
    )  # on the audited model the same columns are real detectors


def test_counts_skip_rows_without_a_figure():
    cells = {
        "a": {"value": 0.5, "ci": [0.4, 0.6]},
        "b": {},
        "c": {"value": None, "ci": [None, None]},
        "d": {"not_applicable": "constant: every score 0"},
    }
    assert bench_testbeds.count_cis(cells, contain=True) == (1, 1, ["d"])


def test_the_benches_read_the_verdicts_controls_as_lara_run_does():
    """With decision or sampling controls beyond the verdict's, lara run's verdict reads the first
    calibration.controls of them: so must bench_verdict's (it read all 20, and measured the absolute
    mode's size at 0.45 where lara run's verdict has 0.045)."""
    import bench_verdict
    import numpy as np

    from probes.pipeline.config import CalibrationSettings
    from probes.scorefiles import ControlTable
    from probes.scores import ScoreTable
    from probes.verdicts.modes import ScoredSet

    ids = ["a", "b"]
    full = ScoredSet(
        ScoreTable(ids, {"ppl": np.zeros(2)}),
        ControlTable([i for i in ids for _ in range(20)], np.tile(np.arange(1, 21), 2), {"ppl": np.ones(40)}),
    )

    class Config:
        calibration = CalibrationSettings(controls=3, decision_controls=20)

    assert bench_verdict.verdict_view(full, Config).control_matrix("ppl").shape[1] == 3
    Config.calibration = CalibrationSettings(controls=3)  # the decisions' default: 10, the verdict still 3
    assert bench_verdict.verdict_view(full, Config).control_matrix("ppl").shape[1] == 3
    Config.calibration = CalibrationSettings(controls=3, decision_controls=3)
    assert bench_verdict.verdict_view(full, Config).width == 20  # no further controls: as it is


def test_a_finished_run_is_read_as_it_is_and_an_unfinished_one_is_run(tmp_path, monkeypatch):
    """The benches read a run whose every model has its verdict.json without calling lara run: one
    finished on another machine and copied without its activations (acts.h5) would be recomputed
    from the start (hours on 2 cores). A run missing a model's verdict is run."""
    import bench_verdict

    calls = []
    monkeypatch.setattr(bench_verdict, "run_pipeline", lambda config, progress: calls.append(config))

    class Config:
        run_dir = str(tmp_path)

        @staticmethod
        def models():
            return [("rl", None), ("sft_control", None)]

    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "verdict.json").write_text("{}")
    bench_verdict.ensure_run(Config)
    assert calls == [Config]  # the reference has no verdict yet: run
    (tmp_path / "sft_control").mkdir()
    (tmp_path / "sft_control" / "verdict.json").write_text("{}")
    bench_verdict.ensure_run(Config)
    assert calls == [Config]  # finished: read as it is, not run again
