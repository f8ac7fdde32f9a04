"""The LLM backend through the real ``openai`` client against a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from generation import records as r
from generation.config import GenerationConfig
from generation.errors import EndpointError
from generation.llm import _retry_after, build_request, request_key
from generation.pipeline import run_generation
from generation.records import PerturbationSet, Question, unexplained_gaps
from generation.validate import check_set

from .fake_llm import FakeLLMServer

SECRET = "sk-test-DO-NOT-LEAK-4242"
SCENARIOS = ("malformed", "wrongcount", "nomarker", "ratelimit", "flaky", "slow", "down", "copycat", "badrequest")


def llm_config(server: FakeLLMServer, tmp_path: Path, **openai: object) -> GenerationConfig:
    settings = {
        "base_url": server.base_url,
        "model": "fake-model",
        "api_key_env": "LARA_TEST_KEY",
        "cache_dir": str(tmp_path / "llm-cache"),
        "timeout_s": 0.5,
        "max_attempts": 3,
        "max_http_attempts": 3,
        "backoff_s": 0.01,
        "backoff_max_s": 2.0,
        "concurrency": 4,
    }
    settings.update(openai)
    return GenerationConfig.from_dict({"backend": "openai", "seed": 0, "openai": settings})


def question(tag: str) -> Question:
    return Question(
        id=tag,
        question=f"The {tag} shop has 12 apples and 7 pears. How many pieces of fruit does the shop have?",
        label=1,
    )


def read_sets(path: Path) -> dict[str, PerturbationSet]:
    records = [PerturbationSet.from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    return {rec.question.id: rec for rec in records}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LARA_TEST_KEY", SECRET)


def test_good_model_gives_complete_valid_sets_and_a_rerun_makes_no_request(tmp_path: Path) -> None:
    questions = [question(f"plain{i}") for i in range(3)]
    out = tmp_path / "sets.jsonl"
    with FakeLLMServer() as server:
        config = llm_config(server, tmp_path)
        summary = run_generation(questions, out, config)
        first = out.read_bytes()
        # similars, key information, 1+K blanks, 1+K paraphrase lists, k = 5 solutions of each similar
        per_question = 1 + 1 + 6 + 6 + 5 * 5
        assert server.requests == 3 * per_question
        assert summary.api_calls == 3 * per_question and summary.cache_hits == 0
        sets = read_sets(out)
        for rec in sets.values():
            assert rec.complete and not check_set(rec, k=1) and not unexplained_gaps(rec)
            assert (
                rec.provenance["model"] == "fake-model"
                and rec.provenance["templates"]["similars"]["id"] == "similar_questions.v1.txt"
            )
            assert len(rec.provenance["templates"]["paraphrases"]["sha256"]) == 64
            # each similar's answer: the model's majority over its 5 solutions (it adds the numbers up)
            sums = [sum(int(n) for n in re.findall(r"\d+", text)) for text in rec.similars]
            assert rec.answers["similars"] == sums and rec.answers["agreement"]["similars"] == [1.0] * 5
            assert rec.provenance["answers"]["method"] == "generator-majority-v1"
        formats = [entry["body"].get("response_format") for entry in server.log]
        assert all(f["type"] == "json_schema" and f["json_schema"]["schema"] for f in formats)
        assert {f["json_schema"]["name"] for f in formats} == {
            "lara_similars", "lara_key_information", "lara_blanked", "lara_paraphrases", "lara_solve"
        }  # fmt: skip

        again = run_generation(questions, out, config)  # finished job: reused from the output
        assert server.requests == 3 * per_question and again.api_calls == 0 and again.reused == 3
        assert out.read_bytes() == first

        out.unlink()  # output gone: every answer comes from the response cache
        replay = run_generation(questions, out, config)
        assert server.requests == 3 * per_question
        assert replay.api_calls == 0 and replay.cache_hits == 3 * per_question
        assert out.read_bytes() == first


def test_every_failure_mode_ends_valid_or_recorded_and_rerun_is_free(tmp_path: Path) -> None:
    questions = [question(tag) for tag in SCENARIOS] + [question("plain")]
    out = tmp_path / "sets.jsonl"
    with FakeLLMServer(scenarios=SCENARIOS) as server:
        config = llm_config(server, tmp_path)
        run_generation(questions, out, config)
        sets = read_sets(out)
        assert list(sets) == [q.id for q in questions]  # input order, whatever finished first
        for rec in sets.values():
            assert not unexplained_gaps(rec), rec.question.id
            assert not check_set(rec, k=1), rec.question.id

        def steps(scenario: str, step: str) -> list[dict]:
            return [e for e in server.requests_for(scenario) if e["step"] == step]

        for tag in ("malformed", "nomarker", "ratelimit", "flaky", "slow", "plain"):
            assert sets[tag].complete, (tag, sets[tag].failures)
        assert len(steps("malformed", "similars")) == 2
        retry = steps("malformed", "similars")[1]["body"]["messages"]
        assert [m["role"] for m in retry] == ["user", "assistant", "user"] and "could not be used" in retry[2][
            "content"
        ]
        assert len(steps("nomarker", "blanked")) == 12  # each member: marker missing, then right
        first, second = steps("ratelimit", "similars")[:2]
        assert second["time"] - first["time"] >= 0.95  # Retry-After: 1 honoured
        assert len(steps("flaky", "key_information")) == 3  # two 500s, then an answer
        assert len(steps("slow", "key_information")) == 2  # timed out, then answered

        wrong = sets["wrongcount"]
        assert wrong.similars[:3] == [s for s in wrong.similars[:3] if s] and wrong.similars[3:] == [None, None]
        assert {(f.step, f.member, f.reason) for f in wrong.failures} == {
            ("similars", 4, r.WRONG_COUNT),
            ("similars", 5, r.WRONG_COUNT),
            ("blanked", 4, r.UPSTREAM_MISSING),
            ("blanked", 5, r.UPSTREAM_MISSING),
            ("paraphrases", 4, r.UPSTREAM_MISSING),
            ("paraphrases", 5, r.UPSTREAM_MISSING),
        }
        assert all(b is not None for b in wrong.blanked[:4])

        down = sets["down"]
        assert down.similars == [None] * 5
        assert all(f.reason == r.SERVER_ERROR and f.attempts == 3 for f in down.failures if f.step == "similars")
        assert down.blanked[0] is not None and all(
            p is not None for p in down.paraphrases[0]
        )  # the original still has its part
        assert len(steps("down", "similars")) == 3

        copycat = sets["copycat"]
        assert all(p is None for row in copycat.paraphrases for p in row)
        assert {f.reason for f in copycat.failures} == {r.COPY} and all(f.attempts == 3 for f in copycat.failures)

        bad = sets["badrequest"]
        assert bad.key_information is None and bad.blanked == [None] * 6
        assert [f.reason for f in bad.failures if f.step == "key_information"] == [r.BAD_REQUEST]
        assert len(steps("badrequest", "key_information")) == 1  # a refused request is not retried

        before = server.requests
        rerun = run_generation(questions, out, config)
        assert server.requests == before and rerun.api_calls == 0  # finished job, failures included: free

        out.unlink()  # without the output, answers come from the cache; only requests that never
        run_generation(questions, out, config)  # got an answer (503 x3, the 400) are tried again
        assert server.requests == before + 3 + 1


def test_api_key_is_sent_but_never_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "sets.jsonl"
    with FakeLLMServer(scenarios=("malformed",)) as server:
        run_generation([question("malformed"), question("plain")], out, llm_config(server, tmp_path))
        assert all(entry["authorization"] == f"Bearer {SECRET}" for entry in server.log)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.startswith("responses.sqlite") for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text


def test_missing_key_fails_clearly_but_a_cached_job_needs_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "sets.jsonl"
    with FakeLLMServer() as server:
        config = llm_config(server, tmp_path)
        run_generation([question("plain")], out, config)
        out.unlink()
        monkeypatch.delenv("LARA_TEST_KEY")
        summary = run_generation([question("plain")], out, config)  # all answers cached: no key needed
        assert summary.api_calls == 0
        with pytest.raises(EndpointError, match="LARA_TEST_KEY"):
            run_generation([question("other")], tmp_path / "other.jsonl", config)


def test_rejected_key_stops_the_job(tmp_path: Path) -> None:
    with FakeLLMServer(scenarios=("badkey",)) as server:
        with pytest.raises(EndpointError, match="refused the API key"):
            run_generation([question("badkey")], tmp_path / "sets.jsonl", llm_config(server, tmp_path))


def test_requests_in_flight_are_capped_by_concurrency(tmp_path: Path) -> None:
    questions = [question(f"plain{i}") for i in range(6)]
    with FakeLLMServer(latency=0.05) as server:
        run_generation(questions, tmp_path / "sets.jsonl", llm_config(server, tmp_path, concurrency=3))
        assert server.max_in_flight == 3
    with FakeLLMServer(latency=0.02) as server:
        run_generation(questions[:2], tmp_path / "one.jsonl", llm_config(server, tmp_path / "c1", concurrency=1))
        assert server.max_in_flight == 1


def test_request_key_covers_the_request_and_nothing_else() -> None:
    body = build_request("m", [{"role": "user", "content": "hi"}], 0.7, 3, 100)
    key = request_key("http://x/v1", body)
    assert key == request_key("http://x/v1/", dict(reversed(body.items())))  # order and trailing slash do not matter
    for changed in (
        build_request("m2", body["messages"], 0.7, 3, 100),
        build_request("m", [{"role": "user", "content": "hi!"}], 0.7, 3, 100),
        build_request("m", body["messages"], 0.8, 3, 100),
        build_request("m", body["messages"], 0.7, 4, 100),
        build_request("m", body["messages"], 0.7, 3, None),
    ):
        assert request_key("http://x/v1", changed) != key
    assert request_key("http://y/v1", body) != key


def test_retry_after_forms() -> None:
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "250"}) == 0.25
    assert _retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert _retry_after({}) is None
    assert _retry_after({"retry-after": "soon"}) is None


def test_a_similars_answer_is_the_majority_only_where_enough_solutions_agree(tmp_path: Path) -> None:
    """3 of 5 solutions agreeing reach the 0.6 threshold (the answer is theirs); 2 of 5 do not (no
    answer, its agreement 0.4 recorded); with answers off, no solution is asked for."""
    questions = [question("split"), question("scatter")]
    with FakeLLMServer(scenarios=("split", "scatter")) as server:
        sets = read_sets_of(run_generation(questions, tmp_path / "sets.jsonl", llm_config(server, tmp_path)))
        split, scatter = sets["split"], sets["scatter"]
        sums = [sum(int(n) for n in re.findall(r"\d+", text)) for text in split.similars]
        assert split.answers["similars"] == sums and split.answers["agreement"]["similars"] == [0.6] * 5
        assert scatter.answers["similars"] == [None] * 5 and scatter.answers["agreement"]["similars"] == [0.4] * 5
        before = server.requests
        off = llm_config(server, tmp_path / "off", answer_samples=0)
        quiet = read_sets_of(run_generation([question("plainx")], tmp_path / "off.jsonl", off))
        assert server.requests - before == 1 + 1 + 6 + 6 and quiet["plainx"].answers is None


def read_sets_of(summary) -> dict[str, PerturbationSet]:
    return read_sets(summary.output)


def test_solutions_answers_read_as_numbers_agree_and_a_majority_needs_its_share():
    from generation.llm_answers import majority, read_answer

    replies = ['{"solution": "…", "answer": "18"}', '{"solution": "…", "answer": "18.0"}', '{"answer": "$18"}']
    assert [read_answer(r) for r in replies] == [18, 18, 18]
    assert read_answer('{"answer": "1/3"}') == "1/3" and read_answer('{"answer": "blue"}') == "blue"
    assert read_answer("no json here") is None
    assert majority([18, 18, 18, 5, None], 0.6) == (18, 0.6)
    assert majority([18, 18, 5, 7, None], 0.6) == (None, 0.4)
    assert majority([None, None], 0.6) == (None, 0.0)
