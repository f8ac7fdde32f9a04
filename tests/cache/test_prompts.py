"""Pool masks cover exactly the text's own tokens; long texts follow the documented policy."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from cache.batching import collate
from cache.errors import ConfigError, InputError
from cache.layers import resolve_layers
from cache.prompts import PromptEncoder

TEXT = "Solve for $x$: $3x - 4 = -10$. Then add [BLANK]."


def pooled_text(tokenizer, encoded) -> str:
    return tokenizer.decode(encoded.input_ids[encoded.pool_mask].tolist())


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_raw_pool_mask_is_the_text(arch, loaded_models):
    tokenizer = loaded_models[arch].tokenizer
    (enc,) = PromptEncoder(tokenizer).encode([TEXT])
    assert pooled_text(tokenizer, enc) == TEXT
    assert enc.pool_mask.dtype == bool and not enc.truncated


def test_bos_is_excluded_unless_pool_span_all(loaded_models):
    tokenizer = loaded_models["llama"].tokenizer
    (enc,) = PromptEncoder(tokenizer).encode([TEXT])
    assert enc.input_ids[0] == tokenizer.bos_token_id
    assert not enc.pool_mask[0] and enc.pool_mask[1:].all()
    (enc_all,) = PromptEncoder(tokenizer, pool_span="all").encode([TEXT])
    assert enc_all.pool_mask.all()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_chat_format_pools_only_the_text(arch, loaded_models):
    tokenizer = loaded_models[arch].tokenizer
    encoder = PromptEncoder(tokenizer, prompt_format="chat", system_prompt="You are a careful solver.")
    (enc,) = encoder.encode([TEXT])
    prompt = tokenizer.decode(enc.input_ids.tolist())
    assert "<|im_start|>user" in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert "careful solver" in prompt
    assert pooled_text(tokenizer, enc) == TEXT
    assert enc.n_pooled < len(enc) - 8  # the template wrapper is excluded
    (enc_all,) = PromptEncoder(tokenizer, prompt_format="chat", pool_span="all").encode([TEXT])
    assert enc_all.pool_mask.all()


def test_chat_pooling_equals_mean_over_text_positions(loaded_models, extractors):
    """The pooled chat activation is the mean over the text's positions inside the template."""
    loaded = loaded_models["qwen2"]
    encoder = PromptEncoder(loaded.tokenizer, prompt_format="chat")
    (enc,) = encoder.encode([TEXT])
    out = extractors("qwen2", "hf").pool(collate([enc], loaded.tokenizer.pad_token_id), resolve_layers(["1"], 3))
    with torch.no_grad():
        hidden = loaded.model(input_ids=torch.from_numpy(enc.input_ids)[None], output_hidden_states=True).hidden_states[
            2
        ]
    expected = hidden[0, torch.from_numpy(enc.pool_mask)].double().mean(0)
    np.testing.assert_allclose(out[0, 0].double().numpy(), expected.numpy(), atol=1e-5, rtol=0)


def test_chat_without_template_is_refused(loaded_models):
    tokenizer = loaded_models["gpt2"].tokenizer_copy()
    tokenizer.chat_template = None
    with pytest.raises(ConfigError, match="no chat template"):
        PromptEncoder(tokenizer, prompt_format="chat")


def test_long_text_truncated_with_counted_warning(loaded_models, caplog):
    tokenizer = loaded_models["gpt2"].tokenizer
    long_text = " ".join(["The train travels 60 km."] * 40)
    encoder = PromptEncoder(tokenizer, max_length=64)
    with caplog.at_level(logging.WARNING, logger="cache.prompts"):
        short, long = encoder.encode(["Hi there", long_text])
    assert not short.truncated and long.truncated and len(long) == 64
    assert "1 of 2 texts exceeded 64 tokens" in caplog.text


def test_long_text_error_policy(loaded_models):
    tokenizer = loaded_models["gpt2"].tokenizer
    encoder = PromptEncoder(tokenizer, max_length=16, on_long="error")
    with pytest.raises(InputError, match=r"text 1 is \d+ tokens long, over the limit of 16"):
        encoder.encode(["Hi", "word " * 50])


def test_describe_records_what_changes_numbers(loaded_models):
    tokenizer = loaded_models["qwen2"].tokenizer
    raw = PromptEncoder(tokenizer).describe()
    chat = PromptEncoder(tokenizer, prompt_format="chat", system_prompt="S").describe()
    assert raw["chat_template_sha256"] is None and raw["prompt_format"] == "raw"
    assert len(chat["chat_template_sha256"]) == 64 and chat["system_prompt"] == "S"
