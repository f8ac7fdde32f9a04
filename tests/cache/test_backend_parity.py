"""Every backend pools the same numbers as plain Hugging Face, whatever the batch and padding.

The reference runs each text alone through the full ``*ForCausalLM`` with
``output_hidden_states=True``: block ℓ < L−1 is ``hidden_states[ℓ+1]``, the last block is read
with a forward hook (HF's last hidden state is final-normed), ``embed`` is ``hidden_states[0]``
and ``final_norm`` is ``hidden_states[L]``. Positions pooled: every non-special token.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cache.batching import collate
from cache.layers import resolve_layers
from cache.prompts import PromptEncoder

from ..conftest import ARCHS, BACKEND_NAMES, SAMPLE_TEXTS

TOL = 1e-5
BLOCKS = {"gpt2": lambda m: m.transformer.h, "llama": lambda m: m.model.layers, "qwen2": lambda m: m.model.layers}


def reference_pooled(loaded, arch: str, text: str, labels: tuple[str, ...]) -> np.ndarray:
    """[n_layers, d] float64, computed without any toolkit code."""
    tokenizer, model = loaded.tokenizer, loaded.model
    ids = tokenizer(text, return_tensors="pt")
    special = set(tokenizer.all_special_ids)
    positions = [i for i, t in enumerate(ids["input_ids"][0].tolist()) if t not in special]
    blocks = BLOCKS[arch](model)
    captured = {}
    handle = blocks[-1].register_forward_hook(
        lambda _m, _a, out: captured.__setitem__("last", out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.no_grad():
            hidden = model(**ids, output_hidden_states=True).hidden_states
    finally:
        handle.remove()
    n_blocks = len(blocks)
    assert not torch.allclose(hidden[n_blocks], captured["last"]), "final norm must differ from the last block output"
    rows = []
    for label in labels:
        if label == "embed":
            x = hidden[0]
        elif label == "final_norm":
            x = hidden[n_blocks]
        else:
            layer = int(label)
            x = hidden[layer + 1] if layer < n_blocks - 1 else captured["last"]
        rows.append(x[0, positions].double().mean(0).numpy())
    return np.stack(rows)


def pooled(extractor, loaded, texts, padding_side="right", layers=("embed", "all", "final_norm")) -> np.ndarray:
    selection = resolve_layers(layers, loaded.layout.n_blocks)
    encoded = PromptEncoder(loaded.tokenizer).encode(list(texts))
    batch = collate(encoded, loaded.tokenizer.pad_token_id, padding_side)
    out = extractor.pool(batch, selection)
    assert out.dtype == torch.float32 and out.device.type == "cpu"
    assert tuple(out.shape) == (len(texts), len(selection), loaded.layout.d_model)
    return out.numpy().astype(np.float64)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("arch", ARCHS)
def test_matches_hf_hidden_states(arch, backend, loaded_models, extractors):
    loaded = loaded_models[arch]
    selection = resolve_layers(("embed", "all", "final_norm"), loaded.layout.n_blocks)
    got = pooled(extractors(arch, backend), loaded, SAMPLE_TEXTS)
    for i, text in enumerate(SAMPLE_TEXTS):
        expected = reference_pooled(loaded, arch, text, selection.labels)
        np.testing.assert_allclose(got[i], expected, atol=TOL, rtol=0, err_msg=f"{arch}/{backend} text {i}")


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_batch_invariance(arch, backend, padding_side, loaded_models, extractors):
    """A short text pooled alone equals the same text pooled among longer ones."""
    loaded = loaded_models[arch]
    extractor = extractors(arch, backend)
    alone = pooled(extractor, loaded, ["Hi"], padding_side)
    crowd = pooled(extractor, loaded, [SAMPLE_TEXTS[0], "Hi", SAMPLE_TEXTS[3]], padding_side)
    np.testing.assert_allclose(crowd[1], alone[0], atol=TOL, rtol=0)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_subset_of_layers_and_early_stop(backend, loaded_models, extractors):
    """Asking for layer 0 only returns exactly that layer (the forward stops early)."""
    loaded = loaded_models["llama"]
    full = pooled(extractors("llama", backend), loaded, SAMPLE_TEXTS[:2], layers=("all",))
    first = pooled(extractors("llama", backend), loaded, SAMPLE_TEXTS[:2], layers=("0",))
    np.testing.assert_allclose(first[:, 0], full[:, 0], atol=TOL, rtol=0)
    embed_only = pooled(extractors("llama", backend), loaded, SAMPLE_TEXTS[:2], layers=("embed",))
    assert embed_only.shape[1] == 1


def test_hf_backend_stops_after_deepest_layer(loaded_models, extractors):
    loaded = loaded_models["gpt2"]
    calls = []
    blocks = loaded.model.transformer.h
    handles = [b.register_forward_hook(lambda _m, _a, _o, i=i: calls.append(i)) for i, b in enumerate(blocks)]
    try:
        pooled(extractors("gpt2", "hf"), loaded, ["Hi there"], layers=("0",))
    finally:
        for h in handles:
            h.remove()
    assert calls == [0]


def test_left_padding_without_position_ids_would_be_wrong(loaded_models):
    """Control: GPT-2 with left padding and HF's default positions is far off, so the
    invariance test above really exercises the position ids."""
    loaded = loaded_models["gpt2"]
    encoded = PromptEncoder(loaded.tokenizer).encode(["Hi", SAMPLE_TEXTS[0]])
    batch = collate(encoded, loaded.tokenizer.pad_token_id, "left")
    with torch.no_grad():
        base = loaded.model.transformer
        with_pos = base(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
        ).last_hidden_state
        without = base(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    mask = batch.pool_mask[0]
    assert (with_pos[0, mask] - without[0, mask]).abs().max() > 1e-2
