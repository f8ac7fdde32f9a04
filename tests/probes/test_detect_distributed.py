"""``lara detect`` under real ``torchrun`` (gloo, 2 processes on CPU) scores what one process scores —
greedy and sampling detectors, matched controls and their calibrated columns — while each rank
computes only its share of every batch call. The same completions come out (token-based scores
are equal bit for bit); log-probabilities differ only by float32 batch-composition rounding, as
they do between two single-process runs with different batch sizes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from generation.config import GenerationConfig
from generation.pipeline import run_generation
from generation.records import Question
from probes.scorefiles import read_scored
from probes.scores import ScoreTable
from probes.verdicts.stats import calibrated_scores, pooled_control_scale
from tests.torchrun import ENV, kill_rank_one_when, lara_command, names_rank_one, stored_responses

DETECTORS = "ppl,min_k,recall,cdd,self_critique"


def detect_command(
    procs: int, questions: Path, sets: Path, model: Path, out: Path, store: Path, *extra: str
) -> list[str]:
    return lara_command(
        procs,
        "-q",
        "detect",
        DETECTORS if not extra else f"{DETECTORS},policy_drift",
        str(questions),
        "--model",
        str(model),
        "--device",
        "cpu",
        "--prompt-format",
        "raw",
        "--template",
        "Q: {prompt}\nA:",
        "--sets",
        str(sets),
        "--controls",
        "2",
        "--param",
        "ppl.max_new_tokens=8",
        "--param",
        "min_k.max_new_tokens=8",
        "--param",
        "recall.max_new_tokens=8",
        "--param",
        "cdd.n=4",
        "--param",
        "cdd.max_tokens=8",
        "--param",
        "self_critique.max_new_tokens=8",
        "--store",
        str(store),
        "-o",
        str(out),
        "--no-progress",
        *extra,
    )


def calibrated_within_rounding(scores: Path, name: str, rtol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """A run's ``<name>@cal`` column, checked against the calibration recomputed from its own
    scores and controls, and the most that a relative rounding of ``rtol`` in every raw score can
    move it: (x − m)/s moves by rtol·(|x| + max|c|)/s from x and the median m of its controls, and
    by |(x − m)/s|·2·rtol·max|c|/s from the pooled scale s (a MAD of control deviations). A fixed
    relative tolerance on the calibrated value itself fails wherever that value is near 0."""
    files = read_scored(scores)
    x = files.scores.columns[name]
    controls = files.controls.matrix(name, files.scores.ids)
    cal, _ = calibrated_scores(x, controls)
    np.testing.assert_allclose(files.scores.columns[f"{name}@cal"], cal, rtol=1e-9, atol=1e-12, err_msg=name)
    widest = np.nanmax(np.abs(controls))
    scale = float(pooled_control_scale(controls).scale[0])
    with np.errstate(invalid="ignore", divide="ignore"):  # a column unusable throughout: NaN, compared as NaN
        bound = rtol * (np.abs(x) + widest) / scale + np.abs(cal) * 2 * rtol * widest / scale
    return cal, 2 * bound  # twice the first-order bound: a safety factor for the median's and the MAD's picks


@pytest.mark.slow
def test_two_processes_score_exactly_what_one_does(tmp_path, toy_dirs, other_gpt2_dir):
    questions = [
        Question(
            f"q{i}",
            f"Ava has {i + 3} apples and buys {2 * i + 1} more. How many apples does she have now?",
            label=i % 2,
            split="clean_ref" if i >= 10 else None,
        )
        for i in range(14)
    ]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(
        "".join(json.dumps({k: v for k, v in q.fields().items() if v is not None}) + "\n" for q in questions)
    )
    sets = tmp_path / "sets.jsonl"
    run_generation(questions, sets, GenerationConfig(similars=3, paraphrases=2))
    outs = {}
    for procs in (1, 2):
        out = tmp_path / f"scores{procs}.csv"
        result = subprocess.run(
            detect_command(
                procs,
                *(qfile, sets, toy_dirs["gpt2"], out, tmp_path / f"store{procs}.sqlite"),
                *(
                    "--reference",
                    str(other_gpt2_dir),
                    "--param",
                    "policy_drift.n=2",
                    "--param",
                    "policy_drift.max_new_tokens=6",
                ),
            ),
            env=ENV,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        outs[procs] = out
    one, two = ScoreTable.read_csv(outs[1]), ScoreTable.read_csv(outs[2])
    assert one.ids == two.ids and list(one.columns) == list(two.columns)
    assert {"ppl@cal", "cdd@cal", "policy_drift"} <= set(two.columns)  # drift: KL shared out by rank
    assert np.isfinite(two.columns["policy_drift"]).all() and (two.columns["policy_drift"] > 0).all()
    for name in ("recall", "cdd"):  # token choices and edit distances: the same completions
        np.testing.assert_array_equal(two.columns[name], one.columns[name], err_msg=name)
    for name in one.columns:  # log-probabilities: float32 rounding
        if "@" not in name:
            np.testing.assert_allclose(two.columns[name], one.columns[name], rtol=1e-6, atol=1e-9, err_msg=name)
    for name in (c[:-4] for c in one.columns if c.endswith("@cal")):
        expected, bound = calibrated_within_rounding(outs[1], name)
        got, _ = calibrated_within_rounding(outs[2], name)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=name)  # unusable in both or neither
        finite = ~np.isnan(expected)
        assert np.all(np.abs(got - expected)[finite] <= bound[finite]), (name, got, expected, bound)
    c1, c2 = (ScoreTable.read_csv(p.with_suffix(".raw.csv")) for p in (outs[1], outs[2]))
    for name in c1.columns:
        np.testing.assert_allclose(c2.columns[name], c1.columns[name], rtol=1e-6, atol=1e-9, err_msg=name)
    k1, k2 = (outs[p].with_suffix(".controls.csv").read_text().splitlines() for p in (1, 2))
    assert [line.split(",")[:2] + line.split(",")[5:6] for line in k1] == [
        line.split(",")[:2] + line.split(",")[5:6] for line in k2
    ]
    meta1 = json.loads(outs[1].with_suffix(".meta.json").read_text())
    meta2 = json.loads(outs[2].with_suffix(".meta.json").read_text())
    assert meta2["distributed"] == {"world_size": 2} and meta2["counts"]["generated"] == meta1["counts"]["generated"]
    assert meta2["counts"]["scored"] == meta1["counts"]["scored"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, toy_dirs):
    """Questions, their sets and what one uninterrupted process scores on them."""
    tmp = tmp_path_factory.mktemp("detect_kill")
    questions = [
        Question(
            f"q{i}",
            f"Ben has {i + 2} pens and gives away {i % 3 + 1}. How many pens does Ben keep?",
            split="clean_ref" if i >= 30 else None,
        )
        for i in range(34)
    ]
    qfile = tmp / "q.jsonl"
    qfile.write_text(
        "".join(json.dumps({k: v for k, v in q.fields().items() if v is not None}) + "\n" for q in questions)
    )
    sets = tmp / "sets.jsonl"
    run_generation(questions, sets, GenerationConfig(similars=3, paraphrases=2))
    reference = tmp / "reference.csv"
    subprocess.run(
        detect_command(1, qfile, sets, toy_dirs["gpt2"], reference, tmp / "ref.sqlite"),
        env=ENV,
        check=True,
        capture_output=True,
    )
    return qfile, sets, reference


@pytest.mark.slow
@pytest.mark.parametrize("rerun_procs", [2, 1])
def test_a_killed_rank_fails_the_job_and_the_rerun_reuses_the_store(uninterrupted, tmp_path, toy_dirs, rerun_procs):
    qfile, sets, reference = uninterrupted
    store, out = tmp_path / "store.sqlite", tmp_path / "scores.csv"
    returncode, stderr = kill_rank_one_when(
        detect_command(2, qfile, sets, toy_dirs["gpt2"], out, store),
        lambda: stored_responses(store) >= 40,
        timeout_s=180,
    )
    assert returncode != 0 and not out.exists() and names_rank_one(stderr)
    kept = stored_responses(store)
    assert kept >= 40
    result = subprocess.run(
        detect_command(rerun_procs, qfile, sets, toy_dirs["gpt2"], out, store), env=ENV, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert (
        meta["counts"]["cache_hits"] >= kept
    )  # nothing committed before the kill is computed again (hits summed over ranks)
    assert ("distributed" in meta) == (rerun_procs == 2)
    one, again = ScoreTable.read_csv(reference), ScoreTable.read_csv(out)
    for name in one.columns:
        np.testing.assert_allclose(
            again.columns[name], one.columns[name], rtol=1e-6 if "@" not in name else 1e-3, atol=1e-9, err_msg=name
        )
