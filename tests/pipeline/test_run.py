"""``lara run`` end to end on the smoke testbed: stages, skipping, resuming, exact redo sets."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from probes.cli import main
from probes.pipeline import load_run_config, report_stages, run_pipeline
from probes.pipeline import stages as stages_module

ALL_STAGES = {
    "generate",
    "cache/rl",
    "metrics/rl",
    "score/rl",
    "detect/rl",
    "accuracy/rl",
    "fuse/rl",
    "verdict/rl",
    "evaluate/rl",
    "cache/sft",
    "metrics/sft",
    "score/sft",
    "detect/sft",
    "accuracy/sft",
    "fuse/sft",
    "verdict/sft",
    "evaluate/sft",
}


def write_config(tmp_path: Path, testbed: Path, **changes) -> Path:
    config = {
        "questions": str(testbed / "questions.jsonl"),
        "run_dir": "run",  # relative to the config file
        "name": "rl",
        "model": {"source": str(testbed / "rl"), "device": "cpu", "dtype": "float32"},
        "controls": [{"name": "sft", "source": str(testbed / "sft")}],
        "generation": {"similars": 2, "paraphrases": 2},
        "extraction": {"layers": "all", "batch_size": 64},
        "score": {"clean_ref": "split"},
        "detect": {
            "names": ["ppl", "cdd"],
            "prompt_format": "raw",
            "template": "Q: {prompt}\nA:",
            "batch_size": 64,
            "params": {"ppl": {"max_new_tokens": 24}, "cdd": {"n": 4, "max_tokens": 24}},
        },
        "fusion": [{"detectors": ["ppl", "lara"], "method": "robust-z"}],
        "calibration": {"controls": 2},
        "verdict": {"permutations": 500, "bootstrap": 50, "subsets": ["members", "non_members"]},
        "evaluate": {"bootstrap": 50, "plots": False},
    }
    config.update(changes)
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def first_run(smoke_testbed, tmp_path_factory):
    testbed, _ = smoke_testbed
    tmp = tmp_path_factory.mktemp("run")
    path = write_config(tmp, testbed)
    result = run_pipeline(load_run_config(path), progress=False)
    return path, result


def test_a_run_does_every_stage_and_writes_the_report(first_run):
    path, result = first_run
    assert set(result.ran) == ALL_STAGES and not result.skipped
    run_dir = path.parent / "run"
    assert result.run_dir.resolve() == run_dir.resolve()
    for name in (
        "config.resolved.yaml",
        "run.log",
        "sets.jsonl",
        "report.md",
        "rl/acts.h5",
        "rl/metrics.h5",
        "rl/lara.csv",
        "rl/detectors.csv",
        "rl/scores.csv",
        "rl/scores.meta.json",
        "rl/report/report.json",
        "sft/report/report.md",
    ):
        assert (run_dir / name).exists(), name
    fusion_meta = json.loads((run_dir / "rl" / "scores.meta.json").read_text())["fusion"]["ppl+lara"]
    assert fusion_meta["how"].startswith("robust-z") and set(fusion_meta["zero_scale"]) >= {"fallback", "constant"}
    # matched controls, calibrated columns and the verdict (no reference control here: relative mode first)
    assert (run_dir / "rl" / "detectors.controls.csv").exists() and "ppl@cal" in (
        run_dir / "rl" / "scores.csv"
    ).read_text()
    verdict = json.loads((run_dir / "rl" / "verdict.json").read_text())
    assert verdict["mode"] == "relative" and set(verdict["modes"]) == {"relative", "absolute"}
    assert {"ppl", "cdd", "lara"} == set(verdict["modes"]["relative"]["detectors"]) and set(verdict["subsets"]) == {
        "members",
        "non_members",
    }
    md = (run_dir / "rl" / "report" / "report.md").read_text()
    assert md.index("## Verdict") < md.index("## Detection") and "| blind (text only) |" in md
    assert "blind" in json.loads((run_dir / "rl" / "report" / "report.json").read_text())
    report = json.loads((run_dir / "rl" / "report" / "report.json").read_text())
    assert report["mode"] == "evaluation"
    assert {"lara", "ppl", "cdd", "ppl+lara"} <= set(report["detectors"])
    assert "# rl (audited model" in result.summary and "# sft (control" in result.summary
    assert "| ppl+lara |" in result.summary
    # the printed summary is the report's head rendered from report.json, not report.md cut at its headings
    head = md.replace("# LaRA Probes report", "").split("## Paired comparison")[0].split("## Layer analysis")[0]
    head = "\n".join(line for line in head.splitlines() if not line.startswith("![")).strip()
    assert head in result.summary and "## Paired comparison" not in result.summary
    written = run_dir / "rl" / "report" / "report.md"
    written.write_text("# LaRA Probes report\n\nnothing here\n")
    try:
        assert report_stages.section(run_dir, "rl", load_run_config(path)) in result.summary
    finally:
        written.write_text(md)  # the later tests rerun this run and expect every output unchanged
    resolved = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())
    assert resolved["generation"]["similars"] == 2
    # the controls' cost under the settings in force, which lara run logs (ppl: one pass, on the decisions'
    # default 10; cdd: n = 4 samples a control, on the verdict's 2)
    from generation.records import read_questions
    from probes.pipeline.run import control_cost
    from probes.pipeline.validate import validate_run

    config = load_run_config(path)
    built = validate_run(config, read_questions(config.questions))
    assert control_cost(config, list(built.values())) == (
        "controls per question: 10 scored by 1 detector(s) of one forward pass each (ppl: 10 scorings), 2 by 1 that "
        "sample (cdd: 8 sampled completions per model); decisions at q = 0.1 by storey"
    )


def test_the_verdict_reports_the_accuracy_recounted_from_the_files(first_run):
    """verdict.json's accuracy rows are a plain recount of accuracy.csv over questions.csv's flags and
    ranks; the accuracy stage read the detectors' greedy answers from the store (nothing generated)."""
    import sqlite3

    path, _ = first_run
    run_dir = path.parent / "run"
    with (run_dir / "rl" / "accuracy.csv").open() as f:
        correct = {r["id"]: r["correct"] for r in csv.DictReader(f)}
    with (run_dir / "rl" / "questions.csv").open() as f:
        decisions = sorted(csv.DictReader(f), key=lambda r: int(r["rank"]))
    verdict = json.loads((run_dir / "rl" / "verdict.json").read_text())
    assert verdict["questions"]["calibrated"] and set(correct) == {r["id"] for r in decisions}
    k = verdict["questions"]["at_least"]["value"]
    wanted = {
        "all": [r["id"] for r in decisions],
        "flagged": [r["id"] for r in decisions if r["flagged"] == "1"],
        "not_flagged": [r["id"] for r in decisions if r["flagged"] == "0"],
        "without_most_suspect": [r["id"] for r in decisions][k:],
    }
    rows = {r["subset"]: r["audited"] for r in verdict["accuracy"]["rows"]}
    assert set(rows) == set(wanted)
    for name, ids in wanted.items():
        right = sum(1 for i in ids if correct[i] == "1")
        judged = sum(1 for i in ids if correct[i] in ("0", "1"))
        assert (rows[name]["correct"], rows[name]["n"]) == (right, judged), name
    assert rows["all"]["n"] == len(wanted["all"]) > 0  # the testbed's questions all have answers
    md = (run_dir / "rl" / "report" / "report.md").read_text()
    assert "**Accuracy**" in md and f"| every audited question | {rows['all']['n']} |" in md

    def stored(model: str) -> int:
        with sqlite3.connect(run_dir / model / "responses.sqlite") as db:
            tables = [t for (t,) in db.execute("select name from sqlite_master where type='table'")]
            return sum(db.execute(f"select count(*) from {t}").fetchone()[0] for t in tables)

    before = stored("rl")
    (run_dir / "rl" / "accuracy.csv").unlink()
    again = run_pipeline(load_run_config(path), progress=False)
    assert "accuracy/rl" in again.ran and stored("rl") == before


