"""``lara run`` under real ``torchrun`` (gloo, 2 processes on CPU) on the smoke testbed: the whole
audit — sets, activations, LaRA, detectors with matched controls and a reference model, fusion,
verdicts, reports — equals a single-process run; a rank SIGKILLed mid-run fails the job, and the
rerun, with 2 processes or with 1, resumes (committed activation shards, stored completions) and
ends equal to an uninterrupted run.

"Equal": the same activation rows within 1e-5, the same completions (token-based scores bit for
bit), the same verdicts; log-probability-based scores agree to float32 batch-composition rounding
carried through each score's own scale (a two-process run batches the texts differently)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from cache.store import ActivationStore, parts_dir
from probes.scores import ScoreTable
from tests.torchrun import ENV, kill_rank_one_when, lara_command, names_rank_one, stored_responses

MODELS = ("rl", "sft")
TOKEN_SCORES = ("cdd", "cdd@cal", "cdd@ref")  # edit distances between completions: exact when the completions are


def write_config(tmp_path: Path, testbed: Path) -> Path:
    config = {
        "questions": str(testbed / "questions.jsonl"),
        "name": "rl",
        "model": {"source": str(testbed / "rl"), "device": "cpu", "dtype": "float32"},
        "controls": [{"name": "sft", "source": str(testbed / "sft"), "reference": True}],
        "generation": {"similars": 2, "paraphrases": 2},
        "extraction": {"layers": "all", "batch_size": 8, "flush_every": 16},  # many small commits: a kill finds some
        "score": {"clean_ref": "split"},
        "detect": {
            "names": ["ppl", "cdd"],
            "prompt_format": "raw",
            "template": "Q: {prompt}\nA:",
            "batch_size": 32,
            "params": {"ppl": {"max_new_tokens": 12}, "cdd": {"n": 4, "max_tokens": 12}},
        },
        "fusion": [{"detectors": ["ppl", "lara"], "method": "robust-z"}],
        "calibration": {"controls": 2},
        "verdict": {"permutations": 500, "bootstrap": 50, "subsets": ["members", "non_members"]},
        "evaluate": {"bootstrap": 50, "plots": False},
    }
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_command(config: Path, run_dir: Path, procs: int) -> list[str]:
    return lara_command(procs, "run", str(config), "--set", f"run_dir={run_dir}", "--no-progress")


def lara_run(config: Path, run_dir: Path, procs: int) -> str:
    result = subprocess.run(run_command(config, run_dir, procs), env=ENV, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def kill_rank_one_in(config: Path, run_dir: Path, ready) -> None:
    """Start a 2-process run and SIGKILL its rank 1 once ``ready(run_dir)``; the job must fail naming the rank."""
    returncode, stderr = kill_rank_one_when(run_command(config, run_dir, 2), lambda: ready(run_dir))
    assert returncode != 0 and names_rank_one(stderr), stderr[-2000:]
    assert not (run_dir / "report.md").exists()


def rank_one_committed_activations(run_dir: Path) -> bool:
    return bool(list(parts_dir(run_dir / "rl" / "acts.h5").glob("part-*-r1.h5")))


def assert_same_audit(run: Path, reference: Path) -> None:
    """``run`` ends where the single-process, uninterrupted ``reference`` run ended."""
    assert (run / "sets.jsonl").read_bytes() == (reference / "sets.jsonl").read_bytes()
    for model in MODELS:
        a, b = ActivationStore(reference / model / "acts.h5"), ActivationStore(run / model / "acts.h5")
        assert a.keys() == b.keys() and len(a) > 700
        texts = a.texts()
        np.testing.assert_allclose(b.get(texts), a.get(texts), atol=1e-5, rtol=0, err_msg=model)
        for table in ("lara.csv", "detectors.csv", "scores.csv"):
            one, two = ScoreTable.read_csv(reference / model / table), ScoreTable.read_csv(run / model / table)
            assert one.ids == two.ids and list(one.columns) == list(two.columns), table
            for name, values in one.columns.items():
                theirs = two.columns[name]
                np.testing.assert_array_equal(np.isnan(theirs), np.isnan(values), err_msg=f"{model}/{table}:{name}")
                if name in TOKEN_SCORES:
                    np.testing.assert_array_equal(theirs, values, err_msg=f"{model}/{table}:{name}")
                elif name in ("ppl",):  # a log-probability: float32 rounding of the batch composition
                    np.testing.assert_allclose(theirs, values, rtol=1e-6, atol=1e-9, err_msg=f"{model}/{table}:{name}")
                elif name.endswith("@cal"):  # (raw − the controls' median) / σ̂: the raw scores' rounding over σ̂
                    atol = calibrated_rounding(reference / model, name.removesuffix("@cal"), one.columns)
                    np.testing.assert_allclose(theirs, values, rtol=1e-3, atol=atol, err_msg=f"{model}/{table}:{name}")
                else:  # LaRA (z-scores of rows equal to ≤ 3e-7), fused: that rounding carried through each
                    # score's own scale, as between two batch sizes in one process
                    scale = np.nanstd(values) if np.isfinite(values).any() else 0.0
                    np.testing.assert_allclose(
                        theirs, values, rtol=1e-3, atol=1e-4 * scale + 1e-9, err_msg=f"{model}/{table}:{name}"
                    )
        v1, v2 = (json.loads((r / model / "verdict.json").read_text()) for r in (reference, run))
        for verdict, theirs in [(v1, v2)] + [(v1["subsets"][k], v2["subsets"][k]) for k in ("members", "non_members")]:
            assert (theirs["mode"], theirs["n"], theirs["reject"]) == (verdict["mode"], verdict["n"], verdict["reject"])
            assert theirs["combined"]["p_value"] == pytest.approx(verdict["combined"]["p_value"], rel=1e-3, abs=1e-3)
        assert (run / model / "report" / "report.md").is_file()
    assert (run / "report.md").read_text() == (reference / "report.md").read_text() or _same_verdict_lines(
        run, reference
    )


def calibrated_rounding(model_dir: Path, detector: str, columns: dict[str, np.ndarray]) -> float:
    """How far ``<detector>@cal`` may move when every raw score moves by the rounding asserted of
    ppl, the one raw score with @cal here (1e-6 relative): the original's and the controls' median by that much each, divided by σ̂, the controls'
    pooled spread (about 1e-3 on the smoke testbed's ppl of about 3: controls that differ in a number)."""
    import csv
    from collections import defaultdict

    from probes.verdicts.stats import pooled_control_scale

    by_question: dict[str, list[float]] = defaultdict(list)
    with open(model_dir / "detectors.controls.csv", newline="") as f:
        for row in csv.DictReader(f):
            by_question[row["id"]].append(float(row[detector]) if row[detector] else np.nan)
    width = max(len(v) for v in by_question.values())
    controls = np.array([v + [np.nan] * (width - len(v)) for v in by_question.values()])
    fitted = pooled_control_scale(controls)
    assert fitted is not None and fitted.scale[0] > 0, f"{detector}: no spread among the controls to scale by"
    scale = float(fitted.scale[0])
    largest = max(np.nanmax(np.abs(columns[detector])), np.nanmax(np.abs(controls)))
    return 2 * 1e-6 * largest / scale


def _same_verdict_lines(run: Path, reference: Path) -> bool:
    """The combined reports agree on every verdict line (their AUC digits may differ in the last place)."""

    def verdicts(path: Path) -> list[str]:
        return [
            line for line in path.read_text().splitlines() if "CONTAMINATED" in line or "not flagged" in line.lower()
        ]

    return verdicts(run / "report.md") == verdicts(reference / "report.md")


@pytest.fixture(scope="module")
def one_process(smoke_testbed, tmp_path_factory):
    testbed, _ = smoke_testbed
    tmp = tmp_path_factory.mktemp("dist_run")
    config = write_config(tmp, testbed)
    lara_run(config, tmp / "one", 1)
    return config, tmp / "one"


@pytest.mark.slow
def test_two_processes_audit_exactly_what_one_does(one_process, tmp_path):
    config, one = one_process
    stdout = lara_run(config, tmp_path / "two", 2)
    assert stdout.count("stages run: 17, up to date: 0") == 1  # rank 0 alone prints the results
    assert_same_audit(tmp_path / "two", one)
    for model in MODELS:
        made = ActivationStore(tmp_path / "two" / model / "acts.h5").provenance["distributed"]
        assert made["world_size"] == 2 and min(made["rows_per_rank"]) > 0 and made["devices"] == ["cpu", "cpu"]
        m1, m2 = (json.loads((r / model / "detectors.meta.json").read_text()) for r in (one, tmp_path / "two"))
        assert m2["distributed"] == {"world_size": 2} and "distributed" not in m1
        assert m2["counts"] == m1["counts"]  # a text repeated in a batch call is computed once, as in one process
    records = sorted(p.name for p in (tmp_path / "two" / "ledger").glob("*__*.json"))
    assert records == sorted(p.name for p in (one / "ledger").glob("*__*.json"))
    log = (tmp_path / "two" / "run.log").read_text()
    assert "rank1 INFO probes.pipeline.ledger: cache/rl: running this rank's share" in log and "rank0 INFO" in log
    assert not (tmp_path / "two" / "run.lock").read_text()  # released and emptied by rank 0


@pytest.mark.slow
def test_a_rank_killed_in_the_activations_resumes_on_two_processes(one_process, tmp_path):
    config, one = one_process
    run = tmp_path / "killed"
    kill_rank_one_in(config, run, rank_one_committed_activations)
    assert list(parts_dir(run / "rl" / "acts.h5").glob("part-*.h5"))
    stdout = lara_run(config, run, 2)
    assert "up to date: 1" in stdout  # the sets were made before the kill
    made = ActivationStore(run / "rl" / "acts.h5").provenance["distributed"]
    assert sum(made["rows_per_rank"]) < len(ActivationStore(run / "rl" / "acts.h5"))  # committed rows were not redone
    assert_same_audit(run, one)


@pytest.mark.slow
def test_a_rank_killed_in_the_detectors_resumes_on_one_process(one_process, tmp_path):
    config, one = one_process
    run = tmp_path / "killed"
    store = run / "rl" / "responses.sqlite"
    kill_rank_one_in(
        config, run, lambda d: stored_responses(store) > 0 and not (d / "ledger" / "detect__rl.json").exists()
    )
    kept = stored_responses(store)
    assert (run / "ledger" / "cache__rl.json").exists() and kept > 0
    stdout = lara_run(config, run, 1)
    assert "up to date: 4" in stdout  # generate, and rl's activations, metrics and LaRA score
    meta = json.loads((run / "rl" / "detectors.meta.json").read_text())
    assert meta["counts"]["cache_hits"] >= kept and "distributed" not in meta
    assert_same_audit(run, one)
