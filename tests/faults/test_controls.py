"""Stale and misaligned controls (issue 21, items 2 and 3).

Before: ``lara detect`` never removed an old ``SCORES.controls.csv`` and ``lara verdict`` used
whatever file sat beside the scores, so model B, scored without ``--sets`` to model A's ``-o``,
was judged on A's controls (CONTAMINATED, p = 0.004; with its own, p = 0.86); and a reference
scored on sets regenerated with another seed was subtracted control by control without a word.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probes.cli import main

COMMON = [
    "--device",
    "cpu",
    "--prompt-format",
    "raw",
    "--template",
    "Q: {prompt}\nA:",
    "--param",
    "ppl.max_new_tokens=6",
    "--no-progress",
]
FAST = ["--permutations", "200", "--bootstrap", "20"]


@pytest.fixture(scope="module")
def sets(bank_questions, tmp_path_factory) -> dict[int, Path]:
    """The questions' perturbation sets drawn with seed 0 and with seed 1."""
    root = tmp_path_factory.mktemp("sets")
    out = {}
    for seed in (0, 1):
        out[seed] = root / f"sets{seed}.jsonl"
        assert (
            main(
                [
                    "generate",
                    str(bank_questions),
                    "-o",
                    str(out[seed]),
                    "--similars",
                    "3",
                    "--paraphrases",
                    "2",
                    "--seed",
                    str(seed),
                    "--no-progress",
                ]
            )
            == 0
        )
    return out


def _detect(questions: Path, model: Path, out: Path, store: Path, *extra: str) -> None:
    assert (
        main(
            [
                "detect",
                "ppl",
                str(questions),
                "--model",
                str(model),
                *COMMON,
                "--store",
                str(store),
                "-o",
                str(out),
                *extra,
            ]
        )
        == 0
    )