def test_questions_split_writes_the_run_s_flagged_and_not_flagged_questions(first_run, tmp_path, capsys):
    from generation.records import read_questions

    path, _ = first_run
    run_dir = path.parent / "run"
    with (run_dir / "rl" / "questions.csv").open() as f:
        flags = {r["id"]: r["flagged"] for r in csv.DictReader(f)}
    assert main(["questions", "split", str(run_dir), "-o", str(tmp_path / "split")]) == 0
    split = tmp_path / "split"
    kept = [q.id for q in read_questions(split / "not_flagged.jsonl")]
    flagged = [q.id for q in read_questions(split / "flagged.jsonl")] if (split / "flagged.jsonl").exists() else []
    assert sorted(kept) == sorted(i for i, f in flags.items() if f == "0")
    assert sorted(flagged) == sorted(i for i, f in flags.items() if f == "1")
    assert f"{len(kept)} not flagged question(s)" in capsys.readouterr().out


def test_a_rerun_skips_every_finished_stage(first_run):
    path, _ = first_run
    again = run_pipeline(load_run_config(path), progress=False)
    assert again.ran == [] and set(again.skipped) == ALL_STAGES


@pytest.mark.slow
def test_changing_k_redoes_exactly_the_stages_that_depend_on_it(first_run):
    """K = 3 instead of 5 keeps each question's first controls but changes its 4th to 10th (two
    similars fewer, two further controls more), which the decisions score: detection is redone (the
    stores already hold the texts seen before); the greedy answers of the questions are not."""
    path, _ = first_run
    changed = run_pipeline(load_run_config(path, ["generation.similars=3"]), progress=False)
    unchanged = {"accuracy/rl", "accuracy/sft"}
    assert set(changed.skipped) == unchanged
    assert set(changed.ran) == ALL_STAGES - unchanged
    back = run_pipeline(load_run_config(path), progress=False)
    assert set(back.skipped) == unchanged


