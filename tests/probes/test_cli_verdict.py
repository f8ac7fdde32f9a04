"""Controls through ``lara detect --sets`` and verdicts through ``lara verdict``, on a tiny real
model and real files: control scores equal scoring the control texts as questions, ``@cal`` by a
naive loop, every mode and subset in VERDICT.json."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from generation.records import read_sets
from probes.cli import main
from probes.scorefiles import ControlTable
from probes.scores import ScoreTable


@pytest.fixture(scope="module")
def scored(audit, other_gpt2_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("verdict")
    common = [
        "--device",
        "cpu",
        "--prompt-format",
        "raw",
        "--template",
        "Q: {prompt}\nA:",
        "--param",
        "ppl.max_new_tokens=8",
        "--param",
        "min_k.max_new_tokens=8",
        "--sets",
        str(audit.sets),
        "--controls",
        "2",
        "--decision-controls",
        "2",  # the verdict's 2 for every detector (the decisions' default would score all 3 similars)
        "--store",
        str(root / "s.sqlite"),
        "--no-progress",
    ]
    for name, model in (("rl", audit.model_dir), ("base", other_gpt2_dir)):
        assert (
            main(
                [
                    "detect",
                    "ppl,min_k,logprober",
                    str(audit.questions),
                    "--model",
                    str(model),
                    "--calibrate",
                    "ppl,min_k",
                    "-o",
                    str(root / f"{name}.csv"),
                    *common,
                ]
            )
            == 0
        )
    return root


def test_controls_are_scored_like_questions_and_calibrated(scored, audit, tmp_path, capsys):
    table, controls = ScoreTable.read_csv(scored / "rl.csv"), ControlTable.read_csv(scored / "rl.controls.csv")
    assert list(controls.columns) == ["ppl", "min_k"] and set(controls.index.tolist()) == {1, 2}
    assert {"ppl@cal", "min_k@cal"} <= set(table.columns) and "logprober@cal" not in table.columns
    sets = {s.question.id: [x for x in s.similars if x is not None][:2] for s in read_sets(audit.sets)}
    # the control texts scored as questions of their own give the same numbers (same parameters, own seeds)
    as_questions = tmp_path / "controls.jsonl"
    rows = [(qid, c, text) for qid, texts in sets.items() for c, text in enumerate(texts, 1)]
    as_questions.write_text("".join(json.dumps({"id": f"{q}#{c}", "question": t}) + "\n" for q, c, t in rows))
    assert (
        main(
            [
                "detect",
                "ppl",
                str(as_questions),
                "--model",
                str(audit.model_dir),
                "--device",
                "cpu",
                "--prompt-format",
                "raw",
                "--template",
                "Q: {prompt}\nA:",
                "--param",
                "ppl.max_new_tokens=8",
                "--store",
                str(scored / "s.sqlite"),
                "-o",
                str(tmp_path / "c.csv"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "0 completions generated" in capsys.readouterr().out  # all from the store
    direct = ScoreTable.read_csv(tmp_path / "c.csv")
    matrix = controls.matrix("ppl", table.ids)
    for k, (qid, c, _) in enumerate(rows):
        np.testing.assert_equal(
            matrix[table.ids.index(qid), c - 1], direct.columns["ppl"][k]
        )  # NaN for an empty answer
    # <det>@cal by a naive loop
    usable = [row for row in matrix if np.isfinite(row).sum() >= 2]
    deviations = [
        x - statistics.median([v for v in row if np.isfinite(v)]) for row in usable for x in row if np.isfinite(x)
    ]
    center = statistics.median(deviations)
    scale = statistics.median([abs(d - center) for d in deviations]) / statistics.NormalDist().inv_cdf(0.75)
    for i in range(len(table.ids)):
        valid = [v for v in matrix[i] if np.isfinite(v)]
        expected = (table.columns["ppl"][i] - statistics.median(valid)) / scale if len(valid) >= 2 else np.nan
        np.testing.assert_allclose(table.columns["ppl@cal"][i], expected, rtol=1e-9)


def test_verdict_in_every_mode_with_subsets(scored, audit, capsys):
    out = scored / "verdict.json"
    assert (
        main(
            [
                "verdict",
                str(scored / "rl.csv"),
                "--reference-scores",
                str(scored / "base.csv"),
                "--questions",
                str(audit.questions),
                "--subsets",
                "members,non_members",
                "--permutations",
                "2000",
                "--bootstrap",
                "200",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    verdict = json.loads(out.read_text())
    assert (
        verdict["mode"] == "reference"
        and verdict["calibrated"]
        and set(verdict["modes"]) == {"reference", "relative", "absolute"}
    )
    assert set(verdict["detectors"]) == {"ppl", "min_k"} and verdict["combined"]["method"] == "cauchy"
    for name in ("members", "non_members"):
        assert verdict["subsets"][name]["n"] == 12 and verdict["subsets"][name]["mode"] == "reference"
    assert verdict["n"] == 24  # the clean_ref questions are the clean set, not audited
    assert shown.startswith("Verdict: ") and "subset members (12 questions)" in shown
    for r in verdict["detectors"].values():
        assert (
            0 <= r["p_value"] <= 1 and 0 <= r["within_auc"]["value"] <= 1 and 20 <= r["n"] <= 24
        )  # an empty answer has no PPL
    assert main(["verdict", str(scored / "rl.csv"), "--permutations", "500", "--bootstrap", "50", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["mode"] == "absolute" and "not calibrated" in capsys.readouterr().out


def test_verdict_fdr_writes_the_per_question_table_beside_the_output(scored, capsys):
    """``lara verdict --fdr Q`` (SPEC §8.10). The fixture scored 2 controls per question, and a
    question needs 3 for its controls' residuals: every question is left out and counted, none is
    flagged, and the line after the verdict says how many were tested."""
    out = scored / "v.json"
    assert (
        main(
            [
                "verdict",
                str(scored / "rl.csv"),
                "--reference-scores",
                str(scored / "base.csv"),
                "--fdr",
                "0.2",
                "--fdr-method",
                "two-stage",
                "--permutations",
                "200",
                "--bootstrap",
                "20",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    block = json.loads(out.read_text())["questions"]
    assert (block["fdr"], block["method"], block["mode"], block["n_flagged"], block["n_tested"]) == (
        0.2,
        "two-stage",
        "reference",
        0,
        0,
    )
    assert all(d["left_out"]["too_few_controls"] > 0 for d in block["detectors"].values())
    assert (
        "which questions: 0 of 0 tested flagged (of 34: 34 not tested: too few scored controls or a NaN score) at FDR 20% "
        "(reference mode, two-stage BH)"
    ) in shown
    header, *rows = (scored / "v.questions.csv").read_text().splitlines()
    assert (
        header
        == (
            "id,rank,mode,ppl_residual,ppl_p,min_k_residual,min_k_p,learned_controls_score,learned_controls_p,"
            "p_value,q_value,flagged"
        )
        and len(rows) == 34
    )
