"""``lara cache SETS`` → ``lara metrics`` → ``lara score`` → ``lara evaluate`` through the CLI, on
real files, and the clean-reference modes' guarantees."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from cache.store import ActivationStore
from generation.records import read_sets
from probes.cli import main
from probes.lara.metrics_file import MetricsFile
from probes.lara.protocol import Reference, ScoreOptions, align, fold_assignment
from probes.lara.sets import all_texts
from probes.scores import ScoreTable

from .lara_fixtures import N_CLEAN, N_LABELLED


@pytest.fixture(scope="module")
def metrics_path(audit, tmp_path_factory):
    out = tmp_path_factory.mktemp("metrics") / "metrics.h5"
    assert main(["metrics", str(audit.sets), str(audit.acts), "-o", str(out), "--no-progress"]) == 0
    return out


def test_cache_accepts_a_sets_file(audit, tmp_path, capsys):
    out = tmp_path / "acts.h5"
    assert (
        main(
            [
                "cache",
                str(audit.sets),
                "--model",
                str(audit.model_dir),
                "-o",
                str(out),
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    texts = {t for s in read_sets(audit.sets) for t in all_texts(s)}
    store = ActivationStore(out)
    assert len(store) == len(texts) and all(t in store for t in texts)


def test_score_split_mode_cross_fits_the_clean_questions(metrics_path, tmp_path, capsys):
    out = tmp_path / "scores.csv"
    assert main(["score", str(metrics_path), "-o", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"clean reference of {N_CLEAN} (split" in shown and f"{N_CLEAN} cross-fitted over 5 folds" in shown
    table = ScoreTable.read_csv(out)
    assert list(table.columns) == ["lara", "lara_zrsm", "lara_dc", "lara_zrsi", "lara_early", "lara_mid", "lara_late"]
    mf = MetricsFile.read(metrics_path)
    assert table.ids == mf.ids
    clean = np.array([s == "clean_ref" for s in mf.splits])
    pool, keys = mf.metrics[clean], [h for h, c in zip(mf.question_hashes, clean) if c]
    folds = fold_assignment(keys, 5, 0)
    options = ScoreOptions()
    for i in np.flatnonzero(clean):
        without = [j for j, key in enumerate(keys) if folds[key] != folds[mf.question_hashes[i]]]
        assert keys.index(mf.question_hashes[i]) not in without  # its own row is not in its reference
        z = align(Reference.fit(pool[without]).zscores(mf.metrics[i : i + 1]))
        assert table.columns["lara"][i] == pytest.approx(z.mean(), rel=1e-12)
    for i in np.flatnonzero(~clean):  # audited questions: the full clean reference
        z = align(Reference.fit(pool).zscores(mf.metrics[i : i + 1]))
        assert table.columns["lara"][i] == pytest.approx(z.mean(), rel=1e-12)
        assert table.columns["lara_zrsm"][i] == pytest.approx(z[0, 0].mean(), rel=1e-12)
        assert table.columns["lara_early"][i] == pytest.approx(
            z[0][:, 0].mean(), rel=1e-12
        )  # 3 blocks: early = block 0
        assert table.columns["lara_late"][i] == pytest.approx(z[0][:, 2].mean(), rel=1e-12)  # late = block 2
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["clean_ref_mode"] == "split" and meta["n_reference"] == N_CLEAN and meta["options"]["dc"] == options.dc


def test_crossfit_mode_and_options(audit, metrics_path, tmp_path, capsys):
    out = tmp_path / "scores.csv"
    assert (
        main(
            [
                "score",
                str(metrics_path),
                "-o",
                str(out),
                "--clean-ref",
                "crossfit",
                "--labels",
                str(audit.questions),
                "--metric-set",
                "zRSM,zRSI",
                "--layers",
                "1-2",
                "--dc",
                "signed",
                "--folds",
                "3",
                "--no-variants",
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    n_non_members = N_LABELLED // 2 + N_CLEAN
    assert (
        f"clean reference of {n_non_members} (crossfit" in shown
        and f"{n_non_members} cross-fitted over 3 folds" in shown
    )
    table = ScoreTable.read_csv(out)
    assert list(table.columns) == ["lara"] and np.isfinite(table.columns["lara"]).all()


def test_saved_reference_reuse_and_refusals(audit, metrics_path, tmp_path, other_gpt2_dir, capsys):
    ref = tmp_path / "ref.json"
    assert main(["score", str(metrics_path), "-o", str(tmp_path / "a.csv"), "--save-reference", str(ref)]) == 0
    saved = json.loads(ref.read_text())
    assert saved["n"] == N_CLEAN and len(saved["center"]) == 3 and len(saved["center"][0]) == 3
    assert saved["provenance"]["mode"] == "split" and len(saved["question_hashes"]) == N_CLEAN
    capsys.readouterr()
    assert main(["score", str(metrics_path), "-o", str(tmp_path / "b.csv"), "--clean-ref", str(ref)]) == 0
    shown = capsys.readouterr().out
    assert f"NaN scores: {N_CLEAN} (in_saved_reference {N_CLEAN})" in shown
    a, b = ScoreTable.read_csv(tmp_path / "a.csv"), ScoreTable.read_csv(tmp_path / "b.csv")
    audited = np.array([i.startswith("q") for i in a.ids])
    np.testing.assert_allclose(b.columns["lara"][audited], a.columns["lara"][audited], rtol=1e-12)
    assert np.isnan(b.columns["lara"][~audited]).all()
    # the same reference on another model's metrics is refused
    other_acts = tmp_path / "other.h5"
    assert (
        main(
            [
                "cache",
                str(audit.sets),
                "--model",
                str(other_gpt2_dir),
                "-o",
                str(other_acts),
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    other_metrics = tmp_path / "other_metrics.h5"
    assert main(["metrics", str(audit.sets), str(other_acts), "-o", str(other_metrics), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["score", str(other_metrics), "-o", str(tmp_path / "c.csv"), "--clean-ref", str(ref)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "another model's activations" in err and len(err.strip().splitlines()) == 1
    assert main(["score", str(other_metrics), "-o", str(tmp_path / "c.csv"), "--clean-ref", str(metrics_path)]) == 2
    assert "different model weights" in capsys.readouterr().err


def test_clean_metrics_file_mode(audit, metrics_path, tmp_path, capsys):
    # a separate file holding the clean questions only: the audited ones get the full reference,
    # the overlapping clean ones are cross-fitted
    lines = [line for line in audit.sets.read_text().splitlines() if '"clean_ref"' in line]
    clean_sets = tmp_path / "clean_sets.jsonl"
    clean_sets.write_text("\n".join(lines) + "\n")
    clean_metrics = tmp_path / "clean.h5"
    assert main(["metrics", str(clean_sets), str(audit.acts), "-o", str(clean_metrics), "--no-progress"]) == 0
    assert main(["score", str(metrics_path), "-o", str(tmp_path / "f.csv"), "--clean-ref", str(clean_metrics)]) == 0
    assert main(["score", str(metrics_path), "-o", str(tmp_path / "s.csv"), "--clean-ref", "split"]) == 0
    f, s = ScoreTable.read_csv(tmp_path / "f.csv"), ScoreTable.read_csv(tmp_path / "s.csv")
    np.testing.assert_array_equal(f.columns["lara"], s.columns["lara"])  # same pool, same folds


def test_evaluate_writes_the_report(audit, metrics_path, tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    assert main(["score", str(metrics_path), "-o", str(scores)]) == 0
    report_dir = tmp_path / "report"
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                str(scores),
                "--labels",
                str(audit.questions),
                "--metrics",
                str(metrics_path),
                "-o",
                str(report_dir),
                "--bootstrap",
                "200",
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "| Method | ROC-AUC | F1 | TPR@FPR=5% | TPR@1% | TPR@0.1% | n (non-finite) |" in shown
    # 22 non-members resolve neither 1 % nor 0.1 % (10/FPR: 1,000 and 10,000); the rule's point has no false positive
    assert "| not resolvable (realised FPR 0%) | not resolvable (realised FPR 0%) |" in shown
    for name in ("report.json", "report.md", "roc.png", "scores.png", "profiles.png", "cohens_d.png"):
        assert (report_dir / name).stat().st_size > 1000 or name == "report.md"
    report = json.loads((report_dir / "report.json").read_text())
    n_members, n_non = N_LABELLED // 2, N_LABELLED // 2 + N_CLEAN
    assert report["counts"]["members"] == n_members and report["counts"]["non_members"] == n_non
    lara_fig = report["detectors"]["lara"]
    for key in ("auc", "tpr_at_5fpr", "f1_youden", "accuracy_youden"):
        fig = lara_fig[key]
        assert fig["n"] == n_members + n_non and fig["ci"][0] <= fig["value"] <= fig["ci"][1]
    assert report["comparisons"]["baseline"] == "lara" and "lara_dc" in report["comparisons"]["against"]
    layers = report["layers"]
    assert set(layers["windows"]) == {"early", "mid", "late"} and len(layers["cohens_d"]["DC"]["value"]) == 3
    md = (report_dir / "report.md").read_text()
    _check_markdown_tables(md)
    assert "![ROC curves](roc.png)" in md and "## Layer analysis" in md


def test_evaluate_without_labels_is_an_audit(metrics_path, tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    assert main(["score", str(metrics_path), "-o", str(scores)]) == 0
    assert main(["evaluate", str(scores), "-o", str(tmp_path / "audit"), "--no-plots"]) == 0
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["mode"] == "audit" and report["distributions"]["lara"]["n"] == N_LABELLED + N_CLEAN
    _check_markdown_tables((tmp_path / "audit" / "report.md").read_text())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["metrics", "missing.jsonl", "acts.h5", "-o", "m.h5"], "perturbation-set file not found"),
        (["score", "missing.h5", "-o", "s.csv"], "no metrics file at missing.h5"),
        (["evaluate", "missing.csv", "-o", "r"], "score file not found"),
    ],
)
def test_missing_files_are_one_line(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and len(err.splitlines()) == 1


def test_bad_options_are_one_line(metrics_path, tmp_path, capsys):
    assert main(["score", str(metrics_path), "-o", str(tmp_path / "s.csv"), "--layers", "middle"]) == 2
    assert "'middle' is not a layer" in capsys.readouterr().err
    assert main(["score", str(metrics_path), "-o", str(tmp_path / "s.csv"), "--metric-set", "RSM"]) == 2
    assert "choose from zRSM, DC, zRSI" in capsys.readouterr().err
    scores = tmp_path / "s.csv"
    assert main(["score", str(metrics_path), "-o", str(scores)]) == 0
    assert main(["evaluate", str(scores), "-o", str(tmp_path / "r"), "--detectors", "lara,ppl"]) == 2
    assert "no score column ppl" in capsys.readouterr().err


def _check_markdown_tables(md: str) -> None:
    """Every table: a header, a |---| separator with as many cells, rows with as many cells."""
    blocks, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    assert blocks
    for block in blocks:
        widths = [len(next(csv.reader([row.strip().strip("|")], delimiter="|"))) for row in block]
        assert len(set(widths)) == 1, block
        assert set(block[1].replace("|", "")) <= {"-"}, block
        assert len(block) >= 3
