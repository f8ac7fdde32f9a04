"""An OpenAI-compatible server on 127.0.0.1 whose answers come from a real (tiny) Hugging Face
model, like a vLLM server: ``/v1/chat/completions`` with ``logprobs``/``top_logprobs`` and
``/v1/completions`` with ``echo`` (prompt log-probs); ``n`` choices per request, drawn one after
the other from one generator seeded by the request's ``seed`` (``n_mode = "ignore"`` sends one
choice whatever ``n`` is, ``"refuse"`` answers 400 to ``n > 1``, as some servers do). It decodes step by step with full forward
passes (no KV cache, no batching) — an implementation independent of the local responder's —
and keeps every token log-prob it sent, for exact comparison.

Faults a real server was seen to show, to pin the toolkit's checks (``fault``): ``"no_logprobs"``
(as ``transformers serve`` does: ``logprobs``, ``top_logprobs`` and ``n`` ignored, greedy
answers with no log-probs), ``"greedy"`` (log-probs sent, but temperature, seed and ``n``
ignored: one greedy choice), ``"echo_continuation"`` (``echo`` sends the prompt and a
continuation, as a server reading ``max_tokens: 0`` as "no limit" does), ``"status_500"`` (every
request after the first ``fail_after`` answers HTTP 500)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAIModelServer:
    def __init__(self, model: Any, tokenizer: Any, api_key: str | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.api_key = api_key
        self.sent_logprobs: list[list[float]] = []
        self.sent_tops: list[list[dict[str, float] | None]] = []
        self.requests: list[dict[str, Any]] = []
        self.n_mode = "native"
        self.fault: str | None = None
        self.fail_after = 0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "FakeOpenAIModelServer":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                outer._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
        if self.api_key is not None and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send(handler, 401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
        if int(body.get("n") or 1) > 1 and self.n_mode == "refuse":
            with self._lock:
                self.requests.append(body)
            return self._send(
                handler, 400, {"error": {"message": "n > 1 is not supported", "type": "invalid_request_error"}}
            )
        if self.fault == "status_500":
            with self._lock:
                failing = len(self.requests) >= self.fail_after
                if failing:
                    self.requests.append(body)
            if failing:
                return self._send(handler, 500, {"error": {"message": "Internal Server Error", "type": "server_error"}})
        if self.fault in ("no_logprobs", "greedy"):
            body = {**body, "temperature": 0, "n": 1}
        with self._lock:  # one forward at a time: the model is shared
            self.requests.append(body)
            if handler.path.endswith("/chat/completions"):
                payload = self._chat(body)
            elif handler.path.endswith("/completions"):
                payload = self._echo(body) if body.get("echo") else self._completion(body)
            else:
                return self._send(handler, 404, {"error": {"message": "unknown path"}})
        self._send(handler, 200, payload)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _token(self, tid: int, logprob: float) -> dict[str, Any]:
        text = self.tokenizer.decode([tid])
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    def _choices(self, body: dict[str, Any]) -> int:
        return 1 if self.n_mode == "ignore" else int(body.get("n") or 1)

    def _generator(self, body: dict[str, Any]) -> Any:
        import torch

        return torch.Generator().manual_seed(int(body.get("seed") or 0))

    def _decode(
        self, ids: list[int], body: dict[str, Any], k: int, generator: Any
    ) -> tuple[list[int], list[tuple[int, float, Any]], str]:
        """Step-by-step decoding after ``ids``: the new ids, (id, log-prob, top-k) per step, finish reason."""
        import torch

        eos = self.tokenizer.eos_token_id
        out, steps, finish = [], [], "length"
        limit = getattr(self.model.config, "n_positions", None) or self.model.config.max_position_embeddings
        for _ in range(min(int(body["max_tokens"]), limit - len(ids))):
            with torch.inference_mode():
                logits = self.model(input_ids=torch.tensor([ids + out])).logits[0, -1].float()
            logp = torch.log_softmax(logits, dim=-1)
            if body["temperature"] == 0:
                nxt = int(logits.argmax())
            else:
                probs = torch.softmax(logits / body["temperature"], dim=-1)
                top_p = body.get("top_p", 1.0)
                if top_p < 1.0:
                    sorted_p, index = probs.sort(descending=True)
                    sorted_p = sorted_p * (sorted_p.cumsum(0) - sorted_p < top_p)
                    probs = torch.zeros_like(probs).scatter(0, index, sorted_p)
                nxt = int(torch.multinomial(probs, 1, generator=generator))
            if nxt == eos:
                finish = "stop"
                break
            out.append(nxt)
            steps.append((nxt, float(logp[nxt]), torch.topk(logp, k) if k else None))
        self.sent_logprobs.append([lp for _, lp, _ in steps])
        return out, steps, finish

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        text = self.tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        generator, choices, used = self._generator(body), [], 0
        for index in range(self._choices(body)):
            out, steps, finish = self._decode(ids, body, int(body.get("top_logprobs") or 0), generator)
            content = []
            for tid, logprob, top in steps:
                item = self._token(tid, logprob)
                item["top_logprobs"] = (
                    [self._token(int(i), float(v)) for v, i in zip(top.values, top.indices)] if top is not None else []
                )
                content.append(item)
            choices.append(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": self.tokenizer.decode(out, skip_special_tokens=True)},
                    "logprobs": None if self.fault == "no_logprobs" else {"content": content},
                    "finish_reason": finish,
                }
            )
            used += len(out)
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": choices,
            "usage": {"prompt_tokens": len(ids), "completion_tokens": used, "total_tokens": len(ids) + used},
        }

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """Plain-text continuations of the prompt (``/v1/completions`` without ``echo``)."""
        ids = self.tokenizer(body["prompt"], add_special_tokens=True)["input_ids"]
        generator, choices, used = self._generator(body), [], 0
        for index in range(self._choices(body)):
            out, steps, finish = self._decode(ids, body, int(body.get("logprobs") or 0), generator)
            tokens = [self.tokenizer.decode([tid]) for tid, _, _ in steps]
            tops = (
                [
                    {self.tokenizer.convert_ids_to_tokens(int(i)): float(v) for v, i in zip(top.values, top.indices)}
                    for _, _, top in steps
                ]
                if body.get("logprobs")
                else None
            )
            choices.append(
                {
                    "index": index,
                    "text": self.tokenizer.decode(out, skip_special_tokens=True),
                    "finish_reason": finish,
                    "logprobs": {
                        "tokens": tokens,
                        "token_logprobs": [lp for _, lp, _ in steps],
                        "text_offset": [
                            len(body["prompt"]) + len(self.tokenizer.decode(out[:i])) for i in range(len(out))
                        ],
                        "top_logprobs": tops,
                    },
                }
            )
            used += len(out)
        return {
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": choices,
            "usage": {"prompt_tokens": len(ids), "completion_tokens": used, "total_tokens": len(ids) + used},
        }

    def _echo(self, body: dict[str, Any]) -> dict[str, Any]:
        import torch

        prompt = body["prompt"]
        enc = self.tokenizer(prompt, add_special_tokens=True, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        with torch.inference_mode():
            logp = torch.log_softmax(self.model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
        values = [None] + [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
        if self.fault == "echo_continuation":  # the prompt, then 8 greedy tokens with offsets past its end
            out, steps, _ = self._decode(ids, {**body, "max_tokens": 8, "temperature": 0}, 0, None)
            text = prompt + self.tokenizer.decode(out)
            tokens = [self.tokenizer.decode([i]) for i in ids + out]
            starts = [a for a, _ in offsets] + [
                len(prompt) + len(self.tokenizer.decode(out[:i])) for i in range(len(out))
            ]
            return {
                "id": "cmpl-echo",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "text": text,
                        "finish_reason": "length",
                        "logprobs": {
                            "tokens": tokens,
                            "token_logprobs": values + [lp for _, lp, _ in steps],
                            "text_offset": starts,
                            "top_logprobs": None,
                        },
                    }
                ],
                "usage": {
                    "prompt_tokens": len(ids),
                    "completion_tokens": len(out),
                    "total_tokens": len(ids) + len(out),
                },
            }
        k = int(body.get("logprobs") or 0)
        tops = None
        if k > 1:  # vLLM: per position a {token: log-prob} map of the top k (None for the first token)
            tops = [None]
            for i in range(1, len(ids)):
                top = torch.topk(logp[i - 1], k)
                tops.append(
                    {self.tokenizer.convert_ids_to_tokens(int(t)): float(v) for v, t in zip(top.values, top.indices)}
                )
            self.sent_tops.append(tops)
        return {
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "text": prompt,
                    "finish_reason": "length",
                    "logprobs": {
                        "tokens": [self.tokenizer.decode([i]) for i in ids],
                        "token_logprobs": values,
                        "text_offset": [start for start, _ in offsets],
                        "top_logprobs": tops,
                    },
                }
            ],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)},
        }