def test_stale_controls_are_never_read(bank_questions, sets, toy_dirs, other_gpt2_dir, tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    _detect(bank_questions, toy_dirs["gpt2"], scores, tmp_path / "s.sqlite", "--sets", str(sets[0]), "--controls", "3")
    a_controls = tmp_path / "a.controls.csv"
    shutil.copy(tmp_path / "scores.controls.csv", a_controls)
    _detect(bank_questions, other_gpt2_dir, scores, tmp_path / "s.sqlite")  # model B, no --sets, same -o
    assert not (tmp_path / "scores.controls.csv").exists()  # A's controls removed with B's scores
    capsys.readouterr()
    assert main(["verdict", str(scores), "-o", str(tmp_path / "v.json"), *FAST]) == 2
    assert "score the questions' controls" in capsys.readouterr().err

    shutil.copy(a_controls, tmp_path / "scores.controls.csv")  # put back by hand: still ignored, and said so
    assert main(["verdict", str(scores), "-o", str(tmp_path / "v.json"), *FAST]) == 2
    assert main(["verdict", str(scores), "--controls", str(a_controls), "-o", str(tmp_path / "v.json"), *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[-1].startswith("error: ") and "scored without controls" in err[-1] and "belongs to another run" in err[-1]
    )


def test_controls_of_another_run_are_refused_by_their_digest(bank_questions, sets, toy_dirs, tmp_path, capsys):
    _detect(
        bank_questions,
        toy_dirs["gpt2"],
        tmp_path / "a.csv",
        tmp_path / "s.sqlite",
        "--sets",
        str(sets[0]),
        "--controls",
        "3",
    )
    _detect(
        bank_questions,
        toy_dirs["gpt2"],
        tmp_path / "b.csv",
        tmp_path / "s.sqlite",
        "--sets",
        str(sets[1]),
        "--controls",
        "3",
    )
    capsys.readouterr()
    assert (
        main(
            [
                "verdict",
                str(tmp_path / "a.csv"),
                "--controls",
                str(tmp_path / "b.controls.csv"),
                "-o",
                str(tmp_path / "v.json"),
                *FAST,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "does not belong to" in err and "\n" not in err


def test_a_reference_scored_on_other_sets_is_refused_naming_the_first_question(
    bank_questions, sets, toy_dirs, other_gpt2_dir, tmp_path, capsys
):
    _detect(
        bank_questions,
        toy_dirs["gpt2"],
        tmp_path / "rl.csv",
        tmp_path / "s.sqlite",
        "--sets",
        str(sets[0]),
        "--controls",
        "3",
    )
    _detect(
        bank_questions,
        other_gpt2_dir,
        tmp_path / "base.csv",
        tmp_path / "s.sqlite",
        "--sets",
        str(sets[1]),
        "--controls",
        "3",
    )
    capsys.readouterr()
    assert (
        main(
            [
                "verdict",
                str(tmp_path / "rl.csv"),
                "--reference-scores",
                str(tmp_path / "base.csv"),
                "-o",
                str(tmp_path / "v.json"),
                *FAST,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "another text" in err and "'q00'" in err
    # the same sets, other detector settings: refused too
    _detect(
        bank_questions,
        other_gpt2_dir,
        tmp_path / "base2.csv",
        tmp_path / "s.sqlite",
        "--sets",
        str(sets[0]),
        "--controls",
        "3",
        "--param",
        "ppl.max_new_tokens=5",
    )
    capsys.readouterr()
    assert (
        main(
            [
                "verdict",
                str(tmp_path / "rl.csv"),
                "--reference-scores",
                str(tmp_path / "base2.csv"),
                "-o",
                str(tmp_path / "v.json"),
                *FAST,
            ]
        )
        == 2
    )
    assert "other detector settings" in capsys.readouterr().err
    # the same sets and settings: a reference-mode verdict
    _detect(
        bank_questions,
        other_gpt2_dir,
        tmp_path / "base3.csv",
        tmp_path / "s.sqlite",
        "--sets",
        str(sets[0]),
        "--controls",
        "3",
    )
    assert main(
        [
            "verdict",
            str(tmp_path / "rl.csv"),
            "--reference-scores",
            str(tmp_path / "base3.csv"),
            "-o",
            str(tmp_path / "v.json"),
            *FAST,
        ]
    ) in (0, 3)
    assert json.loads((tmp_path / "v.json").read_text())["mode"] == "reference"


def test_scores_overwritten_without_their_meta_do_not_inherit_its_controls(
    bank_questions, sets, toy_dirs, other_gpt2_dir, tmp_path, capsys
):
    """A write of model B's scores over model A's -o that stops before the meta (a full disk, Ctrl-C)
    must not pair B's scores with A's controls: the meta records the sha256 of SCORES.csv too."""
    from probes.scores import ScoreTable

    scores = tmp_path / "scores.csv"
    _detect(bank_questions, toy_dirs["gpt2"], scores, tmp_path / "s.sqlite", "--sets", str(sets[0]), "--controls", "3")
    _detect(bank_questions, other_gpt2_dir, tmp_path / "b.csv", tmp_path / "s.sqlite")
    ScoreTable.read_csv(tmp_path / "b.csv").write_csv(scores)  # B's scores landed, A's meta and controls stayed
    capsys.readouterr()
    assert main(["verdict", str(scores), "-o", str(tmp_path / "v.json"), *FAST]) == 2
    assert "score the questions' controls" in capsys.readouterr().err


def test_a_served_model_and_a_local_reference_are_compared_on_their_parameters():
    """The settings digest holds the detector and its parameters; prompt formats are compared only
    when both are known (a served model's template is the server's)."""
    import numpy as np

    from probes.errors import MismatchError
    from probes.scores import ScoreTable
    from probes.verdicts.comparable import check_settings
    from probes.verdicts.modes import ScoredSet

    def scored(digest, prompt):
        return ScoredSet(ScoreTable(["a"], {"ppl": np.zeros(1)}), None, settings={"ppl": digest}, prompt_format=prompt)

    local = {"mode": "raw", "template": "Q: {prompt}\nA:", "system": None, "chat": False}
    assert "one is a served model" in check_settings(scored("d1", None), scored("d1", local), ["ppl"], "reference")[0]
    assert check_settings(scored("d1", local), scored("d1", dict(local)), ["ppl"], "reference") == []
    with pytest.raises(MismatchError, match="another prompt format"):
        check_settings(scored("d1", local), scored("d1", {**local, "template": "{prompt}"}), ["ppl"], "clean set")
    with pytest.raises(MismatchError, match="the clean set scored 'ppl' with other detector settings"):
        check_settings(scored("d1", local), scored("d2", local), ["ppl"], "clean set")
