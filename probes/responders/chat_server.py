"""A loopback OpenAI-compatible chat server over a local model (``lara serve``): what lets the
LLM-driven generator (``generation.backend: openai``) run on any checkpoint this toolkit loads —
a GGUF file, an adapter — without vLLM.

``POST /v1/chat/completions`` applies the model's own chat template to the whole conversation
and decodes with the toolkit's KV-cached sampler (:class:`~probes.responders.local.LocalResponder`):
``temperature`` (0 greedy), ``top_p``, ``n``, ``seed`` (the same request gives the same answer)
and ``max_tokens``; the reply carries ``usage`` (prompt and completion tokens) and
``finish_reason`` (``stop`` or ``length``). A request with ``response_format`` (``json_schema``,
or ``json_object``) decodes under the schema's grammar (:mod:`generation.constrained`), so its
answer parses by construction, with no free whitespace. ``GET /v1/models`` names the model. One
request decodes at a time (the model is shared); it listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from generation.structured import requested_schema

from .base import GenerationParams
from .local import LocalResponder
from .prompting import PromptFormat

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 512


class _Templated(LocalResponder):
    """A local responder whose prompts arrive with the chat template already applied."""

    def format(self, prompt: str) -> str:
        return prompt


class ChatServer:
    """Serve ``loaded`` (a ``cache.loading.LoadedModel`` with a chat template) as ``model_name``.

    Use as a context manager, or :meth:`start` / :meth:`close`; :attr:`base_url` is the
    ``…/v1`` address to give an OpenAI client.
    """

    def __init__(
        self, loaded: Any, model_name: str, host: str = "127.0.0.1", port: int = 0, batch_size: int = 8
    ) -> None:
        if not getattr(loaded.tokenizer, "chat_template", None):
            raise ValueError(f"{model_name}: the tokenizer has no chat template, so it cannot serve chat completions")
        self.model_name = model_name
        self.loaded = loaded
        self.responder = _Templated(loaded, PromptFormat(mode="chat"), batch_size=batch_size)
        self._lock = threading.Lock()
        self.requests = 0
        self._http = ThreadingHTTPServer((host, port), _handler(self))
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ChatServer":
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        logger.info("serving %s at %s", self.model_name, self.base_url)
        return self

    def serve_forever(self) -> None:
        logger.info("serving %s at %s (Ctrl-C stops)", self.model_name, self.base_url)
        self._http.serve_forever()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat-completions reply to a request body (raises ValueError on a malformed one)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list of {role, content}")
        schema = requested_schema(body)
        if schema is not None:
            return self._reply(self._constrained(messages, schema, body))
        tokenizer = self.responder.tokenizer
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        params = GenerationParams(
            max_new_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS),
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            n=int(body.get("n", 1)),
            seed=int(body.get("seed") or 0),
        )
        with self._lock:
            generations = self.responder.generate([prompt], params)[0]
            self.requests += 1
        prompt_tokens = len(self.responder.encode_prompt(prompt))
        return self._reply(([(g.text, g.finish_reason, len(g.token_ids)) for g in generations], prompt_tokens))

    def _constrained(
        self, messages: list[dict[str, str]], schema: dict[str, Any], body: dict[str, Any]
    ) -> tuple[list[tuple[str, str, int]], int]:
        """Completions decoded under ``schema`` (and the prompt's token count)."""
        from generation.constrained import generate_json  # lazy: pulls llguidance, only for schema requests

        tokenizer = self.responder.tokenizer
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        with self._lock:
            found = generate_json(
                self.loaded.model,
                tokenizer,
                messages,
                schema,
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                n=int(body.get("n", 1)),
                seed=int(body.get("seed") or 0),
                max_new_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS),
            )
            self.requests += 1
        return found, len(self.responder.encode_prompt(prompt))

    def _reply(self, decoded: tuple[list[tuple[str, str, int]], int]) -> dict[str, Any]:
        """The chat-completions reply of ``(text, finish_reason, completion tokens)`` choices."""
        choices, prompt_tokens = decoded
        completion_tokens = sum(n for _, _, n in choices)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                for i, (text, finish, _) in enumerate(choices)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": server.model_name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}; use /v1/chat/completions"}})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                self._send(200, server.complete(body))
            except (ValueError, TypeError) as err:
                self._send(400, {"error": {"message": str(err), "type": "invalid_request_error"}})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            logger.debug("%s " + format, self.address_string(), *args)

    return Handler
