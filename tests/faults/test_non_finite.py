"""Non-finite values (issue 21, item 5). Before: a checkpoint whose safetensors header is intact but
whose weights hold NaN ran to the end with exit 0 — ``lara cache`` stored rows half NaN, ``lara
detect`` wrote all-NaN scores, a verdict over them read "not flagged" — and NaN scores left a
verdict without a count. Now: refused at the source in one line; every score a verdict leaves
out is counted; all-NaN scores give *no verdict* with exit status 3."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from probes.cli import main
from probes.scorefiles import ControlTable
from probes.scores import ScoreTable


def _edited_checkpoint(source: Path, out: Path, suffix: str, edit) -> Path:
    """A copy of ``source`` whose first weight named ``*suffix`` is changed by ``edit``, its
    safetensors header intact."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, out)
    weights = load_file(out / "model.safetensors")
    edit(weights[next(k for k in weights if k.endswith(suffix))])
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    return out


@pytest.fixture(scope="module")
def nan_checkpoint(toy_dirs, tmp_path_factory) -> Path:
    """The GPT-2 toy with NaN in one weight tensor."""
    return _edited_checkpoint(
        toy_dirs["gpt2"],
        tmp_path_factory.mktemp("nan-ckpt") / "gpt2-nan",
        "attn.c_attn.weight",
        lambda w: w[0, :5].fill_(float("nan")),
    )


@pytest.fixture(scope="module")
def overflowing_checkpoint(toy_dirs, tmp_path_factory) -> Path:
    """Finite weights that overflow float32 in the forward pass (inf, then NaN, activations)."""
    return _edited_checkpoint(
        toy_dirs["gpt2"],
        tmp_path_factory.mktemp("overflow-ckpt") / "gpt2-overflow",
        "h.0.mlp.c_fc.weight",
        lambda w: w.fill_(3e38),
    )


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("error: ") and "Traceback" not in "\n".join(err)
    return err[-1]


@pytest.mark.parametrize("command", ["cache", "detect"])
def test_nan_weights_are_refused_before_any_work(command, nan_checkpoint, bank_questions, tmp_path, capsys):
    if command == "cache":
        texts = tmp_path / "t.txt"
        texts.write_text("What is 2 + 3?\nHow many apples?\n")
        argv = [
            "cache",
            str(texts),
            "--model",
            str(nan_checkpoint),
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "a.h5"),
            "--no-progress",
        ]
    else:
        argv = [
            "detect",
            "ppl",
            str(bank_questions),
            "--model",
            str(nan_checkpoint),
            "--device",
            "cpu",
            "--store",
            str(tmp_path / "s.sqlite"),
            "-o",
            str(tmp_path / "s.csv"),
            "--no-progress",
        ]
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert "non-finite weights" in line and "attn.c_attn.weight" in line
    assert not (tmp_path / "a.h5").exists() and not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("command", ["cache", "detect"])
def test_non_finite_activations_and_logprobs_are_refused_at_their_source(
    command, overflowing_checkpoint, bank_questions, tmp_path, capsys
):
    if command == "cache":
        texts = tmp_path / "t.txt"
        texts.write_text("What is 2 + 3?\nHow many apples?\n")
        argv = [
            "cache",
            str(texts),
            "--model",
            str(overflowing_checkpoint),
            "--device",
            "cpu",
            "-o",
            str(tmp_path / "a.h5"),
            "--no-progress",
        ]
    else:
        argv = [
            "detect",
            "ppl",
            str(bank_questions),
            "--model",
            str(overflowing_checkpoint),
            "--device",
            "cpu",
            "--store",
            str(tmp_path / "s.sqlite"),
            "-o",
            str(tmp_path / "s.csv"),
            "--no-progress",
        ]
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert "non-finite" in line and ("activations" in line if command == "cache" else "log-probabilities" in line)
    assert not (tmp_path / "s.csv").exists()
    if command == "cache":
        from cache.store import ActivationStore

        assert not (tmp_path / "a.h5").exists() or len(ActivationStore(tmp_path / "a.h5")) == 0


def _scores(tmp_path: Path, ppl: np.ndarray, controls: np.ndarray) -> Path:
    ids = [f"q{i}" for i in range(len(ppl))]
    ScoreTable(ids, {"ppl": ppl}).write_csv(tmp_path / "s.csv")
    c = controls.shape[1]
    ControlTable(
        [i for i in ids for _ in range(c)], np.tile(np.arange(1, c + 1), len(ids)), {"ppl": controls.reshape(-1)}
    ).write_csv(tmp_path / "s.controls.csv")
    return tmp_path / "s.csv"


def test_all_nan_scores_give_no_verdict_and_exit_3(tmp_path, capsys):
    rng = np.random.default_rng(1)
    scores = _scores(tmp_path, np.full(16, np.nan), rng.normal(size=(16, 3)))
    assert (
        main(
            [
                "verdict",
                str(scores),
                "--controls",
                str(tmp_path / "s.controls.csv"),
                "-o",
                str(tmp_path / "v.json"),
                "--permutations",
                "200",
                "--bootstrap",
                "50",
            ]
        )
        == 3
    )
    out = capsys.readouterr().out
    assert "NO VERDICT" in out and "not flagged" not in out and "16 nan score" in out
    saved = json.loads((tmp_path / "v.json").read_text())
    assert saved["mode"] is None and saved["reject"] is None


def test_part_nan_scores_are_counted_where_the_verdict_is_shown(tmp_path, capsys):
    rng = np.random.default_rng(2)
    ppl = rng.normal(size=16)
    ppl[:8] = np.nan
    scores = _scores(tmp_path, ppl, rng.normal(size=(16, 3)))
    assert (
        main(
            [
                "verdict",
                str(scores),
                "--controls",
                str(tmp_path / "s.controls.csv"),
                "-o",
                str(tmp_path / "v.json"),
                "--permutations",
                "200",
                "--bootstrap",
                "50",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "8 (8 nan score)" in out
    saved = json.loads((tmp_path / "v.json").read_text())
    assert saved["detectors"]["ppl"]["n"] == 8 and saved["detectors"]["ppl"]["left_out"]["nan_score"] == 8


def test_greedy_decoding_refuses_non_finite_log_probs_at_the_step_that_makes_them(overflowing_checkpoint):
    """The decoding loop's own check (one host copy per step), not only teacher-forced scoring's:
    with the cache check already done, the first greedy step on an overflowing model is refused."""
    from cache.config import ModelConfig
    from cache.loading import load_model
    from probes.errors import NonFiniteError
    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    loaded = load_model(ModelConfig(source=str(overflowing_checkpoint), device="cpu", dtype="float32"))
    responder = LocalResponder(loaded, PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    responder._cache_checked = True  # its teacher-forced comparison would refuse first; test the loop itself
    with pytest.raises(NonFiniteError, match="non-finite log-probabilities"):
        responder.generate(["What is 2 + 3?"], GenerationParams(max_new_tokens=4))
