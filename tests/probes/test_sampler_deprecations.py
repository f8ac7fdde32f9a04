"""The built-in KV-cached sampler uses no deprecated transformers call (issue 42, item 5).

Every warning transformers raises while the sampler runs — its first forward, the cache handed
back step by step, and the rows that finish early dropped from the cache — is an error here,
whether raised through ``warnings`` or logged by transformers' own logger; sampled and greedy
rows of uneven lengths exercise each path, on a model with absolute positions (GPT-2) and one with
rotary ones and grouped heads (Llama).
"""

from __future__ import annotations

import logging
import warnings

import pytest

from cache.config import ModelConfig
from cache.loading import load_model
from probes.responders.base import GenerationParams
from probes.responders.local import LocalResponder, PromptFormat


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_sampler_raises_no_deprecation_warning(arch, toy_dirs, caplog):
    responder = LocalResponder(
        load_model(ModelConfig(source=str(toy_dirs[arch]), device="cpu")), PromptFormat(mode="raw"), batch_size=4
    )
    # the long prompt leaves room for fewer tokens in the 64-position context: its row stops early
    prompts = ["a b", "c d e f g h", "x", " ".join(["q"] * 50)]
    caplog.set_level(logging.WARNING, logger="transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        sampled = responder.generate(prompts, GenerationParams(max_new_tokens=24, temperature=1.0, n=2))
        greedy = responder.generate(prompts, GenerationParams(max_new_tokens=24))
    lengths = {len(g.token_ids) for rows in sampled + greedy for g in rows}
    assert len(lengths) > 1  # rows finished at different steps: the cache was reordered
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("transformers")]
    assert not logged, logged