def test_changing_a_detector_setting_redoes_detection_and_what_follows(first_run):
    path, _ = first_run
    run_pipeline(load_run_config(path), progress=False)
    changed = run_pipeline(load_run_config(path, ["detect.params.ppl.max_new_tokens=12"]), progress=False)
    assert set(changed.ran) == {  # the accuracy too: its greedy answer has the detectors' budget
        "detect/rl",
        "accuracy/rl",
        "fuse/rl",
        "verdict/rl",
        "evaluate/rl",
        "detect/sft",
        "accuracy/sft",
        "fuse/sft",
        "verdict/sft",
        "evaluate/sft",
    }
    run_pipeline(load_run_config(path), progress=False)


def test_the_detectors_can_score_fewer_clean_ref_questions_than_lara(first_run):
    """detect.clean_ref N: the detectors score the first N clean_ref questions (file order) and every
    audited one; LaRA keeps them all; fusion, the verdict and the report run on what was scored."""
    path, _ = first_run
    run_dir = path.parent / "run"
    config = load_run_config(path)
    questions = [json.loads(line) for line in Path(config.questions).read_text().splitlines() if line.strip()]
    clean = [q["id"] for q in questions if q.get("split") == "clean_ref"]
    audited = [q["id"] for q in questions if q.get("split") != "clean_ref"]
    assert len(clean) > 3
    fewer = run_pipeline(load_run_config(path, ["detect.clean_ref=3"]), progress=False)
    assert {"detect/rl", "detect/sft", "fuse/rl", "verdict/rl"} <= set(fewer.ran)
    assert not {"generate", "cache/rl", "score/rl"} & set(fewer.ran)
    detected = _ids(run_dir / "rl" / "detectors.csv")
    assert [i for i in detected if i in set(clean)] == clean[:3] and set(audited) <= set(detected)
    assert set(clean) <= set(_ids(run_dir / "rl" / "lara.csv"))
    scores = (run_dir / "rl" / "scores.csv").read_text().splitlines()
    header = scores[0].split(",")
    fused = {row.split(",")[0]: row.split(",")[header.index("ppl+lara")] for row in scores[1:]}
    assert all(fused[i] not in ("", "nan") for i in audited)
    verdict = json.loads((run_dir / "rl" / "verdict.json").read_text())
    assert "relative" in verdict["modes"]
    with pytest.raises(Exception, match="detect.clean_ref"):
        load_run_config(path, ["detect.clean_ref=-1"])
    back = run_pipeline(load_run_config(path), progress=False)
    assert "detect/rl" in back.ran  # null: every clean_ref question again


def _ids(csv_path: Path) -> list[str]:
    return [line.split(",")[0] for line in csv_path.read_text().splitlines()[1:]]


@pytest.mark.slow
def test_turning_calibration_off_leaves_no_stale_controls_to_the_verdict(first_run):
    """Before: the verdict stage read detectors.controls.csv even when calibration was off and the
    ledger no longer tracked it, so the old controls still decided an absolute-mode verdict."""
    path, _ = first_run
    run_dir = path.parent / "run"
    off = run_pipeline(load_run_config(path, ["calibration.controls=0"]), progress=False)
    assert {"detect/rl", "verdict/rl"} <= set(off.ran)
    assert not (run_dir / "rl" / "detectors.controls.csv").exists()
    verdict = json.loads((run_dir / "rl" / "verdict.json").read_text())
    assert set(verdict["modes"]) == {"relative"} and set(verdict["detectors"]) == {"lara"}
    run_pipeline(load_run_config(path), progress=False)
    assert (run_dir / "rl" / "detectors.controls.csv").exists()


