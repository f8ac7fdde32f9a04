"""Reading LLM answers: JSON found inside code fences and chatter, shaped per step.

Pure functions: text in, value out, :class:`ParseError` (reason ``invalid_json``) otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, TypeVar

from .records import INVALID_JSON

T = TypeVar("T")
_FENCE = re.compile(r"```(?:[A-Za-z0-9_-]+)?\s*\n?(.*?)```", re.DOTALL)


class ParseError(ValueError):
    reason = INVALID_JSON


def find_json(text: str, convert: Callable[[Any], T | None], expected: str) -> T:
    """The first JSON value in ``text`` that ``convert`` accepts (returns non-None for).

    Looked for in the whole text, then in fenced code blocks, then at every ``[`` or ``{``
    where a JSON value starts (so chatter before and after is ignored).
    """
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            converted = convert(json.loads(candidate))
        except json.JSONDecodeError:
            continue
        if converted is not None:
            return converted
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            value, _end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        converted = convert(value)
        if converted is not None:
            return converted
    raise ParseError(f"no {expected} found in the answer; answer with the JSON only")


def _string_list(value: Any) -> list[str] | None:
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) != 1:
            return None
        value = lists[0]
    if not isinstance(value, list):
        return None
    items: list[str] = []
    for item in value:
        if isinstance(item, dict) and len(item) == 1:
            item = next(iter(item.values()))
        if not isinstance(item, str):
            return None
        items.append(item.strip())
    return items


def parse_string_list(text: str) -> list[str]:
    """A JSON array of strings. Also accepted: ``{"problems": [...]}`` (one list-valued key) and
    arrays of one-key objects (``[{"problem": "..."}]``)."""
    return find_json(text, _string_list, "JSON array of strings")


def _single_string(value: Any) -> str | None:
    values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    strings = [v for v in values if isinstance(v, str)]
    return strings[0].strip() if len(strings) == 1 and len(values) == 1 else None


def parse_blanked(text: str) -> str:
    """``{"blanked": "..."}`` (any single string value), or a one-string array."""
    return find_json(text, _single_string, 'JSON object {"blanked": "..."} holding one string')


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
    line = re.sub(
        r"^(?:[-*•]\s*)?(?:\*\*)?(?:description|answer|information(?: type)?|key information)(?:\*\*)?\s*:\s*",
        "",
        line,
        flags=re.IGNORECASE,
    )
    line = line.strip().strip("\"'“”`*").strip()
    return line[:-1].strip() if line.endswith(".") else line
