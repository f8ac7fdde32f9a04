"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It plays a competent model for our four prompts (it recognises the step from the prompt's
opening words and reads the problem between ``<<<`` and ``>>>``), and misbehaves on purpose for
questions that contain a scenario keyword: malformed JSON, wrong counts, missing markers, 429s
with Retry-After, 500s, slow answers. It counts every HTTP request it receives.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STEP_OPENINGS = {
    "You write maths problems.": "similars",
    "You edit maths problems. Read": "key_information",
    "You edit maths problems. Remove": "blanked",
    "You rewrite maths problems.": "paraphrases",
    "Solve this maths problem.": "solve",
}
LEADS = (
    "Consider this:",
    "Here is a problem:",
    "Read carefully:",
    "A question for you:",
    "Try this one:",
    "Puzzle:",
    "Task:",
)


def step_of(prompt: str) -> str:
    for opening, step in STEP_OPENINGS.items():
        if prompt.startswith(opening):
            return step
    raise ValueError(f"unrecognised prompt: {prompt[:60]!r}")


def problem_of(prompt: str) -> str:
    return prompt.split("<<<\n", 1)[1].split("\n>>>", 1)[0]


def count_of(prompt: str) -> int:
    m = re.search(r"exactly (\d+) strings", prompt)
    return int(m.group(1)) if m else 1


def good_answer(step: str, prompt: str) -> str:
    """What a well-behaved model answers."""
    problem = problem_of(prompt)
    if step == "similars":
        n = count_of(prompt)
        items = [re.sub(r"\d+", lambda m, i=i: str(int(m.group(0)) + 10 * i + 3), problem) for i in range(1, n + 1)]
        return "Here are the problems:\n```json\n" + json.dumps(items) + "\n```\nHope this helps!"
    if step == "key_information":
        return "Description: the first number in the problem."
    if step == "blanked":
        return json.dumps({"blanked": re.sub(r"\d+", "[BLANK]", problem, count=1)})
    if step == "solve":  # a model that adds up the problem's numbers
        return json.dumps({"solution": "adding up", "answer": str(sum(int(n) for n in re.findall(r"\d+", problem)))})
    n = count_of(prompt)
    return json.dumps([f"{LEADS[j % len(LEADS)]} {problem}" for j in range(n)])


@dataclass
class Reply:
    status: int = 200
    content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Script:
    """Scenario keyword -> what to do on the n-th request of a step for that question."""

    def reply(self, scenario: str | None, step: str, nth: int, prompt: str) -> Reply:
        good = Reply(content=good_answer(step, prompt))
        if scenario == "malformed" and step == "similars" and nth == 1:
            return Reply(content='Sure! Here you go: ["A store has 3 boxes')
        if scenario == "wrongcount" and step == "similars":
            return Reply(content=json.dumps(json.loads(good.content.split("```json\n")[1].split("\n```")[0])[:3]))
        if scenario == "nomarker" and step in ("blanked", "paraphrases") and nth == 1:
            problem = problem_of(prompt).replace("[BLANK]", "some")
            return Reply(
                content=json.dumps({"blanked": problem})
                if step == "blanked"
                else json.dumps([problem] * count_of(prompt))
            )
        if scenario == "ratelimit" and step == "similars" and nth == 1:
            return Reply(status=429, headers={"Retry-After": "1"}, content='{"error": {"message": "slow down"}}')
        if scenario == "flaky" and step == "key_information" and nth <= 2:
            return Reply(status=500, content='{"error": {"message": "boom"}}')
        if scenario == "slow" and step == "key_information" and nth == 1:
            return Reply(content=good.content, delay=2.0)
        if scenario == "down" and step == "similars":
            return Reply(status=503, content='{"error": {"message": "unavailable"}}')
        if scenario == "copycat" and step == "paraphrases":
            return Reply(content=json.dumps([problem_of(prompt)] * count_of(prompt)))
        if scenario == "badrequest" and step == "key_information":
            return Reply(status=400, content='{"error": {"message": "context too long"}}')
        if scenario == "split" and step == "solve" and nth % 5 in (1, 2):  # 3 of 5 solutions agree
            return Reply(content=json.dumps({"solution": "guess", "answer": str(1000 + nth % 5)}))
        if scenario == "scatter" and step == "solve" and nth % 5 in (1, 2, 3):  # 2 of 5 agree
            return Reply(content=json.dumps({"solution": "guess", "answer": str(1000 + nth % 5)}))
        if scenario == "badkey":
            return Reply(status=401, content='{"error": {"message": "invalid api key"}}')
        return good


class FakeLLMServer:
    """``with FakeLLMServer() as server: ... server.base_url ... server.requests``"""

    def __init__(self, scenarios: tuple[str, ...] = (), latency: float = 0.0, script: Script | None = None) -> None:
        self.scenarios = scenarios
        self.latency = latency
        self.script = script or Script()
        self.requests = 0
        self.log: list[dict[str, Any]] = []  # one entry per request: time, step, scenario, status, headers
        self.in_flight = 0
        self.max_in_flight = 0
        self._nth: Counter = Counter()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "FakeLLMServer":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                owner._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def requests_for(self, scenario: str) -> list[dict[str, Any]]:
        return [entry for entry in self.log if entry["scenario"] == scenario]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length))
        prompt = body["messages"][0]["content"]
        step = step_of(prompt)
        problem = problem_of(prompt)
        scenario = next((s for s in self.scenarios if s in problem), None)
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            key = (scenario or problem, step, problem)
            self._nth[key] += 1
            nth = self._nth[key]
            self.log.append(
                {
                    "time": time.monotonic(),
                    "step": step,
                    "scenario": scenario,
                    "nth": nth,
                    "authorization": handler.headers.get("Authorization"),
                    "body": body,
                }
            )
        answered = False
        try:
            reply = self.script.reply(scenario, step, nth, prompt)
            time.sleep(self.latency + reply.delay)
            if reply.status == 200:
                payload = {
                    "id": f"chatcmpl-{nth}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": len(prompt) // 4,
                        "completion_tokens": len(reply.content or "") // 4,
                        "total_tokens": 0,
                    },
                }
                data = json.dumps(payload).encode()
            else:
                data = (reply.content or "{}").encode()
            with self._lock:  # no longer in flight once answered: the client may send its next request
                self.in_flight -= 1  # before this thread runs again after writing the answer
                answered = True
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)
        finally:
            if not answered:
                with self._lock:
                    self.in_flight -= 1
