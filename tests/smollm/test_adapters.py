"""PEFT adapters as model sources (SPEC §9): the same scores and activations as the merged
checkpoint, to 1e-4 in float32, through the CLI, a run config and the Python API.

The adapter is a real PEFT LoRA (random, non-zero B so that it changes the model) on a tiny
Llama built here; the merged checkpoint is PEFT's own ``merge_and_unload`` saved with
``save_pretrained``: an independent path to the same weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

peft = pytest.importorskip("peft")

from cache.config import ModelConfig  # noqa: E402
from cache.loading import load_model  # noqa: E402
from probes.cli import main  # noqa: E402
from probes.scores import ScoreTable  # noqa: E402

QUESTIONS = ["What is 3 plus 4?", "Ana has 5 apples and eats 2. How many are left?", "What is 6 times 7?"]
PARAMS = ["--param", "ppl.max_new_tokens=8", "--param", "min_k.max_new_tokens=8"]


def _lora(model_dir: Path, out: Path, seed: int, base_name: str) -> Path:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    peft.get_peft_model(model, config).save_pretrained(out)
    adapter_config = json.loads((out / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = base_name
    (out / "adapter_config.json").write_text(json.dumps(adapter_config))
    return out


def _merged(model_dir: Path, adapters: list[Path], out: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    for adapter in adapters:
        model = peft.PeftModel.from_pretrained(model, adapter).merge_and_unload()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapted(toy_dirs, tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    base = toy_dirs["llama"]
    one = _lora(base, root / "sft", seed=1, base_name=str(base))
    two = _lora(_merged(base, [one], root / "sft-merged"), root / "rl", seed=2, base_name="../sft")
    questions = root / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS)))
    return {
        "base": base,
        "sft": one,
        "rl": two,
        "merged_sft": root / "sft-merged",
        "merged_rl": _merged(base, [one, two], root / "rl-merged"),
        "questions": questions,
        "root": root,
    }


def _detect(source: Path, adapted: dict, name: str, *extra: str) -> ScoreTable:
    out = adapted["root"] / f"{name}.csv"
    argv = ["detect", "ppl,min_k", str(adapted["questions"]), "--model", str(source), "--device", "cpu"]
    argv += ["--prompt-format", "raw", *PARAMS, "--store", str(adapted["root"] / f"{name}.sqlite")]
    assert main([*argv, *extra, "-o", str(out), "--no-progress"]) == 0
    return ScoreTable.read_csv(out.with_suffix(".raw.csv"))


def _close(a: ScoreTable, b: ScoreTable) -> None:
    assert a.ids == b.ids
    for column in ("perplexity", "min_k_logprob"):
        np.testing.assert_allclose(a.columns[column], b.columns[column], rtol=0, atol=1e-4)


def test_the_cli_scores_an_adapter_as_its_merged_checkpoint(adapted):
    merged = _detect(adapted["merged_sft"], adapted, "merged-sft")
    _close(_detect(adapted["sft"], adapted, "adapter-sft"), merged)
    base = _detect(adapted["base"], adapted, "base")
    assert not np.allclose(base.columns["perplexity"], merged.columns["perplexity"], atol=1e-3)  # the adapter matters


def test_an_adapter_on_an_adapter_is_merged_in_order(adapted):
    # rl names ../sft as its base, resolved beside it; sft names the toy base
    _close(_detect(adapted["rl"], adapted, "adapter-rl"), _detect(adapted["merged_rl"], adapted, "merged-rl"))


def test_base_given_on_the_command_line_wins_over_the_adapters_own(adapted):
    # rl on the plain base (not on sft): the same as merging rl alone into the base
    alone = _merged(adapted["base"], [adapted["rl"]], adapted["root"] / "rl-alone")
    _close(
        _detect(adapted["rl"], adapted, "rl-on-base", "--base", str(adapted["base"])),
        _detect(alone, adapted, "merged-rl-alone"),
    )


def test_the_api_and_a_run_config_score_an_adapter_as_its_merged_checkpoint(adapted):
    import probes
    from probes.pipeline.config import load_run_config
    from probes.pipeline.run import run_pipeline

    params = {"ppl": {"max_new_tokens": 8}, "min_k": {"max_new_tokens": 8}}
    kwargs = dict(detectors="ppl,min_k", params=params, prompt_format="raw")
    rows = [{"id": f"q{i}", "question": q} for i, q in enumerate(QUESTIONS)]
    via_api = probes.detect(str(adapted["rl"]), rows, store=adapted["root"] / "api.sqlite", **kwargs)
    merged = _detect(adapted["merged_rl"], adapted, "merged-rl-api")
    _close(ScoreTable(list(via_api.raw.index), {c: via_api.raw[c].to_numpy() for c in via_api.raw.columns}), merged)

    config = adapted["root"] / "run.yaml"
    config.write_text(
        f"questions: {adapted['questions']}\nrun_dir: {adapted['root'] / 'run'}\nlara: false\n"
        f"model: {{source: {adapted['rl']}, device: cpu, dtype: float32}}\n"
        "detect: {names: [ppl, min_k], prompt_format: raw, params: "
        "{ppl: {max_new_tokens: 8}, min_k: {max_new_tokens: 8}}}\n"
        "calibration: {controls: 0}\n"
    )
    run_pipeline(load_run_config(config), progress=False)
    _close(ScoreTable.read_csv(adapted["root"] / "run" / "model" / "detectors.raw.csv"), merged)
    from cache.sources import resolve_source

    rl, sft = resolve_source(str(adapted["rl"])), resolve_source(str(adapted["sft"]))
    report = (adapted["root"] / "run" / "model" / "report" / "report.md").read_text()
    assert f"adapter rl (sha256 {rl.digest[:12]}) on adapter sft (sha256 {sft.digest[:12]})" in report


def test_pooled_activations_of_an_adapter_are_the_merged_checkpoints(adapted):
    import probes

    for backend in ("hf", "transformer_lens", "nnsight"):
        via_adapter = probes.pool(str(adapted["rl"]), QUESTIONS, backend=backend)
        via_merged = probes.pool(str(adapted["merged_rl"]), QUESTIONS, backend=backend)
        torch.testing.assert_close(via_adapter, via_merged, rtol=0, atol=1e-4)


def test_the_adapters_identity_is_in_the_provenance_and_store_key(adapted):
    loaded = load_model(ModelConfig(source=str(adapted["rl"]), device="cpu"))
    identity = loaded.source.identity()
    assert identity["kind"] == "adapter" and identity["base"]["kind"] == "adapter"
    assert identity["base"]["base"] == {"kind": "checkpoint", "location": str(adapted["base"].resolve())}
    from probes.responders.local import LocalResponder

    # the store key names the adapters by digest, not the base's path (moving it keeps the answers)
    assert LocalResponder(loaded).identity["source"] == {
        "kind": "adapter",
        "adapter_sha256": identity["adapter_sha256"],
        "base": {
            "kind": "adapter",
            "adapter_sha256": identity["base"]["adapter_sha256"],
            "base": {"kind": "checkpoint"},
        },
    }


def test_an_adapter_loads_without_bars_or_deprecation_warnings(adapted, capfd):
    """Issue 55: every adapter merge printed transformers' 'Loading weights' bar and the FutureWarning
    PEFT's use of a deprecated transformers attribute raises. A load is quiet now (its one log line
    aside), and transformers' bars are on again afterwards."""
    import warnings

    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as in a fresh session (an earlier --no-progress turns them off)
    capfd.readouterr()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            load_model(ModelConfig(source=str(adapted["rl"]), device="cpu"))
        captured = capfd.readouterr()
        assert "Loading weights" not in captured.err and "%|" not in captured.err, captured.err
        assert hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()
