"""Full and read-only disks (issue 21, item 12), on real small file systems: a tmpfs mounted in a
private mount namespace (``unshare -m``), so nothing outside the test sees it. Before: a disk
that filled during ``lara cache`` or ``lara run`` ended in a segfault (exit 139) after h5py's
errno 28, and a read-only output path gave a traceback after the work (``lara detect`` generated
every answer before failing at the write). Now: one ``error:`` line, exit 2, checked before the
work where it can be; what was committed is kept and the rerun resumes from it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.torchrun import ENV, REPO


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work(),
    reason="this machine does not allow a private mount namespace "
    "(unshare -m needs root or user namespaces), so no small file system can be mounted",
)


def _in_namespace(script: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a bash ``script`` in a private mount namespace (its mounts vanish with it)."""
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-euo", "pipefail", "-c", script],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def _lara(*args: object) -> str:
    return " ".join(shlex.quote(str(a)) for a in [sys.executable, "-m", "probes.cli", *args])


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> Path:
    from generation.question_bank import sample_questions

    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text(
        "".join(f"{q.question} ({i})\n".replace("\n ", " ") for i, q in enumerate(sample_questions(400, seed=1)))
    )
    return path


@pytest.mark.slow
def test_a_disk_that_fills_during_lara_cache_gives_one_line_and_the_rerun_resumes(texts, toy_dirs, tmp_path):
    mount = tmp_path / "small"
    cache = _lara(
        "cache",
        texts,
        "--model",
        toy_dirs["gpt2"],
        "--device",
        "cpu",
        "-o",
        mount / "acts.h5",
        "--no-progress",
        "--flush-every",
        "16",
        "--batch-size",
        "16",
    )
    script = f"""
mkdir -p {mount} && mount -t tmpfs -o size=1m tmpfs {mount}
{cache} 2> {tmp_path}/first.err & pid=$!
for i in $(seq 1 3000); do [ -e {mount}/acts.h5.parts/part-000001.h5 ] && break; sleep 0.01; done
dd if=/dev/zero of={mount}/filler bs=1k count=4000 2>/dev/null || true   # another writer fills the disk
set +e; wait $pid; echo "first=$?"; set -e
ls {mount}/acts.h5.parts | grep -c '^part-.*h5$' | sed 's/^/shards=/'
rm {mount}/filler
{cache} > {tmp_path}/second.out 2> {tmp_path}/second.err; echo "second=$?"
python -c "from cache.store import ActivationStore; print('rows=%d' % len(ActivationStore('{mount}/acts.h5')))"
"""
    done = _in_namespace(script)
    assert done.returncode == 0, done.stderr[-3000:]
    out = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
    first_err = (tmp_path / "first.err").read_text()
    assert out["first"] == "2", first_err[-3000:]  # not 139: no segfault
    assert _last_line(first_err).startswith("error: no space left on the device") and "Traceback" not in first_err
    assert int(out["shards"]) >= 2  # the shards committed before the disk filled are kept
    assert out["second"] == "0" and out["rows"] == "400"
    assert f"{16 * int(out['shards'])} already cached" in (tmp_path / "second.out").read_text()


def test_a_disk_too_small_for_the_store_is_refused_before_extraction(texts, toy_dirs, tmp_path):
    mount = tmp_path / "tiny"
    done = _in_namespace(
        f"mkdir -p {mount} && mount -t tmpfs -o size=100k tmpfs {mount}\n"
        + _lara("cache", texts, "--model", toy_dirs["gpt2"], "--device", "cpu", "-o", mount / "a.h5", "--no-progress")
        + " || echo rc=$?"
    )
    assert "rc=2" in done.stdout and "Traceback" not in done.stderr
    assert "the activation store needs about" in _last_line(done.stderr) and "free" in _last_line(done.stderr)


def test_read_only_outputs_are_refused_before_the_work(bank_questions, texts, toy_dirs, tmp_path):
    ro = tmp_path / "ro"
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "questions": str(bank_questions),
                "model": {"source": str(toy_dirs["gpt2"]), "device": "cpu"},
                "lara": False,
                "detect": {"names": ["ppl"]},
                "run_dir": str(ro / "run"),
            }
        )
    )
    commands = {
        "detect": _lara(
            "detect",
            "ppl",
            bank_questions,
            "--model",
            toy_dirs["gpt2"],
            "--device",
            "cpu",
            "--store",
            tmp_path / "s.sqlite",
            "-o",
            ro / "s.csv",
            "--no-progress",
        ),
        "cache": _lara(
            "cache", texts, "--model", toy_dirs["gpt2"], "--device", "cpu", "-o", ro / "a.h5", "--no-progress"
        ),
        "run": _lara("run", config, "--no-progress"),
        "generate": _lara("generate", bank_questions, "-o", ro / "sets.jsonl", "--no-progress"),
    }
    script = f"mkdir -p {ro} && mount -t tmpfs -o ro tmpfs {ro}\n" + "\n".join(
        f"{command} 2> {tmp_path}/{name}.err && echo {name}=0 || echo {name}=$?" for name, command in commands.items()
    )
    done = _in_namespace(script)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in commands:
        err = (tmp_path / f"{name}.err").read_text()
        assert f"{name}=2" in done.stdout, (name, err[-2000:])
        assert _last_line(err).startswith("error: cannot write the") and "read-only" in _last_line(err), (
            name,
            err[-2000:],
        )
        assert "Traceback" not in err and "loaded" not in err, name  # refused before any model was loaded
    assert not (tmp_path / "s.sqlite").exists()  # lara detect generated nothing before refusing


