"""A questions file (JSONL, one object per question) read for one field of every question: its
label, its split, its text, its matched group. The records themselves are read by
:func:`generation.records.read_questions`; these readers take any JSONL of objects with an ``id``
(a labels file, a run's ``questions.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Hashable, Mapping

from generation.records import jsonl_lines, record_field

from ..errors import InputError


def read_labels(path: str | Path, required: bool = True) -> dict[str, int | None]:
    """``{id: 1 | 0 | None}`` from a JSONL file of objects with ``id`` and ``label`` (``required``:
    refuse a file where no question has a label)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"labels file not found: {path}")
    labels: dict[str, int | None] = {}
    for lineno, line in jsonl_lines(path):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
        if not isinstance(data, dict) or "id" not in data:
            raise InputError(f"{path}:{lineno}: expected an object with 'id' and 'label'")
        label = data.get("label")
        if label is not None and (isinstance(label, bool) or label not in (0, 1)):
            raise InputError(f"{path}:{lineno}: 'label' must be 1 (member), 0 (non-member) or null, got {label!r}")
        labels[str(data["id"])] = label
    if required and not any(v is not None for v in labels.values()):
        raise InputError(f"{path}: no question has a label (1 member / 0 non-member)")
    return labels


def read_question_texts(path: str | Path) -> dict[str, str]:
    """``{id: question}`` of the objects of a JSONL file that carry a ``question`` (a questions file)."""
    out: dict[str, str] = {}
    for _, line in jsonl_lines(path):
        data = json.loads(line)
        if isinstance(data, dict) and "id" in data and isinstance(data.get("question"), str):
            out[str(data["id"])] = data["question"]
    return out


MATCH_FIELDS = ("pair", "template")  # a question's matched group, in this order


def match_group(record: Mapping[str, Any]) -> Hashable | None:
    """A question record's matched group: its ``pair`` or ``template`` field, top-level or under its
    ``extra`` object (where ``lara questions import`` and the testbeds write it), or None."""
    for key in MATCH_FIELDS:
        value = record_field(record, key)
        if value is not None:
            return str(value)
    return None


def read_question_groups(path: str | Path) -> dict[str, str | None]:
    """``{id: matched group}`` (a ``pair`` or ``template`` field, SPEC §8.8) of a JSONL file's objects."""
    return {
        str(d["id"]): match_group(d)
        for _, line in jsonl_lines(path)
        if isinstance(d := json.loads(line), dict) and "id" in d
    }


def read_splits(path: str | Path) -> dict[str, str | None]:
    """``{id: split}`` from a questions JSONL file (``None`` where a question has no split)."""
    out: dict[str, str | None] = {}
    for _, line in jsonl_lines(path):
        data = json.loads(line)
        if isinstance(data, dict) and "id" in data:
            out[str(data["id"])] = data.get("split")
    return out
