"""Reading LLM answers: JSON found inside code fences and chatter, shaped per step.

Pure functions: text in, value out, :class:`ParseError` (reason ``invalid_json``) otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .records import INVALID_JSON

_FENCE = re.compile(r"```(?:[A-Za-z0-9_-]+)?\s*\n?(.*?)```", re.DOTALL)


class ParseError(ValueError):
    reason = INVALID_JSON


def find_json(text: str, kinds: tuple[type, ...]) -> Any:
    """The first JSON value of one of ``kinds`` in ``text`` (whole text, fenced blocks, then any
    ``[`` or ``{`` where a value starts)."""
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, kinds):
            return value
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            value, _end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, kinds):
            return value
    names = " or ".join("array" if k is list else "object" for k in kinds)
    raise ParseError(f"no JSON {names} found in the answer; answer with the JSON only")


def parse_string_list(text: str) -> list[str]:
    """A JSON array of strings. Also accepted: ``{"problems": [...]}`` (one list-valued key) and
    arrays of one-key objects (``[{"problem": "..."}]``)."""
    value = find_json(text, (list, dict))
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise ParseError("expected a JSON array of strings")
        value = lists[0]
    items: list[str] = []
    for item in value:
        if isinstance(item, dict) and len(item) == 1:
            item = next(iter(item.values()))
        if not isinstance(item, str):
            raise ParseError(f"expected a JSON array of strings, found an element of type {type(item).__name__}")
        items.append(item.strip())
    return items


def parse_blanked(text: str) -> str:
    """``{"blanked": "..."}`` (any single string value), or a one-string array."""
    value = find_json(text, (dict, list))
    strings = [v for v in (value.values() if isinstance(value, dict) else value) if isinstance(v, str)]
    if len(strings) != 1:
        raise ParseError('expected a JSON object {"blanked": "..."} holding one string')
    return strings[0].strip()


def parse_description(text: str) -> str:
    """A short free-text description: first non-empty line, without fences, quotes, a leading
    label (``Description:``) or a final full stop."""
    body = _FENCE.sub(lambda m: m.group(1), text).strip()
    try:
        value = json.loads(body)
        if isinstance(value, str):
            body = value
        elif isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), str):
            body = next(iter(value.values()))
    except json.JSONDecodeError:
        pass
    line = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    line = re.sub(r"^(?:[-*•]\s*)?(?:\*\*)?(?:description|answer|information(?: type)?|key information)(?:\*\*)?\s*:\s*", "", line, flags=re.IGNORECASE)
    line = line.strip().strip("\"'“”`*").strip()
    return line[:-1].strip() if line.endswith(".") else line
