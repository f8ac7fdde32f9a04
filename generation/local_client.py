"""The in-process LLM backend (``generation.backend: local``): a Hugging Face model in this process
answers the LLM generator's chat requests, each decoded under its JSON schema.

:class:`LocalChatClient` is the :class:`generation.llm.ChatClient` of a model on this machine: the
same request bodies (messages, temperature, seed, ``max_tokens``, ``response_format``), the same
response cache (a re-run replays every answer), the same counters; a request with a schema decodes
under it (:func:`generation.constrained.generate_json`), one without it freely. The model loads on
the first request (``transformers``: a checkpoint directory, or a ``.gguf`` file with the ``gguf``
package), ``trust_remote_code`` off; requests decode one at a time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from .config import LocalConfig
from .llm import CallStats, ResponseCache, request_key
from .structured import requested_schema

logger = logging.getLogger(__name__)


class LocalChatClient:
    """Chat completions from a local model (see the module docstring)."""

    def __init__(self, config: LocalConfig, cache: ResponseCache) -> None:
        self.config = config
        self.cache = cache
        self.stats = CallStats()
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """What the cache keys name as the endpoint: the model's path."""
        return f"local:{Path(self.config.model).resolve()}"

    async def complete(self, body: dict[str, Any]) -> str:
        """The answer's text for ``body`` (from the cache when there)."""
        key = request_key(self.base_url, body)
        cached = self.cache.get(key)
        if cached is not None:
            self.stats.cache_hits += 1
            return cached
        self.stats.api_calls += 1
        text, prompt_tokens, completion_tokens = await asyncio.to_thread(self._decode, body)
        self.cache.put(key, body, text, {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
        self.stats.prompt_tokens += prompt_tokens
        self.stats.completion_tokens += completion_tokens
        return text

    async def aclose(self) -> None:
        return None

    def _decode(self, body: dict[str, Any]) -> tuple[str, int, int]:
        from .constrained import generate_json  # lazy: pulls torch and llguidance

        with self._lock:
            model, tokenizer = self._loaded()
            messages = body["messages"]
            schema = requested_schema(body)
            settings = {
                "temperature": float(body.get("temperature", 1.0)),
                "seed": int(body.get("seed") or 0),
                "max_new_tokens": int(body.get("max_tokens") or self.config.max_new_tokens),
            }
            if schema is not None:
                text, _, completion = generate_json(model, tokenizer, messages, schema, **settings)[0]
            else:
                text, completion = _free(model, tokenizer, messages, **settings)
            prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return text, len(tokenizer(prompt, add_special_tokens=False)["input_ids"]), completion

    def _loaded(self) -> tuple[Any, Any]:
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            path = Path(self.config.model)
            where = {"gguf_file": path.name} if path.suffix == ".gguf" else {}
            directory = str(path.parent if where else path)
            dtype = getattr(torch, self.config.dtype)
            self._tokenizer = AutoTokenizer.from_pretrained(directory, trust_remote_code=False, **where)
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, trust_remote_code=False, **where)
            self._model = model.to(self.config.device).eval()
            if not getattr(self._tokenizer, "chat_template", None):
                raise ValueError(f"{path}: the tokenizer has no chat template, so it cannot answer chat requests")
            logger.info("generator model %s loaded on %s", path, self.config.device)
        return self._model, self._tokenizer


def _free(
    model: Any, tokenizer: Any, messages: list[dict[str, str]], temperature: float, seed: int, max_new_tokens: int
) -> tuple[str, int]:
    """One completion without a schema, and its token count."""
    import torch

    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    encoded = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(model.device)
    torch.manual_seed(seed)
    sampling = temperature > 0
    with torch.no_grad():
        output = model.generate(
            **encoded,
            do_sample=sampling,
            temperature=temperature if sampling else None,
            top_p=None,
            top_k=None,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        )
    tokens = output[0, encoded["input_ids"].shape[1] :].tolist()
    return tokenizer.decode(tokens, skip_special_tokens=True), len(tokens)
