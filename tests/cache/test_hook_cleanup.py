"""Hooks registered for an extraction are gone after an exception raised inside it."""

from __future__ import annotations

import pytest
import torch

from cache.batching import collate
from cache.layers import resolve_layers
from cache.prompts import PromptEncoder

from ..conftest import BACKEND_NAMES


def torch_hook_count(module: torch.nn.Module) -> int:
    return sum(
        len(m._forward_hooks) + len(m._forward_pre_hooks) + len(getattr(m, "_forward_hooks_with_kwargs", {}))
        for m in module.modules()
    )


def tl_hook_count(bridge) -> int:
    return sum(len(point.fwd_hooks) for point in bridge.hook_dict.values())


def wrapped_module(extractor) -> torch.nn.Module:
    if extractor.name == "hf":
        return extractor.loaded.model
    if extractor.name == "transformer_lens":
        return extractor.bridge.original_model
    return extractor.model._module


def make_batch(loaded, texts):
    return collate(PromptEncoder(loaded.tokenizer).encode(texts), loaded.tokenizer.pad_token_id)


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_hooks_removed_after_exception_mid_forward(backend, loaded_models, extractors):
    loaded = loaded_models["llama"]
    extractor = extractors("llama", backend)
    selection = resolve_layers(("embed", "all", "final_norm"), loaded.layout.n_blocks)
    batch = make_batch(loaded, ["What is 2 + 2?", "Hi"])
    before = extractor.pool(batch, selection)
    module = wrapped_module(extractor)
    hooks_before = torch_hook_count(module)
    tl_before = tl_hook_count(extractor.bridge) if backend == "transformer_lens" else 0

    def explode(*_args):
        raise Boom("injected failure inside block 1")

    # The failure is raised half-way through the forward pass (in block 1's first linear layer),
    # after the extraction's own hooks on embed and block 0 have already fired.
    linear = next(m for name, m in module.named_modules() if ".layers.1." in name and isinstance(m, torch.nn.Linear))
    injected = linear.register_forward_pre_hook(explode)
    try:
        with pytest.raises(Boom):
            extractor.pool(batch, selection)
    finally:
        injected.remove()
    assert torch_hook_count(module) == hooks_before
    if backend == "transformer_lens":
        assert tl_hook_count(extractor.bridge) == tl_before == 0
    after = extractor.pool(batch, selection)
    torch.testing.assert_close(after, before, atol=0, rtol=0)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_hooks_removed_after_bad_input(backend, loaded_models, extractors):
    loaded = loaded_models["gpt2"]
    extractor = extractors("gpt2", backend)
    selection = resolve_layers(("all",), loaded.layout.n_blocks)
    batch = make_batch(loaded, ["What is 2 + 2?"])
    batch.input_ids[0, 0] = 10**6  # out of the vocabulary: the embedding lookup raises
    module = wrapped_module(extractor)
    hooks_before = torch_hook_count(module)
    with pytest.raises((IndexError, RuntimeError)):
        extractor.pool(batch, selection)
    assert torch_hook_count(module) == hooks_before
    if backend == "transformer_lens":
        assert tl_hook_count(extractor.bridge) == 0
