"""The JSON schema each LLM step's answer must keep to, sent as ``response_format: json_schema``.

OpenAI-compatible servers decode under it (vLLM's structured outputs, OpenAI's strict schemas,
``lara serve`` and the in-process backend through :mod:`generation.constrained`), so an answer
parses by construction; the answer is still parsed and validated (:mod:`generation.parsing`,
:mod:`generation.validate`) — a schema fixes the shape, not the content. Strings have a length
bound — a rewrite at most 1.5 times the text it rewrites — so a runaway string is ended by the
schema, not cut by ``max_tokens`` into JSON that does not parse.
"""

from __future__ import annotations

from typing import Any

MAX_PROBLEM_CHARS = 1200  # a similar problem, a paraphrase, a blanked variant: at most this, …
REWRITE_SLACK = 1.5  # … and at most 1.5 times the text it rewrites, plus 40 characters
MAX_DESCRIPTION_CHARS = 60  # a few words (the validator takes up to 15)
MAX_SOLUTION_CHARS = 600
MAX_ANSWER_CHARS = 30


def step_schema(step: str, count: int = 1, length: int = 0) -> dict[str, Any]:
    """The schema of ``step``'s answer: ``count`` strings for the list steps (similars,
    paraphrases), an object with one string for the others; ``length``: the text rewritten, whose
    size bounds a rewrite's."""
    bound = min(MAX_PROBLEM_CHARS, int(REWRITE_SLACK * length) + 40) if length else MAX_PROBLEM_CHARS
    text = {"type": "string", "minLength": 1, "maxLength": bound}
    if step in ("similars", "paraphrases"):
        return {"type": "array", "items": text, "minItems": count, "maxItems": count}
    if step == "key_information":
        return _object({"description": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION_CHARS}})
    if step == "blanked":
        return _object({"blanked": text})
    if step == "solve":
        solution = {"type": "string", "maxLength": MAX_SOLUTION_CHARS}
        return _object(
            {"solution": solution, "answer": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_CHARS}}
        )
    raise ValueError(f"no schema for step {step!r}")


def response_format(step: str, count: int = 1, length: int = 0) -> dict[str, Any]:
    """The ``response_format`` of a chat-completions request that asks for ``step_schema``."""
    return {
        "type": "json_schema",
        "json_schema": {"name": f"lara_{step}", "strict": True, "schema": step_schema(step, count, length)},
    }


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a chat-completions request asks its answer to keep to, or None (``json_object``:
    any JSON object)."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "object"}
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ValueError("response_format json_schema needs json_schema.schema: an object")
        return schema
    return None


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}