@pytest.mark.slow
def test_a_killed_run_finishes_without_redoing_finished_stages(smoke_testbed, tmp_path, monkeypatch):
    testbed, _ = smoke_testbed
    path = write_config(tmp_path, testbed, controls=[])
    real_metrics = stages_module.write_metrics

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stages_module, "write_metrics", killed)  # killed inside the metrics stage
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(load_run_config(path), progress=False)
    monkeypatch.setattr(stages_module, "write_metrics", real_metrics)
    resumed = run_pipeline(load_run_config(path), progress=False)
    assert resumed.skipped == ["generate", "cache/rl"]
    assert resumed.ran == ["metrics/rl", "score/rl", "detect/rl", "accuracy/rl", "fuse/rl", "verdict/rl", "evaluate/rl"]


def test_an_output_changed_on_disk_is_redone(smoke_testbed, tmp_path):
    testbed, _ = smoke_testbed
    path = write_config(tmp_path, testbed, controls=[], detect={"names": []}, fusion=[])
    run_pipeline(load_run_config(path), progress=False)
    scores = tmp_path / "run" / "rl" / "lara.csv"
    scores.write_text(scores.read_text() + "\n")  # edited by hand
    again = run_pipeline(load_run_config(path), progress=False)
    # the score is redone; it comes out as before, so (content hashes) what reads it is not
    assert again.ran == ["score/rl"]
    assert again.skipped == [
        "generate",
        "cache/rl",
        "metrics/rl",
        "accuracy/rl",
        "fuse/rl",
        "verdict/rl",
        "evaluate/rl",
    ]


@pytest.mark.slow
def test_without_labels_the_run_is_an_audit(smoke_testbed, tmp_path):
    testbed, _ = smoke_testbed
    rows = [json.loads(line) for line in (testbed / "questions.jsonl").read_text().splitlines()]
    unlabelled = tmp_path / "q.jsonl"
    unlabelled.write_text("".join(json.dumps({**r, "label": None}) + "\n" for r in rows))
    path = write_config(
        tmp_path,
        testbed,
        questions=str(unlabelled),
        controls=[],
        fusion=[{"detectors": ["ppl", "lara"], "clean_ref": "split"}],
    )
    result = run_pipeline(load_run_config(path), progress=False)
    report = json.loads((tmp_path / "run" / "rl" / "report" / "report.json").read_text())
    assert report["mode"] == "audit"
    assert "lara" in (tmp_path / "run" / "rl" / "scores.csv").read_text().splitlines()[0]
    assert "rl" in result.summary


