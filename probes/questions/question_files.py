"""A questions file and the meta record beside it (``Q.jsonl``, ``Q.meta.json``): writing them
atomically, reading the provenance and pairing back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from generation.records import QUESTION_FIELDS, Question
from lara_core.files import write_text_atomically

from ..errors import InputError


def write_question_file(questions: Sequence[Question], output: str | Path, meta: dict[str, Any]) -> tuple[Path, Path]:
    """A questions JSONL (UTF-8, LaTeX and non-ASCII as they are; temporary file, then rename) and
    its ``meta`` record beside it (``Q.meta.json``)."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(output, questions_text(questions))
    meta_path = provenance_path(output)
    write_text_atomically(meta_path, json.dumps(meta, indent=1, ensure_ascii=False, default=str) + "\n")
    return output, meta_path


def questions_text(questions: Sequence[Question]) -> str:
    """A questions file's content: one JSON record a line (UTF-8; LaTeX and non-ASCII as they are)."""
    return "".join(json.dumps(question_record(q), ensure_ascii=False) + "\n" for q in questions)


def question_record(q: Question) -> dict[str, Any]:
    """One questions-file line: the standard fields that are set, then the extra keys at top level
    (``read_questions`` reads them back into ``extra``)."""
    record = {name: getattr(q, name) for name in QUESTION_FIELDS if getattr(q, name) is not None}
    return {**record, **{k: v for k, v in q.extra.items() if k not in record}}


def provenance_path(questions: str | Path) -> Path:
    """Where a questions file's provenance lives: ``Q.jsonl`` → ``Q.meta.json``."""
    return Path(questions).with_suffix(".meta.json")


def read_question_meta(questions: str | Path) -> dict[str, Any] | None:
    """The meta record beside a questions file (``provenance``, and ``pairing`` for a paired file), or None."""
    path = provenance_path(questions)
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(
            f"{path}: not a questions provenance file ({err}); delete it or re-import the questions"
        ) from err
    if not isinstance(meta, dict):
        raise InputError(
            f"{path}: not a questions provenance file (expected a JSON object); delete it or re-import the questions"
        )
    return meta


def read_provenance(questions: str | Path) -> list[dict[str, Any]] | None:
    """The provenance records of a questions file (one per imported source), or None when it has none."""
    meta = read_question_meta(questions)
    return None if meta is None else list(meta.get("provenance", []))


def provenance_for_report(questions: str | Path) -> list[dict[str, Any]] | None:
    """What a run's reports list as the questions' provenance: a summary of the pairing, if any,
    then every imported source's record."""
    meta = read_question_meta(questions)
    if meta is None:
        return None
    pairing = meta.get("pairing")
    head = []
    if pairing:
        summary = {
            "inputs": pairing["inputs"],
            "near": pairing["near"],
            "duplicates_removed": len(pairing["duplicates"]),
        }
        head.append({"pairing": summary})
    return head + list(meta.get("provenance", []))
