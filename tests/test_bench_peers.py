"""``benchmarks/bench_peers.py`` without the peer installed (CI has no ``peers`` extra): our rows are
read from a run's verdict.json — the decisive mode of each subset, its combined p, Min-K%'s
within-AUC — every row is judged against the known truth (only RL × members is contaminated), and
the script refuses with the install line when benchleak is absent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_peers  # noqa: E402


def _subset(mode: str, reject: bool, p: float, auc: float) -> dict:
    return {
        "n": 150,
        "mode": mode,
        "modes": {
            mode: {"reject": reject, "combined": {"p_value": p}, "detectors": {"min_k": {"within_auc": {"value": auc}}}}
        },
    }


def test_our_rows_come_from_the_runs_verdicts_and_are_judged_against_the_truth(tmp_path, monkeypatch, capsys):
    for name, mode, member_reject in (("rl", "reference", True), ("sft_control", "relative", True)):
        (tmp_path / name).mkdir()
        verdict = {
            "mode": mode,
            "subsets": {
                "members": _subset(mode, member_reject, 0.001, 0.73),
                "non_members": _subset(mode, False, 0.46, 0.51),
            },
        }
        (tmp_path / name / "verdict.json").write_text(json.dumps(verdict))
    monkeypatch.setitem(bench_peers.TESTBEDS, "cpu-seed0", tmp_path)
    rows = bench_peers.our_rows("cpu-seed0")
    assert [(r["checkpoint"], r["set"], r["verdict"]) for r in rows] == [
        ("rl", "members", "CONTAMINATED"),
        ("rl", "non-members", "not flagged"),
        ("sft", "members", "CONTAMINATED"),
        ("sft", "non-members", "not flagged"),
    ]
    assert rows[0]["tool"] == "lara verdict (reference mode)" and rows[0]["auc"] == 0.73 and rows[0]["p"] == 0.001
    bench_peers.print_table(rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].endswith("| yes |") and lines[4].endswith("| **no** |")  # the SFT members' flag is wrong


def test_without_the_peer_the_script_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "benchleak", None)  # an import of it fails
    monkeypatch.setattr(sys, "argv", ["bench_peers.py"])
    with pytest.raises(SystemExit, match=r"pip install -c constraints.txt -e \"\.\[peers\]\""):
        bench_peers.main()
