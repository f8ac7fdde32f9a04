"""The in-process LLM backend (``generation.backend: local``): a real (tiny) model in this process
answers the generator's requests, each under its JSON schema; answers are cached like an
endpoint's; a model without a chat template is refused with what to do."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from generation.config import GenerationConfig, LocalConfig
from generation.errors import ConfigError
from generation.llm import ResponseCache, build_request
from generation.local_client import LocalChatClient

SCHEMA = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 6}, "minItems": 2, "maxItems": 2}


@pytest.fixture(scope="module")
def chat_model(toy_dirs):
    return toy_dirs["llama"]  # the toy Llama ships a chat template (chat_template.jinja)


def test_a_schema_request_parses_and_a_repeat_is_served_from_the_cache(chat_model, tmp_path):
    client = LocalChatClient(LocalConfig(model=str(chat_model)), ResponseCache(tmp_path / "cache"))
    fmt = {"type": "json_schema", "json_schema": {"name": "t", "strict": True, "schema": SCHEMA}}
    body = build_request("local", [{"role": "user", "content": "two words"}], 1.0, 5, 80, fmt)
    first = asyncio.run(client.complete(body))
    items = json.loads(first)
    assert len(items) == 2 and all(isinstance(i, str) and 1 <= len(i) <= 6 for i in items)
    again = asyncio.run(client.complete(body))
    assert again == first and client.stats.api_calls == 1 and client.stats.cache_hits == 1
    assert client.stats.completion_tokens > 0


def test_a_model_without_a_chat_template_is_refused(toy_dirs, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(toy_dirs["llama"], bare)
    (bare / "chat_template.jinja").unlink()
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    client = LocalChatClient(LocalConfig(model=str(bare)), ResponseCache(tmp_path / "cache"))
    body = build_request("local", [{"role": "user", "content": "hi"}], 0.0, 0, 4)
    with pytest.raises(ValueError, match="no chat template"):
        asyncio.run(client.complete(body))


def test_the_local_backend_needs_its_model_and_records_it():
    with pytest.raises(ConfigError, match="'local.model' is required"):
        GenerationConfig.from_dict({"backend": "local"})
    from generation.identity import generator_identity

    identity = generator_identity(GenerationConfig.from_dict({"backend": "local", "local": {"model": "/m"}}))
    assert identity["backend"] == "local" and identity["model"] == "/m" and "base_url" not in identity
    assert identity["structured"] is True and identity["answers"]["samples"] == 5
