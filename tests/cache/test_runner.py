from __future__ import annotations

import numpy as np
import pytest

from cache.backends import create_extractor
from cache.batching import collate
from cache.config import CacheConfig, ExtractionConfig, ModelConfig
from cache.errors import InputError, StoreMismatchError
from cache.layers import resolve_layers
from cache.prompts import PromptEncoder
from cache.runner import run_cache
from cache.store import ActivationStore, parts_dir

TEXTS = [f"Question {i}: a train travels {10 * i + 3} km in {i % 4 + 1} hours; find its speed." for i in range(23)]


def config_for(path, **extraction):
    return CacheConfig(model=ModelConfig(source=str(path), device="cpu"), extraction=ExtractionConfig(**extraction))


def test_rows_equal_direct_extraction(tmp_path, toy_dirs, loaded_models, extractors):
    out = tmp_path / "acts.h5"
    config = config_for(toy_dirs["qwen2"], layers=("embed", "all"), batch_size=4)
    summary = run_cache(TEXTS + TEXTS[:3], out, config, loaded=loaded_models["qwen2"], progress=False)
    assert (summary.n_input, summary.n_unique, summary.n_computed, summary.n_already) == (26, 23, 23, 0)
    assert summary.n_rows == 23 and summary.layers == ("embed", "0", "1", "2") and summary.d_model == 32
    loaded = loaded_models["qwen2"]
    encoded = PromptEncoder(loaded.tokenizer, max_length=64).encode(TEXTS[:2])
    direct = extractors("qwen2", "hf").pool(
        collate(encoded, loaded.tokenizer.pad_token_id), resolve_layers(["embed", "all"], 3)
    )
    np.testing.assert_allclose(ActivationStore(out).get(TEXTS[:2]), direct.numpy(), atol=1e-6, rtol=0)
    assert summary.tokens_per_s > 0 and "23 computed" in summary.describe()


def test_rerun_and_append(tmp_path, toy_dirs, loaded_models):
    out = tmp_path / "acts.h5"
    config = config_for(toy_dirs["gpt2"])
    run_cache(TEXTS[:10], out, config, loaded=loaded_models["gpt2"], progress=False)
    before = ActivationStore(out).get(TEXTS[:10])
    again = run_cache(TEXTS[:10], out, config, loaded=loaded_models["gpt2"], progress=False)
    assert again.n_computed == 0 and again.n_already == 10
    more = run_cache(TEXTS, out, config, loaded=loaded_models["gpt2"], progress=False)
    assert more.n_computed == 13 and more.n_rows == 23
    np.testing.assert_array_equal(ActivationStore(out).get(TEXTS[:10]), before)


class CrashAfter:
    """Wraps an extractor and raises after ``n`` batches, like a crash mid-run."""

    def __init__(self, inner, n):
        self.inner, self.n, self.name = inner, n, inner.name

    def processing_flags(self):
        return self.inner.processing_flags()

    def pool(self, batch, layers):
        if self.n == 0:
            raise RuntimeError("simulated crash")
        self.n -= 1
        return self.inner.pool(batch, layers)


def test_interrupted_run_resumes_to_identical_rows(tmp_path, toy_dirs, loaded_models):
    loaded = loaded_models["llama"]
    config = config_for(toy_dirs["llama"], batch_size=3, flush_every=1)
    clean = tmp_path / "clean.h5"
    run_cache(TEXTS, clean, config, loaded=loaded, progress=False)
    broken = tmp_path / "broken.h5"
    extractor = CrashAfter(create_extractor("hf", loaded), n=4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_cache(TEXTS, broken, config, loaded=loaded, extractor=extractor, progress=False)
    assert not broken.exists() and len(list(parts_dir(broken).glob("part-*.h5"))) == 4
    resumed = run_cache(TEXTS, broken, config, loaded=loaded, progress=False)
    assert resumed.n_already == 12 and resumed.n_computed == 11
    a, b = ActivationStore(clean), ActivationStore(broken)
    assert a.keys() == b.keys()
    np.testing.assert_array_equal(a.get(TEXTS), b.get(TEXTS))
    assert not parts_dir(broken).exists()


def test_other_model_refused(tmp_path, toy_dirs, other_gpt2_dir, loaded_models):
    out = tmp_path / "acts.h5"
    run_cache(TEXTS[:3], out, config_for(toy_dirs["gpt2"]), loaded=loaded_models["gpt2"], progress=False)
    with pytest.raises(StoreMismatchError) as err:
        run_cache(TEXTS[:3], out, config_for(other_gpt2_dir), progress=False)
    message = str(err.value)
    assert "weights_fingerprint" in message and "tokenizer_fingerprint" not in message
    with pytest.raises(StoreMismatchError, match="backend"):
        run_cache(
            TEXTS[:3],
            out,
            config_for(toy_dirs["gpt2"], backend="nnsight"),
            loaded=loaded_models["gpt2"],
            progress=False,
        )


def test_empty_text_refused(tmp_path, toy_dirs, loaded_models):
    with pytest.raises(InputError, match="text 1 is empty"):
        run_cache(["fine", "  "], tmp_path / "a.h5", config_for(toy_dirs["gpt2"]), loaded=loaded_models["gpt2"])


def test_long_texts_truncated_and_flagged(tmp_path, toy_dirs, loaded_models):
    out = tmp_path / "acts.h5"
    long_text = "The train travels 60 km in 2 hours. " * 30
    summary = run_cache(
        ["short one", long_text], out, config_for(toy_dirs["gpt2"]), loaded=loaded_models["gpt2"], progress=False
    )
    assert summary.n_truncated == 1
    meta = ActivationStore(out).metadata(["short one", long_text])
    assert meta["truncated"].tolist() == [False, True] and meta["n_tokens"][1] == 64
    with pytest.raises(InputError, match="over the limit of 64"):
        run_cache(
            [long_text + "!"],
            tmp_path / "b.h5",
            config_for(toy_dirs["gpt2"], on_long="error"),
            loaded=loaded_models["gpt2"],
        )


def test_provenance_records_the_run(tmp_path, toy_dirs, loaded_models):
    out = tmp_path / "acts.h5"
    run_cache(
        TEXTS[:2],
        out,
        config_for(toy_dirs["llama"], storage_dtype="float16", prompt_format="chat"),
        loaded=loaded_models["llama"],
        progress=False,
    )
    p = ActivationStore(out).provenance
    assert p["model"]["location"] == str(toy_dirs["llama"].resolve()) and p["model"]["class"] == "LlamaForCausalLM"
    assert p["weights_fingerprint"] == loaded_models["llama"].weights_fingerprint
    assert p["backend"] == "hf" and p["backend_flags"]["runs"] == "base_model"
    assert p["layers"] == ["0", "1", "2"] and p["pooling"] == {"kind": "mean", "span": "text"}
    assert p["prompt"]["prompt_format"] == "chat" and p["prompt"]["chat_template_sha256"]
    assert p["compute_dtype"] == "float32" and p["storage_dtype"] == "float16"
    assert p["toolkit_version"] and p["libraries"]["torch"] and p["config"]["extraction"]["storage_dtype"] == "float16"
    assert p["schema_version"] == 1
