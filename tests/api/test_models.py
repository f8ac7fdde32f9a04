"""The Python API's models and activations (issue 23): a loaded model of each library accepted,
with numbers equal to the path route, or refused in one clear message; train mode switched off;
a bare string is one text where one text is meant and refused where a list is; ``store[...]``,
negative layers and ``as_torch``."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import probes
from cache.errors import InputError
from cache.store import ActivationStore

TEXTS = ["What is 2 + 3?", "A train travels 60 km in 1.5 hours. What is its average speed?", "Hi there"]


@pytest.fixture(scope="module")
def gpt2(toy_dirs):
    return toy_dirs["gpt2"]


@pytest.fixture(scope="module")
def by_path(gpt2):
    return probes.pool(probes.load_model(gpt2, device="cpu"), TEXTS).numpy()


def hf_pair(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_a_model_in_train_mode_is_put_in_eval_mode_and_equals_the_path_route(gpt2, by_path, caplog):
    model, tokenizer = hf_pair(gpt2)
    model.train()  # what a notebook may hold after fine-tuning: dropout on
    with caplog.at_level(logging.WARNING):
        loaded = probes.load_model(model, tokenizer)
    assert not model.training and "put in eval mode" in caplog.text
    first, second = probes.pool(loaded, TEXTS).numpy(), probes.pool(loaded, TEXTS).numpy()
    np.testing.assert_array_equal(first, second)  # before: two runs of one text differed by 1.83
    np.testing.assert_allclose(first, by_path, atol=1e-5)


def test_a_transformer_bridge_and_an_nnsight_model_give_the_path_route_numbers(gpt2, by_path):
    from nnsight import LanguageModel
    from transformer_lens.model_bridge import TransformerBridge

    model, tokenizer = hf_pair(gpt2)
    bridge = TransformerBridge.boot_transformers(str(gpt2), hf_model=model, tokenizer=tokenizer, device="cpu")
    np.testing.assert_allclose(probes.pool(bridge, TEXTS).numpy(), by_path, atol=1e-5)
    lazy = LanguageModel(str(gpt2), tokenizer=tokenizer)  # not dispatched: meta weights until loaded
    np.testing.assert_allclose(probes.pool(lazy, TEXTS).numpy(), by_path, atol=1e-5)
    for backend in ("transformer_lens", "nnsight"):  # the backends take the wrapped model too
        np.testing.assert_allclose(probes.pool(bridge, TEXTS, backend=backend).numpy(), by_path, atol=1e-4)


def test_what_cannot_be_audited_is_refused_with_what_can(gpt2):
    class HookedTransformer(torch.nn.Module):  # TransformerLens 3's class (removed in 4.x): converted weights
        pass

    with pytest.raises(TypeError, match="HookedTransformer holds converted weights .* pass a TransformerBridge"):
        probes.load_model(HookedTransformer())
    with pytest.raises(TypeError, match="cannot audit a int: pass a checkpoint directory .* nnsight LanguageModel"):
        probes.load_model(3)
    model, _ = hf_pair(gpt2)
    # issue 35, item 8: the public entry is named (before: the internal wrap_model(model, tokenizer))
    with pytest.raises(TypeError, match=r"needs its tokenizer: probes\.load_model\(model, tokenizer\)"):
        probes.load_model(model)
    # a bare backbone has no LM head: refused as not a *ForCausalLM (before: "needs its tokenizer")
    with pytest.raises(TypeError, match=r"has no language-model head, so it is not a \*ForCausalLM"):
        probes.load_model(model.transformer, hf_pair(gpt2)[1])
    assert probes.load_model(probes.load_model(gpt2, device="cpu")).layout.n_blocks == 3  # a LoadedModel as is


def test_bare_strings_and_the_store_for_humans(gpt2, by_path, tmp_path):
    from cache.config import CacheConfig, ModelConfig
    from cache.runner import run_cache

    with pytest.raises(InputError, match="must be a list of strings, got one string \\('Hello'\\); pass \\[text\\]"):
        run_cache(
            "Hello", tmp_path / "x.h5", CacheConfig(model=ModelConfig(source=str(gpt2)))
        )  # before: 5 one-letter rows
    model = probes.load_model(gpt2, device="cpu")
    assert probes.pool(model, "Hi there").shape == (1, 3, 32)  # a plain string is one text
    store = probes.cache_activations(model, TEXTS, tmp_path / "acts.h5", layers="all")
    assert isinstance(store, ActivationStore) and len(store) == 3
    np.testing.assert_allclose(store[TEXTS[0]], by_path[0], atol=1e-6)  # store[text] -> [n_layers, d]
    np.testing.assert_allclose(store[[TEXTS[2], TEXTS[0]]], by_path[[2, 0]], atol=1e-6)
    assert store.get("Hi there").shape == (1, 3, 32)  # before: looked up 'H', 'i', ' ', …
    last = store.get(TEXTS, layers=-1, as_torch=True)  # before: KeyError for a negative layer
    assert isinstance(last, torch.Tensor) and last.shape == (3, 1, 32)
    np.testing.assert_allclose(last.numpy()[:, 0], by_path[:, 2], atol=1e-6)
    assert store.get(TEXTS, layers=[-3, "2"]).shape == (3, 2, 32)
    with pytest.raises(KeyError, match="layer '-4' is not stored"):
        store.get(TEXTS, layers=[-7])
    assert repr(store).startswith(f"ActivationStore('{tmp_path / 'acts.h5'}': 3 texts × 3 layers × d_model 32")
    assert probes.open_store(tmp_path / "acts.h5")["Hi there"].shape == (3, 32)


def _greedy(loaded, n=12):
    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    responder = LocalResponder(loaded, PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    return [row[0] for row in responder.generate(TEXTS, GenerationParams(max_new_tokens=n))]


def test_a_bridge_and_an_nnsight_model_generate_what_the_checkpoint_generates(gpt2, toy_dirs):
    """Issue 33, item 6: a wrapped model is unwrapped for generation too; its KV-cached decoding is
    checked against teacher forcing before the first answer (a bridge was seen to decode garbage
    elsewhere; here, TransformerLens 4.3 with transformers 5.23, it decodes as the checkpoint does)."""
    from nnsight import LanguageModel
    from transformer_lens.model_bridge import TransformerBridge

    for arch in ("gpt2", "qwen2"):
        expected = _greedy(probes.load_model(toy_dirs[arch], device="cpu"))
        bridge = TransformerBridge.boot_transformers(str(toy_dirs[arch]), device="cpu")
        nn_model = LanguageModel(str(toy_dirs[arch]), dispatch=True)
        for wrapped in (bridge, nn_model):
            got = _greedy(probes.load_model(wrapped))
            assert [g.token_ids for g in got] == [e.token_ids for e in expected]
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g.logprobs, e.logprobs, atol=1e-4)


def _with_a_broken_kv_cache(path):
    """The checkpoint at ``path`` (model, tokenizer), its model reading wrong positions whenever it is
    given a KV cache (as a wrapper that mishandles the cache would)."""
    model, tokenizer = hf_pair(path)
    forward = model.forward

    def broken(*args, **kwargs):
        if kwargs.get("past_key_values") is not None and kwargs.get("position_ids") is not None:
            kwargs["position_ids"] = kwargs["position_ids"] + 7
        return forward(*args, **kwargs)

    model.forward = broken
    return model, tokenizer


def test_a_model_whose_kv_cache_decodes_wrongly_is_refused_for_generation(gpt2):
    """A planted fault: the model reads wrong positions whenever it is given a KV cache (as a
    wrapper that mishandles the cache would). Without the check its answers differ silently."""
    from probes.errors import ConfigError

    model, tokenizer = _with_a_broken_kv_cache(gpt2)
    loaded = probes.load_model(model, tokenizer)
    with pytest.raises(
        ConfigError, match="decodes differently with its KV cache than without .* pass the Hugging Face model"
    ):
        _greedy(loaded)


def test_a_model_whose_kv_cache_decodes_wrongly_is_refused_for_scoring_too(gpt2):
    """Issue 55's review: scoring reuses a shared prefix's KV cache (ReCaLL's prefix), so a model
    that mishandles the cache must be refused before a batch is scored, not only before generation."""
    from probes.errors import ConfigError
    from probes.responders.local import LocalResponder, PromptFormat

    model, tokenizer = _with_a_broken_kv_cache(gpt2)
    responder = LocalResponder(probes.load_model(model, tokenizer), PromptFormat(mode="raw"))
    prefix = "Two cats and a dog sat on the mat. "
    with pytest.raises(ConfigError, match="decodes differently with its KV cache than without"):
        responder.score([prefix + "What is 2 + 3?", prefix + "Half of 8?"], [" Five.", " Four."])
