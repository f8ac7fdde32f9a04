"""``lara detect`` and ``lara fuse`` through the CLI on a tiny real model and real files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probes.cli import main
from probes.scores import ScoreTable

from .lara_fixtures import N_CLEAN, N_LABELLED


@pytest.fixture(scope="module")
def detected(audit, tmp_path_factory):
    root = tmp_path_factory.mktemp("detect")
    out = root / "scores.csv"
    argv = [
        "detect",
        "ppl,min_k,logprober,cdd,self_critique",
        str(audit.questions),
        "--model",
        str(audit.model_dir),
        "--device",
        "cpu",
        "--prompt-format",
        "raw",
        "--template",
        "Q: {prompt}\nA:",
        "--param",
        "cdd.n=4",
        "--param",
        "ppl.max_new_tokens=12",
        "--param",
        "min_k.max_new_tokens=12",
        "--param",
        "cdd.max_tokens=12",
        "--param",
        "self_critique.max_new_tokens=12",
        "--store",
        str(root / "store.sqlite"),
        "-o",
        str(out),
        "--no-progress",
    ]
    return root, out, argv


def test_detect_writes_scores_raw_and_meta(detected, capsys):
    root, out, argv = detected
    assert main(argv) == 0
    shown = capsys.readouterr().out
    table, raw = ScoreTable.read_csv(out), ScoreTable.read_csv(out.with_suffix(".raw.csv"))
    assert list(table.columns) == ["ppl", "min_k", "logprober", "cdd", "self_critique"]
    assert len(table.ids) == N_LABELLED + N_CLEAN
    np.testing.assert_array_equal(table.columns["ppl"], -raw.columns["perplexity"])
    np.testing.assert_array_equal(table.columns["logprober"], -raw.columns["logprober_safe_score"])
    assert "logprober_contaminated" in raw.columns and "cdd_contaminated" in raw.columns
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["detectors"]["cdd"]["params"]["n"] == 4 and meta["responder"]["kind"] == "local"
    assert meta["counts"]["generated"] > 0 and "completions generated" in shown
    # the second run is served from the store
    assert main(argv) == 0
    assert "0 completions generated, 0 texts scored" in capsys.readouterr().out
    np.testing.assert_array_equal(ScoreTable.read_csv(out).columns["cdd"], table.columns["cdd"])


def test_fuse_methods(detected, audit, capsys):
    root, out, argv = detected
    if not out.exists():
        assert main(argv) == 0
    fused = root / "fused.csv"
    assert (
        main(["fuse", str(out), "--detectors", "ppl,logprober", "--labels", str(audit.questions), "-o", str(fused)])
        == 0
    )
    assert f"robust-z over a clean reference of {N_CLEAN} (split)" in capsys.readouterr().out
    table = ScoreTable.read_csv(fused)
    inputs_finite = np.isfinite(table.columns["ppl"]) & np.isfinite(table.columns["logprober"])
    np.testing.assert_array_equal(
        np.isfinite(table.columns["ppl+logprober"]), inputs_finite
    )  # e.g. an empty answer has no PPL
    assert inputs_finite.sum() > 20
    assert (
        main(
            [
                "fuse",
                str(out),
                "--detectors",
                "ppl,cdd",
                "--method",
                "rank-mix",
                "--weights",
                "0.65,0.35",
                "--name",
                "mix",
                "-o",
                str(fused),
            ]
        )
        == 0
    )
    assert "mix" in ScoreTable.read_csv(fused).columns
    assert (
        main(
            [
                "fuse",
                str(out),
                "--detectors",
                "ppl,min_k",
                "--method",
                "stacking",
                "--labels",
                str(audit.questions),
                "-o",
                str(fused),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["fuse", str(out), "--detectors", "ppl,lara", "-o", str(fused)]) == 2
    assert "no score column lara" in capsys.readouterr().err
    assert main(["fuse", str(out), "--detectors", "ppl,cdd", "-o", str(fused)]) == 2
    assert "needs a clean reference" in capsys.readouterr().err


def test_detect_errors_are_one_line(audit, tmp_path, capsys):
    assert (
        main(["detect", "min_kn", str(audit.questions), "--model", str(audit.model_dir), "-o", str(tmp_path / "s.csv")])
        == 2
    )
    err = capsys.readouterr().err
    assert "Did you mean 'min_knn'" in err and len(err.strip().splitlines()) == 1
    assert (
        main(
            [
                "detect",
                "cdd",
                str(audit.questions),
                "--model",
                str(audit.model_dir),
                "--param",
                "cdd.q=1",
                "-o",
                str(tmp_path / "s.csv"),
            ]
        )
        == 2
    )
    assert "has no parameter q" in capsys.readouterr().err
    assert main(["detect", "cdd", str(audit.questions), "-o", str(tmp_path / "s.csv")]) == 2
    assert "--model DIR, or a served one with --endpoint" in capsys.readouterr().err
    assert (
        main(
            [
                "detect",
                "cdd",
                str(audit.questions),
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "-o",
                str(tmp_path / "s.csv"),
            ]
        )
        == 2
    )
    assert "--api-model" in capsys.readouterr().err


def test_fuse_summary_and_meta_show_the_zero_scale_rule(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 120
    ids = [f"q{i}" for i in range(n)]
    table = ScoreTable(ids)
    table.add("cdd", np.where(rng.random(n) < 0.8, 0.0, rng.random(n)))  # MAD 0 on the reference
    table.add("lara", rng.normal(size=n))
    table.add("flat", np.ones(n))  # constant
    table.write_csv(tmp_path / "s.csv")
    (tmp_path / "q.jsonl").write_text(
        "".join(
            json.dumps(
                {"id": i, "question": "x", "label": None if k < 60 else 0, "split": "clean_ref" if k >= 60 else None}
            )
            + "\n"
            for k, i in enumerate(ids)
        )
    )
    out = tmp_path / "fused.csv"
    assert (
        main(
            [
                "fuse",
                str(tmp_path / "s.csv"),
                "--detectors",
                "cdd,lara,flat",
                "--labels",
                str(tmp_path / "q.jsonl"),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "fallback scale" in shown and "cdd (" in shown and "left out: flat" in shown
    meta = json.loads(out.with_suffix(".meta.json").read_text())["fusion"]["cdd+lara+flat"]
    assert list(meta["zero_scale"]["fallback"]) == ["cdd"] and meta["zero_scale"]["constant"] == ["flat"]
    assert np.abs(ScoreTable.read_csv(out).columns["cdd+lara+flat"]).max() < 50


def test_detect_with_a_reference_model_and_a_sampling_temperature(audit, other_gpt2_dir, tmp_path, capsys):
    out = tmp_path / "s.csv"
    argv = [
        "detect",
        "ref,zlib,partial_completion,min_knn",
        str(audit.questions),
        "--model",
        str(audit.model_dir),
        "--reference",
        str(other_gpt2_dir),
        "--device",
        "cpu",
        "--prompt-format",
        "raw",
        "--template",
        "Q: {prompt}\nA:",
        "--param",
        "ref.max_new_tokens=8",
        "--param",
        "zlib.max_new_tokens=8",
        "--param",
        "min_knn.n=3",
        "--param",
        "min_knn.k=2",
        "--param",
        "min_knn.max_new_tokens=8",
        "--sampling-temperature",
        "1.0",
        "--store",
        str(tmp_path / "store.sqlite"),
        "-o",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "sampling temperature 1 (detectors whose params set none)" in shown and "reference model: " in shown
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["reference"]["weights"] != meta["responder"]["weights"] and meta["sampling_temperature"] == 1.0
    assert meta["detectors"]["min_knn"]["params"]["temperature"] == 1.0
    table, raw = ScoreTable.read_csv(out), ScoreTable.read_csv(out.with_suffix(".raw.csv"))
    assert list(table.columns) == ["ref", "zlib", "partial_completion", "min_knn"]
    finite = np.isfinite(table.columns["ref"])  # NaN only where the greedy answer is empty, as zlib's
    np.testing.assert_array_equal(finite, np.isfinite(table.columns["zlib"]))
    assert finite.sum() > 25 and "partial_completion_exact_match" in raw.columns
    assert main(["detect", "ref", str(audit.questions), "--model", str(audit.model_dir), "-o", str(out)]) == 2
    assert "needs a reference model" in capsys.readouterr().err


def test_a_template_reads_the_same_from_the_shell_and_from_yaml(audit, tmp_path, capsys):
    """Before: ``--template "Q: {prompt}\\nA:"`` kept a literal backslash-n (bash passes it through)
    while the YAML config's ``"Q: {prompt}\\nA:"`` is a newline: same model, other PPL, no warning."""
    from probes.pipeline.config import load_run_config

    common = [
        "ppl",
        str(audit.questions),
        "--model",
        str(audit.model_dir),
        "--device",
        "cpu",
        "--prompt-format",
        "raw",
        "--param",
        "ppl.max_new_tokens=8",
        "--store",
        str(tmp_path / "s.sqlite"),
        "--no-progress",
    ]
    assert main(["detect", *common, "--template", "Q: {prompt}\\nA:", "-o", str(tmp_path / "shell.csv")]) == 0
    assert main(["detect", *common, "--template", "Q: {prompt}\nA:", "-o", str(tmp_path / "yaml.csv")]) == 0
    shell, yaml_like = ScoreTable.read_csv(tmp_path / "shell.csv"), ScoreTable.read_csv(tmp_path / "yaml.csv")
    np.testing.assert_array_equal(shell.columns["ppl"], yaml_like.columns["ppl"])
    meta = json.loads((tmp_path / "shell.meta.json").read_text())
    assert meta["responder"]["prompt_format"]["template"] == "Q: {prompt}\nA:"
    # in a config: YAML's double quotes, single quotes (a literal backslash) and --set all give the newline
    for quoted in ('"Q: {prompt}\\nA:"', "'Q: {prompt}\\nA:'"):
        (tmp_path / "run.yaml").write_text(
            f"questions: q.jsonl\nmodel: {{source: m}}\ndetect: {{names: [ppl], template: {quoted}}}\n"
        )
        assert load_run_config(tmp_path / "run.yaml").detect.template == "Q: {prompt}\nA:", quoted
    assert (
        load_run_config(tmp_path / "run.yaml", ["detect.template='Q: {prompt}\\nA:'"]).detect.template
        == "Q: {prompt}\nA:"
    )
    assert main(["detect", *common, "--template", r"\\neq {prompt}", "-o", str(tmp_path / "latex.csv")]) == 0
    assert (
        json.loads((tmp_path / "latex.meta.json").read_text())["responder"]["prompt_format"]["template"]
        == r"\neq {prompt}"
    )
