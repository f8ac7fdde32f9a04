"""Reports on synthetic data with a known signal: the figures in report.json are the evaluation
functions' own, the layer analysis finds the planted effect, the plots are real PNGs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probes.evaluate import evaluate
from probes.evaluate.effect import cohens_d
from probes.lara.metrics_file import MetricsFile
from probes.lara.protocol import compress
from probes.report import build_report, render_markdown, write_report
from probes.report.build import jsonable
from probes.scores import ScoreTable

N_LAYERS = 9


def synthetic(n=80, seed=0):
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n // 2, int), np.zeros(n - n // 2, int)]
    ids = [f"q{i}" for i in range(n)]
    metrics = rng.normal(size=(n, 3, N_LAYERS))
    metrics[y == 1, 0, 6:] += 3.0  # members: zRSM raised in the late window only
    metrics[y == 1, 2, :3] -= 3.0  # members: zRSI lowered in the early window only
    mf = MetricsFile(ids=ids, question_hashes=ids, labels=y.astype(np.int8), splits=[""] * n, metrics=metrics,
                     S=np.zeros((n, 4, N_LAYERS)), R=np.zeros((n, 4, N_LAYERS)), n_similars=np.full(n, 3),
                     reasons=[""] * n, layer_labels=tuple(str(i) for i in range(N_LAYERS)),
                     provenance={"activations": {"n_blocks": N_LAYERS}})
    table = ScoreTable(ids, {"strong": y * 2.0 + rng.normal(size=n), "weak": y * 0.3 + rng.normal(size=n)})
    table.columns["weak"][[1, 50]] = np.nan
    labels = {i: int(v) for i, v in zip(ids, y)}
    return mf, table, labels, y


def test_report_figures_and_layer_analysis():
    mf, table, labels, y = synthetic()
    report = build_report(table, labels, mf, n_bootstrap=200, seed=3)
    assert report["detectors"]["strong"] == evaluate(y, table.columns["strong"], n_bootstrap=200, seed=3)
    weak = report["detectors"]["weak"]
    assert weak["n_nonfinite"] == 2 and weak["auc"]["n"] == 78
    assert report["comparisons"]["baseline"] == "strong"
    assert report["comparisons"]["against"]["weak"]["delta_auc"]["value"] < 0
    layers = report["layers"]
    d = cohens_d(compress(mf.metrics), y.astype(bool))
    np.testing.assert_allclose(layers["cohens_d"]["zRSM"]["value"], d[0])
    assert min(layers["cohens_d"]["zRSM"]["value"][6:]) > 1.5 and max(np.abs(layers["cohens_d"]["zRSM"]["value"][:6])) < 0.8
    windows = layers["windows"]
    assert windows["early"]["layers"] == ["0", "1", "2"] and windows["late"]["layers"] == ["6", "7", "8"]
    late_mean = compress(mf.metrics)[:, :, 6:].mean(axis=2)
    assert windows["late"]["cohens_d"]["zRSM"]["value"] == pytest.approx(cohens_d(late_mean, y.astype(bool))[0])
    assert windows["early"]["cohens_d"]["zRSI"]["value"] < -1.5
    lo, hi = windows["mid"]["cohens_d"]["zRSM"]["ci"]
    assert lo < 0 < hi  # no planted effect in the middle
    members = layers["profiles"]["zRSM"]["members"]
    assert members["ci_low"][7] > layers["profiles"]["zRSM"]["non_members"]["ci_high"][7]


def test_written_report(tmp_path):
    mf, table, labels, _ = synthetic()
    report = build_report(table, labels, mf, n_bootstrap=100)
    files = write_report(report, tmp_path, table, labels)
    assert {f.name for f in files} == {"report.json", "report.md", "roc.png", "scores.png", "profiles.png", "cohens_d.png"}
    from matplotlib.image import imread

    for name in ("roc.png", "scores.png", "profiles.png", "cohens_d.png"):
        image = imread(tmp_path / name)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400
        assert image[..., :3].std() > 0.05  # not blank
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["plots"] == ["roc.png", "scores.png", "profiles.png", "cohens_d.png"]
    md = (tmp_path / "report.md").read_text()
    assert "| strong | " in md and "| weak | " in md and "| 80 (2) |" in md
    assert md == render_markdown(jsonable({**report, "plots": data["plots"]}), data["plots"])


def test_json_has_no_nan():
    assert jsonable({"a": [np.nan, np.float64(1.5), np.inf], "b": np.int64(3)}) == {"a": [None, 1.5, None], "b": 3}


def test_layer_analysis_counts_the_rows_it_leaves_out():
    mf, table, labels, y = synthetic()
    mf.metrics[[0, 1], 2, 4] = np.nan  # two members
    mf.metrics[45, 0, 0] = np.inf  # one non-member
    report = build_report(table, labels, mf, n_bootstrap=50, seed=3)
    layers = report["layers"]
    assert layers["n_nonfinite"] == {"members": 2, "non_members": 1}
    assert (layers["members"], layers["non_members"]) == (38, 39)
    assert "Left out: 2 member(s) and 1 non-member(s)" in render_markdown(jsonable(report))
