"""A served model behind an OpenAI-compatible API (vLLM, SGLang, hosted APIs) as a responder.

* Plain-text continuations (partial-prompt completion): ``/v1/completions`` with the text itself.
* Generation: ``/v1/chat/completions`` with ``logprobs`` and ``top_logprobs`` (K = 20 by
  default, the most most APIs allow); with a raw prompt format, ``/v1/completions`` with the
  template filled in (the server's chat template is then not applied). The n completions of a prompt are asked for in one request
  (``n``, one seed derived from (seed, prompt)) where the server supports ``n`` (vLLM does); a
  server that refuses ``n`` or sends fewer choices is asked once per completion instead, with a
  seed derived from (seed, prompt, j) as the local responder does, and that is remembered.
  Either way a rerun against the same server gives the same completions where it honours seeds.
  Every request is counted (``counter.requests``).
* Entropy comes from the top-K log-probs only: −Σ_{top K} p log p, a lower bound of the exact
  entropy that misses the tail's terms; every such generation says ``entropy_kind = "top-K"``
  and detectors record the approximation.
* Teacher-forced log-probs of a text: ``/v1/completions`` with ``echo`` and ``max_tokens = 0``
  (vLLM's prompt log-probs, with the top-K at each position).
* Min-K%++'s μ/σ: moments of log p under p renormalised over the top K (:func:`topk_moments`), an
  approximation SPEC §5 allows on API backends; detectors record it.
* Token units: the API returns token strings; each maps to a stable integer (a hash of the
  string, the same in every run, so cached completions stay comparable) and the edit-distance
  detectors (CDD, Min-kNN) work on those.

What the server sends is checked before it is used (:mod:`.checks`): log-probs present, samples
really sampled, echoed prompt tokens inside the prompt. A request that fails after the client's
bounded retries (exponential back-off) ends the run with one :class:`ServedModelError` naming the
status; requests not yet sent are not sent, and what the response store committed is kept.

The key comes from the environment variable named by ``api_key_env`` and is never stored.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError, ProbesError
from ..token_distributions import entropy_from_logprobs, padded_rows, topk_moments
from .base import Access, CallCounter, Generation, GenerationParams, TextScore, sample_seed
from .checks import EngineOutputError, SamplingWitness, check_echo, engine_name
from .prompting import PromptFormat

logger = logging.getLogger(__name__)


class ServedModelError(ProbesError):
    """A request to the served model failed after its retries (an HTTP error status, a timeout, no connection)."""


class OpenAIResponder:
    """Generation and scoring through an OpenAI-compatible server.

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        model: the served model's name.
        api_key_env: environment variable holding the key (None: a keyless server).
        top_logprobs: K of the top-K log-probs requested per token.
        concurrency: requests in flight.
        timeout_s / max_retries: passed to the ``openai`` client (which retries 429/5xx).
        system: the system turn of every chat request (None: none).
        n_per_request: ask for a prompt's n completions in one request (falls back to one
            request per completion where the server does not support ``n``).
        prompt_format: ``raw`` sends ``template`` filled with the prompt to ``/v1/completions``;
            ``chat`` and ``auto`` send the prompt as the user message (the server's template).
    """

    access = frozenset(
        {
            Access.SAMPLING,
            Access.TOKEN_IDS,
            Access.CHOSEN_LOGPROBS,
            Access.ENTROPY_TOPK,
            Access.TEXT_LOGPROBS,
            Access.VOCAB_MOMENTS_TOPK,
        }
    )

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        top_logprobs: int = 20,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        system: str | None = None,
        n_per_request: bool = True,
        prompt_format: PromptFormat | None = None,
    ) -> None:
        from openai import OpenAI

        key = "not-needed"
        if api_key_env is not None:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise ConfigError(
                    f"the API key variable {api_key_env} is not set; export it, or pass no key variable for a keyless server"
                )
        self.client = OpenAI(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=max_retries)
        self.model = model
        self.top_logprobs = top_logprobs
        self.concurrency = concurrency
        self.counter = CallCounter()
        self.system = system  # the system turn of every chat request (None: no system message)
        self.identity = {
            "kind": "openai",
            "base_url": base_url.rstrip("/"),
            "model": model,
            "top_logprobs": top_logprobs,
        }
        if system is not None:
            self.identity["system"] = system
        self.raw_template = (
            prompt_format.template if prompt_format is not None and prompt_format.mode == "raw" else None
        )
        if self.raw_template is not None:
            self.identity["raw_template"] = self.raw_template
        self.n_per_request = n_per_request
        if n_per_request:
            self.identity["n_per_request"] = True  # completion j then depends on n too: a cache of its own
        self._n_supported: bool | None = None  # learnt from the first request with n > 1
        self._lock = threading.Lock()
        self._failed: ServedModelError | None = None  # the first failed request: no more are sent
        self.witness = SamplingWitness(self.identity)

    @property
    def commit_rows(self) -> int:
        """Completions a response store asks for and commits together: a few rounds of requests in flight."""
        return 4 * self.concurrency

    def format(self, prompt: str) -> str:
        """The raw template filled in; in chat mode the server applies its own template to the prompt sent as the user message."""
        return prompt if self.raw_template is None else self.raw_template.replace("{prompt}", prompt)

    def question_context(self, lead: str = "") -> str:
        """The raw template's text before the prompt, then ``lead``; in chat mode ``lead`` alone
        (the server's chat template is not visible here)."""
        return lead if self.raw_template is None else self.raw_template[: self.raw_template.index("{prompt}")] + lead

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        if self.raw_template is not None:
            return self._many([self.format(p) for p in prompts], params, self._continue)
        return self._many(prompts, params, self._complete)

    def _many(self, prompts: Sequence[str], params: GenerationParams, one: Any) -> list[list[Generation]]:
        """``params.n`` completions per prompt from ``one(prompt, params, seed_index, n)``, ``concurrency`` requests in flight."""
        with ThreadPoolExecutor(self.concurrency) as pool:
            if params.n > 1 and self.n_per_request and self._n_supported is not False:
                out = list(pool.map(lambda prompt: self._all_at_once(prompt, params, one), prompts))
            else:
                jobs = [(i, j) for i in range(len(prompts)) for j in range(params.n)]
                done = list(pool.map(lambda job: one(prompts[job[0]], params, job[1], 1)[0], jobs))
                out = [[] for _ in prompts]
                for (i, _), gen in zip(jobs, done):
                    out[i].append(gen)
        self.counter.generated += sum(len(row) for row in out)
        return out

    def _all_at_once(self, prompt: str, params: GenerationParams, one: Any) -> list[Generation]:
        """A prompt's n completions in one request, or one request each where the server lacks ``n``."""
        from openai import BadRequestError

        if self._n_supported is not False:
            try:
                gens = one(prompt, params, 0, params.n)
            except BadRequestError as err:
                gens, why = [], f"refused n={params.n} ({str(err)[:120]})"
            else:
                why = f"sent {len(gens)} choice(s) for n={params.n}"
            if len(gens) == params.n:
                self._n_supported = True
                return gens
            with self._lock:
                if self._n_supported is not False:
                    logger.warning("the server %s; asking once per completion from now on", why)
                self._n_supported = False
        return [one(prompt, params, j, 1)[0] for j in range(params.n)]

    def _create(self, endpoint: Any, **request: Any) -> Any:
        """One counted request; a failure after the client's retries is one :class:`ServedModelError`
        (and no later request is sent). A 400 to ``n > 1`` is passed on: the caller falls back."""
        import openai

        with self._lock:
            if self._failed is not None:
                raise self._failed
            self.counter.requests += 1
        try:
            return endpoint.create(model=self.model, **request)
        except openai.APIError as err:
            if isinstance(err, openai.BadRequestError) and int(request.get("n") or 1) > 1:
                raise
            raise self._failure(request, err) from err

    def _failure(self, request: dict[str, Any], err: Exception) -> ServedModelError:
        what, detail = _failure_text(err)
        kind = "chat completions" if "messages" in request else "completions"
        error = ServedModelError(
            f"{engine_name(self.identity)} failed a {kind} request: {what}{detail} (after "
            f"{self.client.max_retries} retries); work done so far is kept in the response store — fix "
            "the server and run again to resume"
        )
        with self._lock:
            self._failed = self._failed or error
        return self._failed

    def _complete(self, prompt: str, params: GenerationParams, index: int, n: int) -> list[Generation]:
        response = self._create(
            self.client.chat.completions,
            messages=([{"role": "system", "content": self.system}] if self.system is not None else [])
            + [{"role": "user", "content": prompt}],
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            seed=sample_seed(params.seed, prompt, index) & 0x7FFFFFFF,
            logprobs=True,
            top_logprobs=self.top_logprobs,
            n=n,
        )
        return [self._chat_generation(choice, params) for choice in sorted(response.choices, key=lambda c: c.index)]

    def _chat_generation(self, choice: Any, params: GenerationParams) -> Generation:
        items = list(choice.logprobs.content or []) if choice.logprobs is not None else []
        items = items[: _generated(choice.finish_reason, [item.token for item in items], choice.message.content or "")]
        padded = padded_rows([[t.logprob for t in (item.top_logprobs or [])] for item in items])
        mu, sigma = topk_moments(padded)
        self.witness.add(
            np.array([item.logprob for item in items], dtype=np.float64), padded, params.temperature, params.top_p
        )
        return Generation(
            text=choice.message.content or "",
            token_ids=[self._unit(item.token) for item in items],
            logprobs=np.array([item.logprob for item in items], dtype=np.float64),
            entropies=entropy_from_logprobs(padded) if len(items) else np.zeros(0),
            entropy_kind=f"top-{self.top_logprobs}",
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            mu=mu,
            sigma=sigma,
        )

    def complete(self, texts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """Plain-text continuations: ``/v1/completions`` with the text as the prompt (no chat template)."""
        return self._many(texts, params, self._continue)

    def _continue(self, text: str, params: GenerationParams, index: int, n: int) -> list[Generation]:
        response = self._create(
            self.client.completions,
            prompt=text,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            seed=sample_seed(params.seed, text, index) & 0x7FFFFFFF,
            logprobs=self.top_logprobs,
            n=n,
        )
        return [self._text_generation(choice, params) for choice in sorted(response.choices, key=lambda c: c.index)]

    def _text_generation(self, choice: Any, params: GenerationParams) -> Generation:
        lp = choice.logprobs
        tokens = list(lp.tokens or []) if lp is not None else []
        kept = _generated(choice.finish_reason, tokens, choice.text or "")
        tokens = tokens[:kept]
        values = list(lp.token_logprobs or [])[:kept] if lp is not None else []
        padded = padded_rows(
            [list((t or {}).values()) for t in (lp.top_logprobs or [])[:kept]] if lp is not None else []
        )
        mu, sigma = topk_moments(padded)
        if len(padded) == len(tokens):
            self.witness.add(np.array(values, dtype=np.float64), padded, params.temperature, params.top_p)
        return Generation(
            text=choice.text or "",
            token_ids=[self._unit(t) for t in tokens],
            logprobs=np.array(values, dtype=np.float64),
            entropies=entropy_from_logprobs(padded) if len(tokens) else np.zeros(0),
            entropy_kind=f"top-{self.top_logprobs}",
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            mu=mu,
            sigma=sigma,
        )

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """The text's tokens as the server reads it (``echo``), special tokens (empty spans) left out."""
        response = self._create(self.client.completions, prompt=text, max_tokens=0, echo=True, logprobs=1)
        lp = self._echoed(response, text)
        starts = list(lp.text_offset)
        ends = starts[1:] + [len(text)]
        return [(self._unit(t), a, b) for t, a, b in zip(lp.tokens, starts, ends) if b > a]

    def score(self, contexts: Sequence[str], texts: Sequence[str]) -> list[TextScore]:
        pairs = list(zip(contexts, texts, strict=True))
        with ThreadPoolExecutor(self.concurrency) as pool:
            out = list(pool.map(lambda pair: self._prompt_logprobs(*pair), pairs))
        self.counter.scored += len(pairs)
        return out

    def _prompt_logprobs(self, context: str, text: str) -> TextScore:
        response = self._create(
            self.client.completions, prompt=context + text, max_tokens=0, echo=True, logprobs=self.top_logprobs
        )
        lp = self._echoed(response, context + text)
        tokens, values, offsets = list(lp.tokens), list(lp.token_logprobs), list(lp.text_offset)
        tops = list(lp.top_logprobs or [None] * len(tokens))
        ends = offsets[1:] + [len(context + text)]
        keep = [i for i, end in enumerate(ends) if end > len(context) and values[i] is not None]
        mu, sigma = (
            topk_moments(padded_rows([list(tops[i].values()) for i in keep]))
            if all(tops[i] for i in keep)
            else (None, None)
        )
        return TextScore(
            token_ids=[self._unit(tokens[i]) for i in keep],
            logprobs=np.array([values[i] for i in keep], dtype=np.float64),
            mu=mu,
            sigma=sigma,
        )

    def _echoed(self, response: Any, prompt: str) -> Any:
        """The log-probs of an ``echo`` response, checked to lie inside ``prompt``."""

        lp = response.choices[0].logprobs if response.choices else None
        if lp is None or not lp.tokens or lp.text_offset is None or lp.token_logprobs is None:
            raise EngineOutputError(
                f"{engine_name(self.identity)} sent no prompt log-probs for an echo request (echo, "
                "logprobs, max_tokens 0 on /v1/completions); teacher-forced scores need them — serve the "
                "model with vLLM or score it locally"
            )
        check_echo(list(lp.tokens), list(lp.text_offset), prompt, self.identity)
        return lp

    @staticmethod
    def _unit(token: str) -> int:
        return int.from_bytes(hashlib.sha256(token.encode("utf-8")).digest()[:8], "little") & ((1 << 62) - 1)


def _generated(finish_reason: str | None, tokens: list[str], text: str) -> int:
    """How many of a choice's tokens were generated text: vLLM also sends the end-of-sequence token
    it stopped at ('<|eos|>', not part of the text), which the local engine never counts; it is
    the last token of a stopped choice that the text does not end with (or an empty one)."""
    if finish_reason == "stop" and tokens and (tokens[-1] == "" or not text.endswith(tokens[-1])):
        return len(tokens) - 1
    return len(tokens)


def _failure_text(err: Exception) -> tuple[str, str]:
    """What a request failed with: its HTTP status (or kind) and the server's message."""
    import openai

    if isinstance(err, openai.APIStatusError):
        body = err.body.get("error", err.body) if isinstance(err.body, dict) else None
        message = body.get("message") if isinstance(body, dict) else None
        return f"HTTP {err.status_code}", f" ({str(message or err.message)[:160]})"
    if isinstance(err, openai.APITimeoutError):
        return "no answer within the timeout", ""
    return "no connection", f" ({str(err)[:160]})"
