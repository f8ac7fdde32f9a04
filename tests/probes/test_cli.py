from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from cache.store import ActivationStore, parts_dir
from probes.cli import main


def write_texts(path, n, start=0):
    path.write_text(
        "".join(
            f"Item {i}: Ava has {i} apples and buys {i % 7 + 2} more. How many apples now?\n"
            for i in range(start, start + n)
        ),
        encoding="utf-8",
    )
    return path


def test_cache_then_info(tmp_path, toy_dirs, capsys):
    texts = write_texts(tmp_path / "t.txt", 12)
    out = tmp_path / "acts.h5"
    status = main(
        [
            "cache",
            str(texts),
            "--model",
            str(toy_dirs["qwen2"]),
            "-o",
            str(out),
            "--layers",
            "embed,0,-1",
            "--batch-size",
            "5",
            "--device",
            "cpu",
            "--no-progress",
        ]
    )
    assert status == 0
    assert "12 rows [3 layers (embed, 0, 2) x d=32] via hf" in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "12 texts x 3 layers x d=32 (float32)" in shown and "Qwen2ForCausalLM" in shown


def test_config_file_with_flag_override(tmp_path, toy_dirs, capsys):
    texts = write_texts(tmp_path / "t.txt", 4)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"model:\n  source: {toy_dirs['gpt2']}\n  device: cpu\nextraction:\n  layers: '0'\n  backend: nnsight\n"
    )
    out = tmp_path / "acts.h5"
    assert main(["cache", str(texts), "--config", str(config), "--layers", "1", "-o", str(out), "--no-progress"]) == 0
    store = ActivationStore(out)
    assert store.layer_labels == ("1",) and store.provenance["backend"] == "nnsight"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "/nonexistent/model"], "error: model path '/nonexistent/model' does not exist"),
        (["--model", "MODEL", "--layers", "7"], "error: layer 7 is out of range: the model has 3 blocks"),
        ([], "error: give the model with --model DIR"),
    ],
)
def test_user_errors_exit_2_without_traceback(tmp_path, toy_dirs, capsys, args, message):
    texts = write_texts(tmp_path / "t.txt", 2)
    args = [a.replace("MODEL", str(toy_dirs["gpt2"])) for a in args]
    assert main(["cache", str(texts), "-o", str(tmp_path / "a.h5"), "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_non_utf8_input_exit_2(tmp_path, toy_dirs, capsys):
    path = tmp_path / "t.txt"
    path.write_bytes(b"fine\n\xff\xfe broken\n")
    assert main(["cache", str(path), "--model", str(toy_dirs["gpt2"]), "-o", str(tmp_path / "a.h5")]) == 2
    assert "t.txt:2: not valid UTF-8" in capsys.readouterr().err


def test_store_from_other_model_refused(tmp_path, toy_dirs, other_gpt2_dir, capsys):
    texts = write_texts(tmp_path / "t.txt", 3)
    out = tmp_path / "acts.h5"
    assert main(["cache", str(texts), "--model", str(toy_dirs["gpt2"]), "-o", str(out), "--no-progress"]) == 0
    assert main(["cache", str(texts), "--model", str(other_gpt2_dir), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "was written with a different setup" in err and "weights_fingerprint: file has" in err


def lara_cache(texts, model, out, *extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return [
        sys.executable,
        "-m",
        "probes.cli",
        "-q",
        "cache",
        str(texts),
        "--model",
        str(model),
        "-o",
        str(out),
        "--device",
        "cpu",
        "--no-progress",
        *extra,
    ], env


@pytest.mark.slow
def test_sigkill_then_rerun_equals_uninterrupted(tmp_path, toy_dirs):
    texts = write_texts(tmp_path / "t.txt", 1000)
    extra = ("--batch-size", "4", "--flush-every", "4", "--layers", "embed,all,final_norm")
    clean = tmp_path / "clean.h5"
    cmd, env = lara_cache(texts, toy_dirs["llama"], clean, *extra)
    subprocess.run(cmd, env=env, check=True, capture_output=True)

    killed = tmp_path / "killed.h5"
    cmd, env = lara_cache(texts, toy_dirs["llama"], killed, *extra)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(parts_dir(killed).glob("part-*.h5"))) >= 20:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed; give it more texts"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not killed.exists()
    committed = len(list(parts_dir(killed).glob("part-*.h5")))
    assert committed >= 20

    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"{committed * 4} already cached" in result.stdout
    a, b = ActivationStore(clean), ActivationStore(killed)
    assert len(b) == 1000 and a.keys() == b.keys()
    all_texts = texts.read_text().splitlines()
    np.testing.assert_array_equal(a.get(all_texts), b.get(all_texts))
    assert not parts_dir(killed).exists()


def test_demo_is_the_demo_config_and_every_help_shows_examples(capsys):
    from pathlib import Path

    from probes.cli import build_parser
    from probes.pipeline.demo import demo_config_path

    assert demo_config_path() == Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    parser = build_parser()
    assert "examples:" in parser.format_help() and "lara run configs/demo.yaml" in parser.format_help()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subparsers.items():
        text = sub.format_help()
        if name == "testbed":
            text = next(a for a in sub._actions if a.dest == "testbed_command").choices["build"].format_help()
        assert "examples:" in text and "lara " in text.split("examples:")[1], name
