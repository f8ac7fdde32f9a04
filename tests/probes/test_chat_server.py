"""``lara serve``'s loopback chat server: the real ``openai`` client over HTTP against a tiny real
model, and the LLM-driven generator through it (issue 42, item 4): a model whose answers are
garbage gets every item rejected with its reason, and nothing is lost."""

from __future__ import annotations

import json

import openai
import pytest

from cache.config import ModelConfig
from cache.loading import load_model
from generation.config import GenerationConfig
from generation.pipeline import run_generation
from generation.records import Question, read_sets
from probes.responders.chat_server import ChatServer

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def server(toy_dirs):
    loaded = load_model(ModelConfig(source=str(toy_dirs["llama"]), device="cpu"))
    loaded.tokenizer.chat_template = TEMPLATE
    with ChatServer(loaded, "toy", batch_size=4) as running:
        yield running


def _client(server: ChatServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def test_chat_completions_follow_the_openai_shape_and_are_reproducible(server):
    client = _client(server)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a b c"}]
    one = client.chat.completions.create(model="toy", messages=messages, temperature=1.0, seed=7, max_tokens=6, n=2)
    again = client.chat.completions.create(model="toy", messages=messages, temperature=1.0, seed=7, max_tokens=6, n=2)
    assert [c.message.content for c in one.choices] == [c.message.content for c in again.choices]
    assert len(one.choices) == 2 and all(c.message.role == "assistant" for c in one.choices)
    prompt = server.responder.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    expected_prompt_tokens = len(server.responder.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert one.usage.prompt_tokens == expected_prompt_tokens
    assert (
        one.usage.completion_tokens <= 12
        and one.usage.total_tokens == expected_prompt_tokens + one.usage.completion_tokens
    )
    assert {c.finish_reason for c in one.choices} <= {"stop", "length"}
    assert [m.id for m in client.models.list().data] == ["toy"]


def test_a_malformed_request_is_a_400_with_its_reason(server):
    with pytest.raises(openai.BadRequestError, match="'messages' must be a non-empty list"):
        _client(server).chat.completions.create(model="toy", messages=[])


def test_the_generator_through_the_server_records_every_rejection(server, tmp_path):
    """A 0.9 M-parameter model answers gibberish: every item is rejected with a reason, and each
    question still gets its record (the original kept, the failures counted)."""
    config = GenerationConfig.from_dict(
        {
            "backend": "openai",
            "seed": 0,
            "similars": 2,
            "paraphrases": 1,
            "openai": {
                "base_url": server.base_url,
                "model": "toy",
                "api_key_env": None,
                "max_tokens": 24,
                "max_attempts": 1,
                "concurrency": 1,
                "cache_dir": str(tmp_path / "cache"),
            },
        }
    )
    questions = [Question(id=f"q{i}", question=q) for i, q in enumerate(["Ana has 3 pens and buys 4. How many?"])]
    out = tmp_path / "sets.jsonl"
    summary = run_generation(questions, out, config, progress=False, overwrite=True)
    sets = read_sets(out)
    assert [s.question.id for s in sets] == ["q0"] and sets[0].question.question == questions[0].question
    assert summary.failures and sum(summary.failures.values()) >= 1
    record = json.loads(out.read_text().splitlines()[0])
    assert record["failures"] and all(f.get("reason") for f in record["failures"])
    assert server.requests >= 1


SIMILARS_SCHEMA = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 40},
    "minItems": 3,
    "maxItems": 3,
}


def test_a_json_schema_request_parses_where_the_same_request_unconstrained_does_not(server):
    """The same request to the real server, twice: without ``response_format`` the toy model's
    answer is no JSON at all; with ``json_schema`` it is three strings as the schema says, written
    with no free whitespace, and reproducible from its seed."""
    from generation.parsing import ParseError, parse_string_list
    from generation.structured import step_schema

    client = _client(server)
    messages = [{"role": "user", "content": "Write 3 problems as a JSON array of strings."}]
    plain = client.chat.completions.create(model="toy", messages=messages, temperature=1.0, seed=3, max_tokens=60)
    with pytest.raises(ParseError):
        parse_string_list(plain.choices[0].message.content)
    fmt = {"type": "json_schema", "json_schema": {"name": "lara_similars", "strict": True, "schema": SIMILARS_SCHEMA}}
    kept = [
        client.chat.completions.create(
            model="toy", messages=messages, temperature=1.0, seed=3, max_tokens=200, response_format=fmt
        )
        for _ in range(2)
    ]
    text = kept[0].choices[0].message.content
    items = json.loads(text)
    assert isinstance(items, list) and len(items) == 3 and all(isinstance(i, str) and 1 <= len(i) <= 40 for i in items)
    assert kept[0].choices[0].finish_reason == "stop" and text == kept[1].choices[0].message.content
    assert "\n" not in text and "  " not in text.replace('", "', "")[:1]  # no free whitespace between tokens
    assert step_schema("similars", 3)["minItems"] == 3