def test_a_model_directory_without_its_tokenizer_is_named(toy_dirs, bank_questions, texts, tmp_path, capsys):
    import shutil

    from probes.cli import main

    model = tmp_path / "no-tokenizer"
    shutil.copytree(toy_dirs["gpt2"], model)
    for f in model.glob("tokenizer*"):
        f.unlink()
    for argv in (
        ["cache", str(texts), "--model", str(model), "--device", "cpu", "-o", str(tmp_path / "a.h5"), "--no-progress"],
        [
            "detect",
            "ppl",
            str(bank_questions),
            "--model",
            str(model),
            "--device",
            "cpu",
            "--store",
            str(tmp_path / "s.sqlite"),
            "-o",
            str(tmp_path / "s.csv"),
            "--no-progress",
        ],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("error: ") and "has no tokenizer" in err[-1] and "Traceback" not in "\n".join(err)


def test_a_byte_order_mark_is_read_by_every_command(bank_questions, toy_dirs, tmp_path, capsys):
    """Before: accepted by questions import and cache, refused by generate, detect and run."""
    from probes.cli import main

    bom = tmp_path / "bom.jsonl"
    lines = bank_questions.read_text(encoding="utf-8").splitlines()[:6]
    bom.write_bytes(b"\xef\xbb\xbf" + ("\n".join(lines) + "\n").encode("utf-8"))
    assert main(["generate", str(bom), "-o", str(tmp_path / "sets.jsonl"), "-K", "2", "-M", "2", "--no-progress"]) == 0
    assert (
        main(
            [
                "detect",
                "logprober",
                str(bom),
                "--model",
                str(toy_dirs["gpt2"]),
                "--device",
                "cpu",
                "--store",
                str(tmp_path / "s.sqlite"),
                "-o",
                str(tmp_path / "s.csv"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "s.csv"),
                "--labels",
                str(bom),
                "-o",
                str(tmp_path / "report"),
                "--bootstrap",
                "20",
                "--no-plots",
            ]
        )
        == 0
    )
    assert json.loads(lines[0])["id"] in (tmp_path / "s.csv").read_text()


@pytest.mark.slow
def test_a_full_disk_under_the_response_store_gives_one_line_and_the_rerun_resumes(bank_questions, toy_dirs, tmp_path):
    mount = tmp_path / "store"
    detect = _lara(
        "detect",
        "cdd",
        bank_questions,
        "--model",
        toy_dirs["gpt2"],
        "--device",
        "cpu",
        "--param",
        "cdd.n=30",
        "--param",
        "cdd.max_tokens=24",
        "--batch-size",
        "8",
        "--store",
        mount / "s.sqlite",
        "-o",
        tmp_path / "s.csv",
        "--no-progress",
    )
    count = "python -c \"import sqlite3; print('rows=%d' % sqlite3.connect('{}').execute('SELECT COUNT(*) FROM responses').fetchone()[0])\""
    script = f"""
mkdir -p {mount} && mount -t tmpfs -o size=300k tmpfs {mount}
set +e; {detect} > /dev/null 2> {tmp_path}/first.err; echo "first=$?"; set -e
{count.format(mount / "s.sqlite")}
mount -o remount,size=50m {mount}
{detect} > {tmp_path}/second.out 2> {tmp_path}/second.err; echo "second=$?"
"""
    done = _in_namespace(script)
    assert done.returncode == 0, done.stderr[-3000:]
    out = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
    first_err = (tmp_path / "first.err").read_text()
    assert out["first"] == "2" and "Traceback" not in first_err, first_err[-3000:]
    assert _last_line(first_err).startswith("error: the response store cannot be written")
    committed = int(out["rows"])
    assert committed > 0 and out["second"] == "0", (tmp_path / "second.err").read_text()[-2000:]
    second = (tmp_path / "second.out").read_text()
    assert f"{40 * 31 - committed} completions generated" in second  # what was committed is not generated again
