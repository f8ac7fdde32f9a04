"""Reports on synthetic data with a known signal: the figures in report.json are the evaluation
functions' own, the layer analysis finds the planted effect, the plots are real PNGs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probes.evaluation import evaluate
from probes.evaluation.effect import cohens_d
from probes.lara.metrics_file import MetricsFile
from probes.lara.protocol import compress
from probes.report import ReportContext, ReportSettings, build_report, render_markdown, write_report
from probes.scores import ScoreTable, jsonable

N_LAYERS = 9


def synthetic(n=80, seed=0):
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n // 2, int), np.zeros(n - n // 2, int)]
    ids = [f"q{i}" for i in range(n)]
    metrics = rng.normal(size=(n, 3, N_LAYERS))
    metrics[y == 1, 0, 6:] += 3.0  # members: zRSM raised in the late window only
    metrics[y == 1, 2, :3] -= 3.0  # members: zRSI lowered in the early window only
    mf = MetricsFile(
        ids=ids,
        question_hashes=ids,
        labels=y.astype(np.int8),
        splits=[""] * n,
        metrics=metrics,
        S=np.zeros((n, 4, N_LAYERS)),
        R=np.zeros((n, 4, N_LAYERS)),
        n_similars=np.full(n, 3),
        reasons=[""] * n,
        layer_labels=tuple(str(i) for i in range(N_LAYERS)),
        provenance={"activations": {"n_blocks": N_LAYERS}},
    )
    table = ScoreTable(ids, {"strong": y * 2.0 + rng.normal(size=n), "weak": y * 0.3 + rng.normal(size=n)})
    table.columns["weak"][[1, 50]] = np.nan
    labels = {i: int(v) for i, v in zip(ids, y)}
    return mf, table, labels, y


def test_report_figures_and_layer_analysis():
    mf, table, labels, y = synthetic()
    report = build_report(table, labels, mf, ReportSettings(n_bootstrap=200, seed=3))
    assert report["detectors"]["strong"] == evaluate(y, table.columns["strong"], n_bootstrap=200, seed=3)
    weak = report["detectors"]["weak"]
    assert weak["n_nonfinite"] == 2 and weak["auc"]["n"] == 78
    assert report["comparisons"]["baseline"] == "strong"
    assert report["comparisons"]["against"]["weak"]["delta_auc"]["value"] < 0
    layers = report["layers"]
    d = cohens_d(compress(mf.metrics), y.astype(bool))
    np.testing.assert_allclose(layers["cohens_d"]["zRSM"]["value"], d[0])
    assert (
        min(layers["cohens_d"]["zRSM"]["value"][6:]) > 1.5
        and max(np.abs(layers["cohens_d"]["zRSM"]["value"][:6])) < 0.8
    )
    windows = layers["windows"]
    assert windows["early"]["layers"] == ["0", "1", "2"] and windows["late"]["layers"] == ["6", "7", "8"]
    late_mean = compress(mf.metrics)[:, :, 6:].mean(axis=2)
    assert windows["late"]["cohens_d"]["zRSM"]["value"] == pytest.approx(cohens_d(late_mean, y.astype(bool))[0])
    assert windows["early"]["cohens_d"]["zRSI"]["value"] < -1.5
    lo, hi = windows["mid"]["cohens_d"]["zRSM"]["ci"]
    assert lo < 0 < hi  # no planted effect in the middle
    members = layers["profiles"]["zRSM"]["members"]
    assert members["ci_low"][7] > layers["profiles"]["zRSM"]["non_members"]["ci_high"][7]


def test_the_layer_map_is_read_against_its_nulls():
    """Issue 34 item 1 in the report: the planted layers (zRSM 6–8, zRSI 0–2) survive the max-|d|
    permutation null and are marked ✱; a map without any effect reads "no layer beyond the
    permutation null"; the placebo on the non-members' halves, the reference checkpoint's map, the
    depth-profile contrast and the control-set size (warning below 2×) are shown."""
    mf, table, labels, y = synthetic()
    ref = MetricsFile(**{**vars(mf), "metrics": np.random.default_rng(9).normal(size=mf.metrics.shape)})
    report = build_report(
        table,
        labels,
        mf,
        ReportSettings(n_bootstrap=50),
        ReportContext(reference_metrics=ref, lara_info={"n_reference": 50, "n_questions": 130, "n_cross_fitted": 50}),
    )
    layers = report["layers"]
    assert layers["null"]["significant_layers"] == ["0", "1", "2", "6", "7", "8"]
    assert layers["placebo_split"]["n"] == 40 and layers["placebo_split"]["any_significant_rate"] <= 0.15
    contrast = layers["reference"]["contrast"]
    assert set(contrast["significant_layers"]) == {
        "0",
        "1",
        "2",
        "6",
        "7",
        "8",
    }  # RL moved members there, not the reference
    assert layers["reference"]["placebo"]["significant_layers"] == []
    np.testing.assert_allclose(
        layers["reference"]["audited_minus_placebo"]["zRSM"],
        np.array(layers["cohens_d"]["zRSM"]["value"]) - layers["reference"]["placebo"]["d"]["zRSM"],
    )
    assert layers["control_set"]["ratio"] == pytest.approx(50 / 80) and layers["control_set"]["warning"]
    md = render_markdown(jsonable(report))
    assert "| 6 ✱ |" in md and "| 4 |" in md and "Layers 0, 1, 2, 6, 7, 8 beyond the permutation null" in md
    assert "Placebo (random halves of the 40 non-members" in md and "Depth-profile contrast" in md
    assert "50 questions for 80 audited (0.62×). **Warning:** the clean reference is smaller than twice" in md
    null_mf = MetricsFile(**{**vars(mf), "metrics": np.random.default_rng(1).normal(size=mf.metrics.shape)})
    null_md = render_markdown(jsonable(build_report(table, labels, null_mf, ReportSettings(n_bootstrap=50))))
    assert "**No layer beyond the permutation null.**" in null_md and " ✱ |" not in null_md
    wide = build_report(
        table,
        labels,
        mf,
        ReportSettings(n_bootstrap=50),
        ReportContext(lara_info={"n_reference": 200, "n_questions": 80, "n_cross_fitted": 0}),
    )
    assert wide["layers"]["control_set"]["warning"] is None


def test_written_report(tmp_path):
    mf, table, labels, _ = synthetic()
    report = build_report(table, labels, mf, ReportSettings(n_bootstrap=100))
    files = write_report(report, tmp_path, table, labels)
    assert {f.name for f in files} == {
        "report.json",
        "report.md",
        "roc.png",
        "scores.png",
        "profiles.png",
        "cohens_d.png",
    }
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
    report = build_report(table, labels, mf, ReportSettings(n_bootstrap=50, seed=3))
    layers = report["layers"]
    assert layers["n_nonfinite"] == {"members": 2, "non_members": 1}
    assert (layers["members"], layers["non_members"]) == (38, 39)
    assert "Left out: 2 member(s) and 1 non-member(s)" in render_markdown(jsonable(report))


def test_roc_curves_are_grouped_by_family_with_the_best_highlighted(tmp_path, monkeypatch):
    from probes.report import plots
    from probes.scores import ScoreTable

    assert [
        plots.roc_family(n)
        for n in ("lara_zrsm", "ppl", "partial_completion", "cdd", "ppl@ref", "recall@cal", "ppl+lara")
    ] == [
        "LaRA",
        "likelihood & completion",
        "likelihood & completion",
        "sampling",
        "calibrated (@cal, @ref)",
        "calibrated (@cal, @ref)",
        "fusion",
    ]
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(40), np.zeros(40)].astype(int)
    names = ["lara", "ppl", "min_k", "zlib", "recall", "logprober", "ref", "cdd"]
    table = ScoreTable(
        [f"q{i}" for i in range(80)], {n: y * (k / 4) + rng.normal(size=80) for k, n in enumerate(names)}
    )
    drawn = []
    real_figure = plots._figure

    def spy(*args):
        fig = real_figure(*args)
        drawn.append(fig)
        return fig

    monkeypatch.setattr(plots, "_figure", spy)
    plots.plot_roc(table, y, names, tmp_path / "roc.png")
    assert (tmp_path / "roc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panels = {ax.get_title(): ax for ax in drawn[0].axes}
    assert set(panels) == {"LaRA", "likelihood & completion (+2 more, grey)", "sampling"}
    legend = [t.get_text() for t in panels["likelihood & completion (+2 more, grey)"].get_legend().get_texts()]
    from sklearn.metrics import roc_auc_score

    likelihood = ["ppl", "min_k", "zlib", "recall", "logprober", "ref"]
    best = sorted(likelihood, key=lambda n: -roc_auc_score(y, table.columns[n]))[:4]
    assert [t.split()[0] for t in legend] == best  # the four best, best first
    assert [float(t.split()[1]) for t in legend] == [round(roc_auc_score(y, table.columns[n]), 2) for n in best]
    assert (
        len(
            {
                (line.get_color(), line.get_linestyle())
                for line in panels["likelihood & completion (+2 more, grey)"].lines[1:5]
            }
        )
        == 4
    )


def test_rows_constant_by_construction_are_not_applicable(tmp_path):
    """Finding 5: a detector that compares the audited model with itself (it is its own reference)
    scores 0 everywhere: AUC 0.50 [0.50, 0.50] by construction. The report shows it as n/a with
    the reason, keeps the flag in report.json, and gives it no figure and no comparison."""
    _, table, labels, y = synthetic()
    rng = np.random.default_rng(5)
    table.columns["reward_gain"] = np.zeros(len(y))  # RL − reference reward with the reference = the model
    table.columns["zero"] = np.zeros(len(y))
    table.columns["zero"][3] = np.nan  # non-finite scores aside, every score is 0
    table.columns["policy_drift"] = rng.normal(scale=1e-9, size=len(y))  # self-reference, numerically not constant
    report = build_report(
        table, labels, None, ReportSettings(n_bootstrap=50, seed=3), ReportContext(self_reference=True)
    )
    rows = report["detectors"]
    assert rows["reward_gain"]["not_applicable"] == rows["policy_drift"]["not_applicable"] == "self-reference"
    assert rows["zero"]["not_applicable"] == "constant: every score 0" and rows["zero"]["n_nonfinite"] == 1
    for name in ("reward_gain", "zero", "policy_drift"):
        assert not {"auc", "tpr_at_5fpr", "f1_youden", "low_fpr"} & set(rows[name])  # never a figure
        assert report["comparisons"]["against"][name] == {"not_applicable": rows[name]["not_applicable"]}
    assert rows["strong"] == evaluate(y, table.columns["strong"], n_bootstrap=50, seed=3)
    md = render_markdown(jsonable(report))
    assert "| reward_gain | n/a (self-reference) | n/a | n/a | n/a | n/a | 80 (0) |" in md
    assert "| zero | n/a (constant: every score 0) | n/a | n/a | n/a | n/a | 80 (1) |" in md
    assert "| policy_drift | n/a (self-reference) |" in md and "0.50 [0.50, 0.50]" not in md
    write_report(report, tmp_path, table, labels, plots=False)
    saved = json.loads((tmp_path / "report.json").read_text())["detectors"]
    assert saved["reward_gain"]["not_applicable"] == "self-reference" and "auc" not in saved["reward_gain"]
    # without self_reference a varying column is a detector like any other; a constant one is still n/a
    plain = build_report(table, labels, None, ReportSettings(["policy_drift", "reward_gain"], n_bootstrap=0))
    assert "auc" in plain["detectors"]["policy_drift"]
    assert plain["detectors"]["reward_gain"]["not_applicable"] == "constant: every score 0"
    assert plain["comparisons"]["against"] == {"reward_gain": {"not_applicable": "constant: every score 0"}}
    base_constant = build_report(table, labels, None, ReportSettings(["strong"], "zero", n_bootstrap=0))
    assert base_constant["comparisons"] == {
        "baseline": "zero",
        "against": {},
        "not_applicable": "baseline zero: constant: every score 0",
    }
    assert "n/a (baseline zero: constant: every score 0)" in render_markdown(jsonable(base_constant))


def test_a_detectors_roc_panel_is_its_own_family_tag(monkeypatch):
    """Issue 35, item 4: the ROC panels came from a hand-kept list of names, so a new sampling
    detector fell into the likelihood panel; now from each detector's ``family`` tag."""
    from probes.detectors import REGISTRY
    from probes.detectors.sampling import MinKNN
    from probes.report import plots

    class Wider(MinKNN):
        name = "min_knn_wide"

    monkeypatch.setitem(REGISTRY, "min_knn_wide", Wider)
    assert (
        plots.roc_family("min_knn_wide") == "sampling"
        and plots.roc_family("not_a_detector") == "likelihood & completion"
    )
    assert {n for n, c in REGISTRY.items() if c.family == "sampling"} == {
        "cdd",
        "min_knn",
        "min_knn_wide",
        "self_critique",
        "entropy_temp",
        "entropy_noise",
    }
