"""The Python API's audit (issue 23): detectors, fusion, the verdict and evaluation return frames
and result objects equal to what the library entries of ``lara detect`` / ``lara verdict`` give;
plots take ``ax=`` and return the Figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import probes
from probes.errors import ConfigError

QUESTIONS = [
    {
        "id": f"m{i}",
        "question": f"Ava has {i + 3} apples and buys {2 * i + 1} more. How many apples does she have?",
        "answer": 2 * i + 1 + i + 3,
        "label": 1,
    }
    for i in range(6)
] + [
    {
        "id": f"n{i}",
        "question": f"A box holds {i + 4} pens and {i + 9} pencils. How many items are in it?",
        "answer": 2 * i + 13,
        "label": 0,
    }
    for i in range(6)
]


@pytest.fixture(scope="module")
def audit(toy_dirs, other_gpt2_dir, tmp_path_factory):
    store = tmp_path_factory.mktemp("api") / "responses.sqlite"
    model = probes.load_model(toy_dirs["gpt2"], device="cpu")
    sets = probes.perturb(QUESTIONS, similars=3, paraphrases=2)
    audited = probes.detect(model, QUESTIONS, "ppl,zlib", sets=sets, store=store)
    reference = probes.detect(other_gpt2_dir, QUESTIONS, "ppl,zlib", sets=sets, store=store)
    return model, sets, audited, reference, store


def test_detect_returns_the_library_scores_as_frames(audit):
    from generation.records import Question
    from probes.detectors.run import run_detectors
    from probes.responders.local import LocalResponder, PromptFormat

    model, _, audited, _, _ = audit
    assert isinstance(audited.scores, pd.DataFrame) and list(audited.scores.index) == [q["id"] for q in QUESTIONS]
    direct = run_detectors(
        ["ppl", "zlib"], [Question(q["id"], q["question"]) for q in QUESTIONS], LocalResponder(model, PromptFormat())
    )
    np.testing.assert_allclose(audited.scores["ppl"], direct.table.columns["ppl"], rtol=1e-6)
    controls = audited.controls
    assert list(controls.columns[:2]) == ["id", "control"] and len(controls) == 12 * 3
    assert repr(audited) == "Detection(12 questions × ppl, ppl@cal, zlib, zlib@cal, controls of 12 questions)"
    # issue 35, item 8: detectors are counted, not their calibrated columns (before: "4 detector(s)" for 2)
    assert audited.describe().startswith("12 questions x 2 detector(s) (+ 2 calibrated column(s)) in ")
    with pytest.raises(ConfigError, match="params for 'cdd', which is not being run"):
        probes.detect(model, QUESTIONS, "ppl", params={"cdd": {"n": 2}}, store=audit[4])


def test_the_verdict_equals_audit_verdict_on_the_same_scores(audit):
    from probes.verdicts.modes import VerdictSettings
    from probes.verdicts.on_files import audit_verdict

    _, _, audited, reference, _ = audit
    verdict = probes.verdict(audited, reference=reference, permutations=500, bootstrap=20)
    record, _ = audit_verdict(
        audited.files(),
        reference=reference.files(),
        labels=audited.labels,
        splits=audited.splits,
        settings=VerdictSettings(permutations=500, bootstrap=20),
    )
    assert verdict.record["mode"] == "reference" and verdict.p_value == pytest.approx(record["combined"]["p_value"])
    assert verdict.to_dict()["combined"]["detectors"] == record["combined"]["detectors"]
    assert verdict.summary().startswith("Verdict: ") and repr(verdict).startswith("Verdict(")
    table = verdict.questions
    assert sorted(table.index) == sorted(q["id"] for q in QUESTIONS) and {
        "rank",
        "p_value",
        "q_value",
        "flagged",
    } <= set(table.columns)
    assert table["rank"].tolist() == list(range(1, len(QUESTIONS) + 1))  # ranked by evidence
    assert table["p_value"].is_monotonic_increasing
    assert set(verdict.to_dict()["subsets"]) == {"members", "non_members"}


def test_fuse_and_evaluate_against_the_library(audit):
    from probes.evaluation import evaluate
    from probes.fusion import fuse
    from probes.scores import ScoreTable

    _, _, audited, _, _ = audit
    fused = probes.fuse(audited, ["ppl", "zlib"], method="rank-mix")
    table = ScoreTable(list(audited.scores.index), {c: audited.scores[c].to_numpy() for c in audited.scores})
    np.testing.assert_allclose(fused.to_numpy(), fuse(table, ["ppl", "zlib"], "rank-mix").values)
    figures = probes.evaluate(audited, n_bootstrap=50)
    y = np.array([q["label"] for q in QUESTIONS])
    direct = evaluate(y, audited.scores["ppl"].to_numpy(), n_bootstrap=50)
    assert (
        figures.loc["ppl", "auc"] == direct["auc"]["value"] and figures.loc["ppl", "auc_low"] == direct["auc"]["ci"][0]
    )
    assert np.isnan(figures.loc["ppl", "tpr_at_1fpr"])  # 6 non-members cannot resolve 1 %: NaN, never 0


def test_plots_take_ax_and_return_the_figure(audit):
    from matplotlib.figure import Figure

    _, _, audited, reference, _ = audit
    figure = probes.plot_roc(audited)
    assert isinstance(figure, Figure) and len(figure.axes) >= 1
    own = Figure()
    ax = own.add_subplot()
    assert probes.plot_roc(audited, detectors=["ppl"], ax=ax) is own and ax.get_title() == "ROC curves"
    assert isinstance(probes.plot_scores(audited), Figure)
    # issue 35, item 8: the message names the function called and which columns make the panels
    n = len(audited.scores.columns)
    with pytest.raises(
        ValueError,
        match=rf"^plot_scores draws {n} panel\(s\): pass ax= as a sequence of {n} Axes, "
        r"one per column \(ppl, .*\), or choose the columns with detectors=\[\.\.\.\]$",
    ):
        probes.plot_scores(audited, ax=Figure().subplots(1, 2))
    verdict = probes.verdict(audited, reference=reference, permutations=200, bootstrap=10)
    axes = Figure().subplots(1, 3)
    assert probes.plot_verdict(verdict, ax=list(axes)) is axes[0].figure
    with pytest.raises(ValueError, match="plot_verdict draws 3 panel\\(s\\): pass ax= as a sequence of 3 Axes"):
        probes.plot_verdict(verdict, ax=ax)


def test_lara_in_memory_equals_the_file_route(audit, tmp_path):
    from probes.lara.metrics_file import MetricsFile, compute_metrics
    from probes.lara.sets import distinct_texts

    model, sets, _, _, _ = audit
    metrics = probes.lara_metrics(model, sets)
    assert metrics.values.shape == (12, 3, 3) and repr(metrics).startswith("LaraMetrics(12 questions")
    (tmp_path / "sets.jsonl").write_text("".join(s.to_json() + "\n" for s in sets), encoding="utf-8")
    probes.cache_activations(model, distinct_texts(sets), tmp_path / "acts.h5")
    compute_metrics(tmp_path / "sets.jsonl", tmp_path / "acts.h5", tmp_path / "m.h5")
    stored = MetricsFile.read(tmp_path / "m.h5")
    assert stored.ids == metrics.ids
    np.testing.assert_allclose(metrics.values, stored.metrics, rtol=1e-6, atol=1e-9)
    scores = probes.lara_score(metrics, clean=[f"n{i}" for i in range(6)])
    assert scores.index.tolist() == metrics.ids and np.isfinite(scores).all()
    from probes.lara.protocol import ScoreOptions
    from probes.lara.scoring import score_metrics

    labels = {q["id"]: q["label"] for q in QUESTIONS}
    for layers in (
        "all",
        "2",
        "late",
    ):  # layer 2 by its label, a window by the model's blocks; the clean rows cross-fitted
        via_cli = score_metrics(
            stored, "crossfit", ScoreOptions(layers=layers), labels=labels, n_folds=5, seed=0, variants=False
        )
        np.testing.assert_allclose(
            probes.lara_score(metrics, clean=[f"n{i}" for i in range(6)], layers=layers),
            via_cli.table.columns["lara"],
            rtol=1e-9,
            atol=1e-12,
        )


def test_detect_shows_progress_by_default_where_someone_watches(toy_dirs, tmp_path, monkeypatch):
    """Issue 55: probes.detect was silent for minutes in a notebook (progress off by default). Now the
    default follows where it runs: a Jupyter kernel or a terminal shows the bars, a script piped
    elsewhere does not, and an explicit value wins."""
    import io
    import sys

    from probes.api.progress import show_progress
    from probes.operations import detect as opening

    seen: list[bool] = []
    real = opening.open_responder
    monkeypatch.setattr(opening, "open_responder", lambda *a, **k: seen.append(k["progress"]) or real(*a, **k))
    model = probes.load_model(toy_dirs["gpt2"], device="cpu")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    probes.detect(model, QUESTIONS[:2], "ppl", store=tmp_path / "s.sqlite", params={"ppl": {"max_new_tokens": 4}})
    monkeypatch.setitem(sys.modules, "ipykernel", object())  # in a notebook's kernel
    probes.detect(model, QUESTIONS[:2], "ppl", store=tmp_path / "s.sqlite", params={"ppl": {"max_new_tokens": 4}})
    probes.detect(model, QUESTIONS[:2], "ppl", store=tmp_path / "s.sqlite", progress=False)
    assert seen == [False, True, False]
    assert show_progress(True) and not show_progress(False)