def test_lara_run_cli_prints_the_tables(first_run, capsys):
    path, _ = first_run
    assert main(["run", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("Verdict on rl (audited model): ") and "Verdict on sft (control): " in out
    )  # the verdicts first
    assert "## Verdict" in out and "## Detection" in out and "| lara |" in out and "up to date: 17" in out


def test_the_commands_write_what_the_stages_wrote(first_run, tmp_path):
    """One operation per step (issue 43): ``lara metrics``, ``lara score`` and ``lara evaluate`` on the
    run's own inputs and settings write what its stages wrote."""
    from probes.lara.metrics_file import MetricsFile

    path, _ = first_run
    run_dir, questions = path.parent / "run", yaml.safe_load(path.read_text())["questions"]
    metrics, scores, report = tmp_path / "metrics.h5", tmp_path / "lara.csv", tmp_path / "report"
    assert main(["metrics", str(run_dir / "sets.jsonl"), str(run_dir / "rl/acts.h5"), "-o", str(metrics)]) == 0
    ours, theirs = MetricsFile.read(metrics), MetricsFile.read(run_dir / "rl/metrics.h5")
    assert ours.ids == theirs.ids and np.array_equal(ours.metrics, theirs.metrics, equal_nan=True)
    assert main(["score", str(metrics), "-o", str(scores), "--clean-ref", "split"]) == 0
    assert scores.read_bytes() == (run_dir / "rl/lara.csv").read_bytes()
    stage_meta = json.loads((run_dir / "rl/lara.meta.json").read_text())
    assert json.loads(scores.with_suffix(".meta.json").read_text())["n_reference"] == stage_meta["n_reference"]
    evaluate = ["evaluate", str(run_dir / "rl/scores.csv"), "--labels", questions, "--metrics", str(metrics)]
    assert main([*evaluate, "-o", str(report), "--bootstrap", "50", "--no-plots"]) == 0
    ours = json.loads((report / "report.json").read_text())
    theirs = json.loads((run_dir / "rl/report/report.json").read_text())
    assert ours["detectors"] == theirs["detectors"] and ours["layers"]["cohens_d"] == theirs["layers"]["cohens_d"]


@pytest.mark.slow
def test_a_reference_control_feeds_ref_and_the_sampling_temperature_is_recorded(smoke_testbed, tmp_path, monkeypatch):
    """``ref`` on every model against the control marked ``reference: true`` (the SFT checkpoint):
    against itself it is exactly 0; ``detect.sampling_temperature`` reaches CDD and the metadata.
    Each detector is built once per run (issue 35: the validation built it, then each model's
    detect stage again: 3 times for two models)."""
    testbed, _ = smoke_testbed
    built = _count_detector_builds(monkeypatch)
    path = write_config(
        tmp_path,
        testbed,
        lara=False,
        fusion=[],
        controls=[{"name": "sft", "source": str(testbed / "sft"), "reference": True}],
        detect={
            "names": ["ref", "zlib", "cdd", "partial_completion"],
            "prompt_format": "raw",
            "template": "Q: {prompt}\nA:",
            "batch_size": 64,
            "sampling_temperature": 1.0,
            "params": {
                "ref": {"max_new_tokens": 16},
                "zlib": {"max_new_tokens": 16},
                "cdd": {"n": 3, "max_tokens": 16},
            },
        },
        verdict={"detectors": ["zlib", "ref"]},
    )
    run_pipeline(load_run_config(path), progress=False)
    assert sorted(built) == ["cdd", "partial_completion", "ref", "zlib"]
    run_dir = tmp_path / "run"
    meta = json.loads((run_dir / "rl" / "detectors.meta.json").read_text())
    assert meta["sampling_temperature"] == 1.0 and meta["detectors"]["cdd"]["params"]["temperature"] == 1.0
    assert meta["reference"]["weights"] != meta["responder"]["weights"]  # the SFT checkpoint's fingerprint
    from probes.scores import ScoreTable

    rl, sft = (ScoreTable.read_csv(run_dir / m / "detectors.csv") for m in ("rl", "sft"))
    assert {"ref", "zlib", "cdd", "partial_completion"} <= set(rl.columns)
    assert (sft.columns["ref"] == 0.0).all() and (rl.columns["ref"] != 0.0).any()
    # <det>@ref = RL − SFT per question, by a naive loop; the verdict's first mode is the reference one
    scores = ScoreTable.read_csv(run_dir / "rl" / "scores.csv")
    for i in range(len(scores.ids)):
        expected = rl.columns["zlib"][i] - sft.columns["zlib"][sft.ids.index(scores.ids[i])]
        np.testing.assert_equal(scores.columns["zlib@ref"][i], expected)
    assert "zlib@ref" not in ScoreTable.read_csv(run_dir / "sft" / "scores.csv").columns
    assert json.loads((run_dir / "rl" / "verdict.json").read_text())["mode"] == "reference"
    sft_verdict = json.loads((run_dir / "sft" / "verdict.json").read_text())
    assert sft_verdict["mode"] != "reference"
    # the reference model's comparisons with itself are marked, so its report reads n/a (self-reference)
    assert "ref" in sft_verdict["detectors"] and sft_verdict["self_reference"] == ["ref"]
    assert "self_reference" not in json.loads((run_dir / "rl" / "verdict.json").read_text())
    # the accuracy table holds the reference model's accuracy on the same questions (its accuracy.csv)
    rl_accuracy = json.loads((run_dir / "rl" / "verdict.json").read_text())["accuracy"]["rows"][0]
    with (run_dir / "sft" / "accuracy.csv").open() as f:
        sft_correct = [r["correct"] for r in csv.DictReader(f)]
    assert rl_accuracy["reference"]["n"] == len(sft_correct) == rl_accuracy["audited"]["n"]
    assert rl_accuracy["reference"]["correct"] == sft_correct.count("1")
    assert "reference" not in sft_verdict["accuracy"]["rows"][0]  # the reference model has none of its own
    again = run_pipeline(load_run_config(path), progress=False)
    assert again.ran == []
    other = run_pipeline(load_run_config(path, ["detect.sampling_temperature=0.7"]), progress=False)
    assert "detect/rl" in other.ran


def _count_detector_builds(monkeypatch) -> list[str]:
    """The names of the detectors built from now on (each registered class's ``__init__`` wrapped)."""
    import functools

    from probes.detectors import REGISTRY

    built: list[str] = []
    for cls in REGISTRY.values():
        original = cls.__init__

        @functools.wraps(original)
        def counting(self, *args, _original=original, **kwargs):
            built.append(self.name)
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    return built


def test_ref_without_a_reference_control_is_refused_in_one_line(smoke_testbed, tmp_path, capsys):
    testbed, _ = smoke_testbed
    path = write_config(tmp_path, testbed, detect={"names": ["ref"]})
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert (
        "compare with a reference model: add a controls: entry with reference: true" in err
        and len(err.strip().splitlines()) == 1
    )


def test_with_a_reference_the_run_s_report_shows_the_drift_map_beside_lara_s(first_run, tmp_path):
    """The run's evaluate stage reads both activation stores (no forward pass): the audited model's
    report has the drift map, the reference's own has none; the stages before it are not redone."""
    import shutil

    path, _ = first_run
    shutil.copytree(path.parent / "run", tmp_path / "run")
    config = yaml.safe_load(path.read_text())
    config["controls"][0]["reference"] = True
    moved = tmp_path / "audit.yaml"
    moved.write_text(yaml.safe_dump(config))
    result = run_pipeline(load_run_config(moved), progress=False)
    assert not {s for s in result.ran if s.split("/")[0] in ("cache", "metrics", "score", "detect")}
    rl = json.loads((tmp_path / "run/rl/report/report.json").read_text())
    assert rl["drift"]["members"] + rl["drift"]["non_members"] == rl["layers"]["n"]
    assert rl["drift"]["layer_labels"] == rl["layers"]["layer_labels"]
    md = (tmp_path / "run/rl/report/report.md").read_text()
    assert md.index("## Layer analysis") < md.index("## Representation drift")
    assert "drift" not in json.loads((tmp_path / "run/sft/report/report.json").read_text())


def test_the_detect_stage_key_reads_every_control_it_scores_and_their_answers(tmp_path):
    """The controls' digest (part of the detect stage's key) covers the texts and re-solved answers
    of each question's first ``calibration.most`` controls: a changed answer or a changed 4th
    control redoes detection (before: only the first ``calibration.controls`` texts counted, so a
    re-solver's new answers were scored with the old ones)."""
    import types

    from generation.records import Question, empty_set
    from probes.pipeline.run import _Run

    def digest(answers: list, fourth: str) -> str:
        record = empty_set(Question("q", "Ann has 3 pens."), 5, 1, {}, 5)
        record.similars = [f"Ann has {n} pens." for n in (4, 5, 6)] + [fourth, "Ann has 9 pens."]
        record.answers = {"similars": answers, "controls": [None] * 5}
        (tmp_path / "sets.jsonl").write_text(record.to_json() + "\n")
        run = types.SimpleNamespace(
            layout=types.SimpleNamespace(sets=tmp_path / "sets.jsonl"),
            config=types.SimpleNamespace(calibration=types.SimpleNamespace(controls=2, most=10)),
            _controls=None,
        )
        return _Run.controls_digest(run)

    base = digest([4, 5, 6, 7, 9], "Ann has 7 pens.")
    # and the detect stage's key holds it (before, the calibration's count of controls overwrote it)
    from probes.pipeline.stages import detect_key

    fake = types.SimpleNamespace(
        config=load_run_config(Path(__file__).resolve().parents[2] / "configs" / "demo.yaml", [f"run_dir={tmp_path}"]),
        detector_objects=lambda: [],
        reference=None,
        q_digest="q",
        identity=lambda name: {"name": name},
        controls_digest=lambda: "digest-of-the-controls",
    )
    assert detect_key(fake, "rl")["calibration"]["control_sets"] == "digest-of-the-controls"
    assert digest([4, 5, 6, 7, 9], "Ann has 7 pens.") == base
    assert digest([4, 5, 6, 8, 9], "Ann has 7 pens.") != base  # a control's answer
    assert digest([4, 5, 6, 7, 9], "Ann has 8 pens.") != base  # the 4th control's text
