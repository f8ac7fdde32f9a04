"""Chat-completion requests to an OpenAI-compatible endpoint: cached, retried, counted.

* :func:`build_request` and :func:`request_key` are pure: the request body, and the SHA-256 of
  the endpoint plus body (model, messages, temperature, seed, max_tokens). No header, so no key,
  ever enters the hash or the cache.
* :class:`ResponseCache` keeps every answer in SQLite (one committed row per answer), so a
  re-run replays answers without HTTP and a killed run loses nothing it had received.
* :class:`ChatClient` sends through the real ``openai`` client (its own retries off), retries
  HTTP 429/5xx, timeouts and connection errors with exponential backoff (a server's
  ``Retry-After`` is honoured up to ``backoff_max_s``) and caps requests in flight.
  Bad key / unknown model stop the job (:class:`EndpointError`); a request refused as such
  (400/422) or retries running out end only that part (:class:`TransportFailure`).
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import logging
import os
import random
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import records as r
from .config import OpenAIConfig
from .errors import EndpointError

logger = logging.getLogger(__name__)

SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, request TEXT NOT NULL, content TEXT NOT NULL, usage TEXT, created REAL)"


def build_request(
    model: str,
    messages: list[dict[str, str]],
    temperature: float,
    seed: int,
    max_tokens: int | None,
    response_format: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The chat-completions body (what is sent and what is hashed), with the answer's JSON schema
    (``response_format``, :mod:`generation.structured`) where given."""
    body: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature, "seed": seed}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if response_format is not None:
        body["response_format"] = response_format
    return body


def request_key(base_url: str, body: dict[str, Any]) -> str:
    """Cache key: SHA-256 of the endpoint and the full body."""
    blob = json.dumps({"base_url": base_url.rstrip("/"), "body": body}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from the job seed and a request's identity."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class ResponseCache:
    """Answers keyed by :func:`request_key`, in ``DIR/responses.sqlite`` (safe across processes)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(SCHEMA)

    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT content FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, body: dict[str, Any], content: str, usage: dict[str, int] | None) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
            (key, json.dumps(body, ensure_ascii=False), content, json.dumps(usage), time.time()),
        )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class TransportFailure(Exception):
    """A request that never got an answer (retries exhausted, or refused as such)."""

    def __init__(self, reason: str, detail: str, attempts: int) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.attempts = reason, detail, attempts


@dataclass
class CallStats:
    """What the endpoint was asked, and what the cache answered."""

    api_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def count_error(self, reason: str) -> None:
        self.failed_calls += 1
        self.errors[reason] = self.errors.get(reason, 0) + 1


class ChatClient:
    """Cached, retried, concurrency-capped chat completions (see the module docstring)."""

    def __init__(self, config: OpenAIConfig, cache: ResponseCache) -> None:
        self.config = config
        self.cache = cache
        self.stats = CallStats()
        self._client: Any = None
        self._slots: asyncio.Semaphore | None = None

    def _openai(self) -> Any:
        if self._client is None:
            import openai

            key_env = self.config.api_key_env
            key = os.environ.get(key_env) if key_env else None
            if key_env and not key:
                raise EndpointError(
                    f"the API key variable {key_env} is not set (openai.api_key_env in the config names it); "
                    f"export {key_env}=..., or set api_key_env: null for a server that needs no key"
                )
            self._client = openai.AsyncOpenAI(
                api_key=key or "no-key", base_url=self.config.base_url, timeout=self.config.timeout_s, max_retries=0
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def complete(self, body: dict[str, Any]) -> str:
        """The answer's text for ``body`` (from the cache when there)."""
        key = request_key(self.config.base_url, body)
        cached = self.cache.get(key)
        if cached is not None:
            self.stats.cache_hits += 1
            return cached
        client = self._openai()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.concurrency)
        import openai

        attempts = self.config.max_http_attempts
        for attempt in range(1, attempts + 1):
            retry_after: float | None = None
            async with self._slots:
                self.stats.api_calls += 1
                try:
                    response = await client.chat.completions.create(**body)
                except openai.APITimeoutError:
                    reason, detail = r.TIMEOUT, f"no answer within {self.config.timeout_s:g} s"
                except openai.APIConnectionError as err:
                    reason, detail = r.CONNECTION_ERROR, f"cannot reach {self.config.base_url}: {err}"
                except openai.APIStatusError as err:
                    reason, detail = self._status_failure(err)
                    if reason == r.BAD_REQUEST:
                        self.stats.count_error(reason)
                        raise TransportFailure(reason, detail, attempt) from err
                    retry_after = _retry_after(err.response.headers)
                else:
                    content, usage = _content(response)
                    self.cache.put(key, body, content, usage)
                    if usage:
                        self.stats.prompt_tokens += usage.get("prompt_tokens", 0)
                        self.stats.completion_tokens += usage.get("completion_tokens", 0)
                    return content
            self.stats.count_error(reason)
            if attempt == attempts:
                break
            delay = min(
                self.config.backoff_max_s, self.config.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
            )
            if retry_after is not None:
                delay = min(self.config.backoff_max_s, max(delay, retry_after))
            logger.debug("%s (attempt %d/%d); retrying in %.2f s", detail, attempt, attempts, delay)
            await asyncio.sleep(delay)
        raise TransportFailure(reason, f"{detail} (after {attempts} attempts)", attempts)

    def _status_failure(self, err: Any) -> tuple[str, str]:
        status = err.status_code
        if status in (401, 403):
            raise EndpointError(
                f"{self.config.base_url} refused the API key (HTTP {status}); check the value of {self.config.api_key_env}"
            ) from err
        if status == 404:
            raise EndpointError(
                f"{self.config.base_url} answered 404 for model {self.config.model!r}: check openai.model and openai.base_url"
            ) from err
        if status == 429:
            return r.RATE_LIMITED, "HTTP 429 (rate limited)"
        if status >= 500:
            return r.SERVER_ERROR, f"HTTP {status} from the server"
        return r.BAD_REQUEST, f"HTTP {status}: the request was refused ({_short(str(err))})"


def _content(response: Any) -> tuple[str, dict[str, int] | None]:
    choices = getattr(response, "choices", None) or []
    content = choices[0].message.content if choices and choices[0].message is not None else None
    usage = getattr(response, "usage", None)
    usage_dict = (
        {"prompt_tokens": usage.prompt_tokens or 0, "completion_tokens": usage.completion_tokens or 0}
        if usage
        else None
    )
    return content or "", usage_dict


def _retry_after(headers: Any) -> float | None:
    """Seconds a server asked to wait (``retry-after-ms``, ``retry-after`` seconds or date)."""
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
