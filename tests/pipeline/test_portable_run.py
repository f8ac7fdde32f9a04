"""Runs that move (issue 55, SPEC §10 keys): a stage's ledger key holds what changes its result and
nothing else. A run finished at one batch size and device string resumes at another with nothing
redone and every output byte-identical; a run directory copied to another place, with its model
elsewhere and without its activations, finishes its later stages (and redoes the activations only
when a stage that reads them must run); a setting that changes results (dtype) still reruns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probes.pipeline import load_run_config, run_pipeline
from probes.pipeline.ledger import Ledger, stage_key
from probes.pipeline.portable import placement, portable

from .test_run import write_config

EVERY_STAGE = ["generate", "cache/rl", "metrics/rl", "score/rl", "detect/rl", "accuracy/rl", "fuse/rl", "verdict/rl"]


def _config(tmp_path: Path, testbed: Path, batch: int) -> Path:
    return write_config(
        tmp_path,
        testbed,
        controls=[],
        extraction={"layers": "all", "batch_size": batch},
        detect={
            "names": ["ppl", "cdd"],
            "prompt_format": "raw",
            "template": "Q: {prompt}\nA:",
            "batch_size": batch,
            "params": {"ppl": {"max_new_tokens": 16}, "cdd": {"n": 3, "max_tokens": 16}},
        },
        fusion=[],
    )


def _outputs(run_dir: Path) -> dict[str, bytes]:
    """Every output the ledger records, by path, as bytes."""
    files = {}
    for record in (run_dir / "ledger").glob("*.json"):
        data = json.loads(record.read_text())
        if "outputs" in data:
            for rel in data["outputs"]:
                path = run_dir / rel
                files[rel] = (
                    b"".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())
                    if path.is_dir()
                    else path.read_bytes()
                )
    return files


@pytest.fixture(scope="module")
def finished(smoke_testbed, tmp_path_factory):
    """A run finished at batch size 4 on device 'cpu'."""
    testbed, _ = smoke_testbed
    tmp = tmp_path_factory.mktemp("portable")
    path = _config(tmp, testbed, batch=4)
    result = run_pipeline(load_run_config(path, ["model.device=cpu"]), progress=False)
    assert "evaluate/rl" in result.ran
    return path


@pytest.mark.slow
def test_a_run_resumes_at_another_batch_size_and_device_with_nothing_redone(finished):
    run_dir = finished.parent / "run"
    before = _outputs(run_dir)
    moved = ["extraction.batch_size=16", "detect.batch_size=16", "model.device=auto", "extraction.flush_every=7"]
    again = run_pipeline(load_run_config(finished, moved), progress=False)
    assert again.ran == [] and set(EVERY_STAGE) <= set(again.skipped)
    assert _outputs(run_dir) == before  # byte for byte
    record = json.loads((run_dir / "ledger" / "cache__rl.json").read_text())
    assert record["placement"]["model.device"] == "cpu" and record["placement"]["extraction.batch_size"] == 4
    assert "device" not in record["inputs"]["model"] and "batch_size" not in record["inputs"]["extraction"]


@pytest.mark.slow
def test_a_changed_dtype_reruns_what_it_changes(finished, caplog):
    """Another dtype redoes the activations from nothing (the store made in float32 is removed: it
    would refuse bfloat16 rows); more similars redo them too but keep every row already there."""
    changed = run_pipeline(load_run_config(finished, ["model.dtype=bfloat16"]), progress=False)
    assert {"cache/rl", "detect/rl", "accuracy/rl"} <= set(changed.ran) and changed.skipped == ["generate"]
    back = run_pipeline(load_run_config(finished), progress=False)  # float32 again: every stage once more
    assert "cache/rl" in back.ran
    caplog.set_level("INFO", logger="probes.pipeline.stages")
    more = run_pipeline(load_run_config(finished, ["generation.similars=3"]), progress=False)
    assert "cache/rl" in more.ran
    cached = next(r.getMessage() for r in caplog.records if "already cached" in r.getMessage())
    assert int(cached.split(" already cached")[0].rsplit(" ", 1)[1]) > 0  # the rows of K = 2 kept
    run_pipeline(load_run_config(finished), progress=False)


@pytest.mark.slow
def test_a_run_copied_elsewhere_without_its_activations_finishes_there(finished, smoke_testbed, tmp_path):
    """The run directory and the model both at new paths, acts.h5 left behind: nothing is redone; a
    changed LaRA score setting runs the score alone; a changed metric setting brings the
    activations back first (its stage reads them), then redoes what follows."""
    testbed, _ = smoke_testbed
    run_pipeline(load_run_config(finished), progress=False)
    elsewhere = tmp_path / "other-machine"
    shutil.copytree(testbed, elsewhere / "testbed")
    shutil.copytree(finished.parent / "run", elsewhere / "run", ignore=shutil.ignore_patterns("acts.h5"))
    path = _config(elsewhere, elsewhere / "testbed", batch=16)
    assert not (elsewhere / "run" / "rl" / "acts.h5").exists()
    moved = run_pipeline(load_run_config(path), progress=False)
    assert moved.ran == [] and "cache/rl" in moved.skipped
    rescored = run_pipeline(load_run_config(path, ["score.folds=3"]), progress=False)
    assert rescored.ran == ["score/rl", "fuse/rl", "verdict/rl", "evaluate/rl"]
    assert not (elsewhere / "run" / "rl" / "acts.h5").exists()
    remeasured = run_pipeline(load_run_config(path, ["score.folds=3", "metrics.eps=1.0e-7"]), progress=False)
    assert remeasured.ran[:2] == ["cache/rl", "metrics/rl"] and (elsewhere / "run" / "rl" / "acts.h5").exists()


def test_portable_inputs_leave_out_placement_only():
    inputs = {
        "model": {"source": "/a/rl", "content": "abc", "device": "cuda:1", "dtype": "bfloat16", "device_map": None},
        "reference": {"source": "org/hub-model", "revision": "main", "device": "cpu"},
        "extraction": {"batch_size": 256, "max_batch_tokens": None, "layers": ["all"], "max_length": 512},
        "detect": {"batch_size": 64, "params": {"x": {"batch_size": 3}}, "endpoint": {"model": "m", "concurrency": 8}},
        "engine": {"engine": "vllm", "args": {"tensor_parallel_size": 8, "top_logprobs": 20}},
        "generator": {"algorithm": "offline-v2", "code": "d1", "toolkit_version": "0.0.0+unknown"},
    }
    expected = {
        "model": {"content": "abc", "dtype": "bfloat16"},
        "reference": {"source": "org/hub-model", "revision": "main"},  # a hub id keeps its name
        "extraction": {"layers": ["all"], "max_length": 512},
        "detect": {"params": {"x": {"batch_size": 3}}, "endpoint": {"model": "m"}},  # a detector's own setting stays
        "engine": {"engine": "vllm", "args": {"top_logprobs": 20}},
        "generator": {"algorithm": "offline-v2", "code": "d1"},
    }
    assert portable(inputs) == expected
    left = placement(inputs)
    assert left["model.device"] == "cuda:1" and left["model.source"] == "/a/rl"
    assert left["engine.args.tensor_parallel_size"] == 8 and left["generator.toolkit_version"] == "0.0.0+unknown"
    assert set(left) == {
        "model.source",
        "model.device",
        "model.device_map",
        "reference.device",
        "extraction.batch_size",
        "extraction.max_batch_tokens",
        "detect.batch_size",
        "detect.endpoint.concurrency",
        "engine.args.tensor_parallel_size",
        "generator.toolkit_version",
    }


def test_a_record_keyed_before_placement_was_left_out_still_counts(tmp_path):
    """A stage recorded with the whole inputs as its key (before this change) is done for the
    portable key of the same inputs; with another dtype it is not."""
    (tmp_path / "out.txt").write_text("x")
    inputs = {"model": {"content": "abc", "source": "/old/path", "device": "cuda", "dtype": "float32"}}
    ledger = Ledger(tmp_path)
    record = {
        "stage": "s",
        "key": stage_key(inputs),
        "inputs": inputs,
        "outputs": {"out.txt": ledger.digest(tmp_path / "out.txt")},
    }
    (tmp_path / "ledger" / "s.json").write_text(json.dumps(record))
    moved = {"model": {"content": "abc", "source": "/new/path", "device": "cpu", "dtype": "float32"}}
    assert ledger.is_done("s", moved)
    assert not ledger.is_done("s", {"model": {**moved["model"], "dtype": "bfloat16"}})


def test_dtype_auto_is_keyed_by_what_it_computes_in(toy_dirs, tmp_path):
    """Review of issue 55: ``dtype: auto`` is float32 on a CPU and the checkpoint's dtype on a GPU, so
    with the device out of the key a run moved between the two would have kept the other's
    results. The key holds what auto resolves to."""
    from cache.config import ModelConfig
    from probes.pipeline.stages import model_identity

    ledger = Ledger(tmp_path)
    on_cpu = model_identity(ModelConfig(source=str(toy_dirs["gpt2"]), device="cpu"), ledger)
    spread = model_identity(ModelConfig(source=str(toy_dirs["gpt2"]), device_map="auto"), ledger)
    explicit = model_identity(ModelConfig(source=str(toy_dirs["gpt2"]), device="cpu", dtype="float32"), ledger)
    assert on_cpu["dtype"] == "auto: float32" and spread["dtype"] == "auto: checkpoint"
    assert stage_key(portable({"model": on_cpu})) != stage_key(portable({"model": spread}))
    assert explicit["dtype"] == "float32"
