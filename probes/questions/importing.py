"""``lara questions import``: a benchmark table (hub, saved dataset, Parquet/JSON/CSV) → a questions
JSONL with stable ids, untouched LaTeX and the table's provenance beside it (``Q.meta.json``)."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from generation.answers import number_of
from generation.numbers import find_slots
from generation.records import Question

from ..errors import InputError
from .presets import FIELDS, Preset, preset_named
from .question_files import write_question_file
from .tables import TableSource, open_table

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "member", "y"}
_FALSE = {"0", "false", "no", "non_member", "nonmember", "n"}


@dataclass(frozen=True)
class ImportOptions:
    """How rows become questions: the preset, column overrides, and values set on every question."""

    preset: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # {question field: column (dotted for nested)}
    label: int | None = None
    split_name: str | None = None
    limit: int | None = None
    where: dict[str, str] = field(default_factory=dict)  # {column (dotted for nested): value}: keep matching rows only
    sample: int | None = None  # a seeded random sample of this many rows (after ``where``), in table order
    seed: int = 0
    strip_suffix: str | None = (
        None  # a fixed instruction the questions end with (e.g. RL data's answer format), removed
    )


@dataclass
class ImportResult:
    questions: list[Question]
    provenance: dict[str, Any]

    def describe(self) -> str:
        p = self.provenance
        skipped = p["skipped"]
        extra = "; skipped " + ", ".join(f"{n} {why}" for why, n in skipped.items()) if skipped else ""
        chat = sum("chat" in q.extra for q in self.questions)
        lines = [
            f"{len(self.questions)} questions from {p['rows']} rows of {p['source']} "
            f"({p['preset']} fields: "
            + ", ".join(f"{k}<-{v}" for k, v in p["fields"].items())
            + f"){'; ' + str(chat) + ' in chat format' if chat else ''}{extra}"
        ]
        if p.get("ids_note"):
            lines.append(f"note: {p['ids_note']}")
        if p.get("unused_text_columns"):
            lines.append(
                "text columns not imported: " + ", ".join(p["unused_text_columns"])
                + " (a problem's facts may sit in one: --field context=COLUMN puts it before the question)"
            )  # fmt: skip
        numberless = p.get("numberless") or {}
        if numberless.get("count"):
            lines.append(
                f"warning: {numberless['count']} question(s) state no number but have a numeric answer "
                f"(e.g. {numberless['examples'][0]!r}): their facts may sit in another column (--field context=COLUMN)"
            )
        derived = p.get("derived_solutions")
        if derived:
            lines.append(
                f"worked solutions derived for {derived['derived']} of {len(self.questions)} questions"
                + ("; none for " + ", ".join(f"{n} ({why})" for why, n in derived["without"].items()) if derived["without"] else "")
            )  # fmt: skip
        if p.get("strip_suffix") is not None:
            s = p["suffix"]
            lines.append(
                f"instruction suffix {p['strip_suffix']!r} removed from {s['stripped']} question(s)"
                + (f"; {s['absent']} did not end with it and are kept as they are" if s["absent"] else "")
            )
        return "\n".join(lines)


def import_questions(spec: TableSource, options: ImportOptions) -> ImportResult:
    table, provenance = open_table(spec)
    preset = preset_named(options.preset)
    columns = resolve_columns(list(table.column_names), preset, options.fields)
    if "question" not in columns and "prompt" not in columns:
        raise InputError(
            f"{spec.source}: no question column among {', '.join(table.column_names)}; "
            "name it with --field question=COLUMN (or --field prompt=COLUMN for a chat message list)"
        )
    n_rows = len(table)
    rows = select_rows(table, options)
    selected = table if len(rows) == n_rows else table.select(rows)
    source = _source_name(spec.source)
    ids_note = None
    try:
        questions, skipped, suffix = rows_to_questions(iter(selected), columns, preset, options, default_source=source)
    except _RepeatedIds as repeated:  # a preset's id column that is not unique: text hashes instead, said so
        ids_note = (
            f"ids from text hashes: the id column {columns['id']!r} repeats ({repeated.value!r} on rows "
            f"{rows[repeated.first]} and {rows[repeated.again]})"
        )
        columns = {k: v for k, v in columns.items() if k != "id"}
        questions, skipped, suffix = rows_to_questions(iter(selected), columns, preset, options, default_source=source)
    provenance.update(
        {
            "ids_note": ids_note,
            "unused_text_columns": unused_text_columns(selected, columns, preset),
            "numberless": _numberless(questions),
            "derived_solutions": _derived_solutions(questions) if preset.derive is not None else None,
            "strip_suffix": options.strip_suffix,
            "suffix": suffix,
            "preset": preset.name,
            "fields": columns,
            "label": options.label,
            "split_name": options.split_name,
            "limit": options.limit,
            "where": options.where or None,
            "sample": options.sample,
            "seed": options.seed if options.sample else None,
            "rows": n_rows,
            "rows_selected": len(rows),
            "questions": len(questions),
            "skipped": dict(Counter(reason for reason, _ in skipped)),
            "skipped_examples": [f"row {rows[k]}: {reason}" for reason, k in skipped[:10]],
            "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    if not questions:
        why = provenance["skipped"] or ("empty table" if not n_rows else f"0 of {n_rows} rows selected")
        raise InputError(f"{spec.source}: no question imported ({why})")
    return ImportResult(questions, provenance)


def unused_text_columns(table: Any, columns: dict[str, str], preset: Preset, rows: int = 50) -> list[str]:
    """The table's columns holding text (a string of two words or more in its first ``rows`` rows)
    that neither the field map nor the preset's kept columns read."""
    read = {path.split(".")[0] for path in columns.values()} | set(preset.keep)
    left = [name for name in table.column_names if name not in read]
    if not left:
        return []
    view = table.select_columns(left).select(range(min(rows, len(table))))
    texty: set[str] = set()
    for row in view:
        texty.update(k for k, v in row.items() if isinstance(v, str) and len(v.split()) >= 2)
    return [name for name in left if name in texty]


def _derived_solutions(questions: list[Question]) -> dict[str, Any]:
    """How many questions got a worked solution from the preset, and why the others did not."""
    reasons = Counter(str(q.extra["no_solution"]).split(":")[0] for q in questions if "no_solution" in q.extra)
    return {"derived": sum("solution" in q.extra for q in questions), "without": dict(reasons.most_common())}


def _numberless(questions: list[Question]) -> dict[str, Any]:
    """How many questions state no quantity although their answer is a number (and a few of them)."""
    found = [q.question for q in questions if number_of(q.answer) is not None and not find_slots(q.question)]
    return {"count": len(found), "examples": [text[:120] for text in found[:3]]}


def select_rows(table: Any, options: ImportOptions) -> list[int]:
    """Indices of the rows to import: those matching every ``where`` (values compared as text), then
    a seeded sample of ``sample`` of them, in table order."""
    import random

    indices = list(range(len(table)))
    if options.where:
        by_lower = {n.lower(): n for n in table.column_names}
        paths = {_actual(c, by_lower): str(v) for c, v in options.where.items()}
        missing = [p for p in paths if p.split(".")[0] not in table.column_names]
        if missing:
            raise InputError(f"--where {missing[0]}=…: no such column; columns: {', '.join(table.column_names)}")
        heads = sorted({p.split(".")[0] for p in paths})
        view = table.select_columns(heads)
        seen: dict[str, Counter] = {p: Counter() for p in paths}
        indices = []
        for i, row in enumerate(view):
            values = {p: str(_get(row, p)) for p in paths}
            for p, v in values.items():
                seen[p][v] += 1
            if all(values[p] == v for p, v in paths.items()):
                indices.append(i)
        if not indices:
            shown = "; ".join(f"{p} has " + ", ".join(f"{v!r} ({n})" for v, n in seen[p].most_common(8)) for p in paths)
            raise InputError(
                f"--where {' '.join(f'{p}={v}' for p, v in paths.items())}: 0 of {len(view)} rows matched ({shown})"
            )
    if options.sample is not None and options.sample < len(indices):
        indices = sorted(random.Random(options.seed).sample(indices, options.sample))
    return indices


def resolve_columns(names: list[str], preset: Preset, overrides: dict[str, str]) -> dict[str, str]:
    """``{field: column path}`` for every field found: an override, else the preset's first present candidate."""
    unknown = sorted(set(overrides) - set(FIELDS))
    if unknown:
        raise InputError(f"--field {unknown[0]}=…: unknown field; fields are {', '.join(FIELDS)}")
    by_lower = {n.lower(): n for n in names}
    out: dict[str, str] = {}
    for key in FIELDS:
        if key in overrides:
            head = overrides[key].split(".")[0]
            if head not in names and head.lower() not in by_lower:
                raise InputError(f"--field {key}={overrides[key]}: no column {head!r}; columns: {', '.join(names)}")
            out[key] = _actual(overrides[key], by_lower)
            continue
        for candidate in preset.columns.get(key, ()):
            if candidate.split(".")[0].lower() in by_lower:
                out[key] = _actual(candidate, by_lower)
                break
    if "question" in out and "prompt" in out and "question" not in overrides:
        del out["prompt"]  # a plain question column wins over a message list the preset also looked for
    return out


def _actual(path: str, by_lower: dict[str, str]) -> str:
    head, *rest = path.split(".")
    return ".".join([by_lower.get(head.lower(), head), *rest])


class _RepeatedIds(Exception):
    """The id column a preset chose repeats a value (rows ``first`` and ``again``)."""

    def __init__(self, value: str, first: int, again: int) -> None:
        super().__init__(value)
        self.value, self.first, self.again = value, first, again


def rows_to_questions(
    rows: Iterable[dict[str, Any]], columns: dict[str, str], preset: Preset, options: ImportOptions, default_source: str
) -> tuple[list[Question], list[tuple[str, int]], dict[str, int]]:
    """The questions of ``rows``, the skipped rows as ``(reason, row index)``, and how many questions
    had ``options.strip_suffix`` removed (``stripped``) or did not end with it (``absent``).

    Raises:
        _RepeatedIds: the preset's id column repeats a value (the caller falls back to text hashes).
        InputError: an id column named with ``--field id=`` repeats a value.
    """
    questions: list[Question] = []
    skipped: list[tuple[str, int]] = []
    ids: dict[str, int] = {}
    suffix = {"stripped": 0, "absent": 0}
    for index, row in enumerate(rows):
        if options.limit is not None and len(questions) >= options.limit:
            break
        text, chat = _question_text(row, columns, index, preset.joiner)
        if text and options.strip_suffix is not None:
            text, removed = _without_suffix(text, options.strip_suffix)
            suffix["stripped" if removed else "absent"] += 1
        if not text or not text.strip():
            skipped.append(("empty question", index))
            continue
        qid = _id(row, columns, text, chat)
        if qid in ids:
            if "id" in columns and "id" in options.fields:
                raise InputError(
                    f"row {index}: duplicate id {qid!r} (first on row {ids[qid]}); ids in column "
                    f"{columns['id']!r} must be unique, or drop --field id to use text hashes"
                )
            if "id" in columns:
                raise _RepeatedIds(qid, ids[qid], index)
            skipped.append(("duplicate question text", index))
            continue
        ids[qid] = index
        questions.append(_question(row, columns, preset, options, qid, text, chat, index, default_source))
    return questions, skipped, suffix


def _question(
    row: dict[str, Any],
    columns: dict[str, str],
    preset: Preset,
    options: ImportOptions,
    qid: str,
    text: str,
    chat: dict[str, Any] | None,
    index: int,
    default_source: str,
) -> Question:
    answer, answer_extra = preset.answer(_get(row, columns.get("answer")))
    if isinstance(answer, float) and answer.is_integer():  # a table's 145.0 is the answer 145
        answer = int(answer)
    extra = {k: row[k] for k in preset.keep if k in row and row[k] not in (None, "")}
    extra.update(answer_extra)
    if preset.derive is not None:
        extra.update(preset.derive(row, answer))
    if chat is not None:
        extra["chat"] = chat
    source = _get(row, columns.get("source"))
    return Question(
        id=qid,
        question=text,
        label=options.label if options.label is not None else _label(_get(row, columns.get("label")), index),
        answer=answer,
        source=str(source) if source not in (None, "") else default_source,
        split=options.split_name or _optional_str(_get(row, columns.get("split"))),
        extra=extra,
    )


def _without_suffix(text: str, suffix: str) -> tuple[str, bool]:
    """``text`` without a trailing ``suffix`` (spacing at the junction and the end ignored), and whether it had it."""
    body, tail = text.rstrip(), suffix.strip()
    if tail and body.endswith(tail):
        return body[: len(body) - len(tail)].rstrip(), True
    return text, False


def _question_text(
    row: dict[str, Any], columns: dict[str, str], index: int, joiner: str = "\n\n"
) -> tuple[str | None, dict[str, Any] | None]:
    """The question (with its context before it, joined by ``joiner``) and, for a message list,
    ``{"system": …}``."""
    if "question" in columns:
        text = _get(row, columns["question"])
        context = _get(row, columns.get("context"))
        if isinstance(context, str) and context.strip() and isinstance(text, str):
            text = f"{context.strip()}{joiner}{text.strip()}"
        return (text if isinstance(text, str) else None if text is None else str(text)), None
    messages = _get(row, columns["prompt"])
    if isinstance(messages, str):
        return messages, None
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and "role" in m and "content" in m for m in messages
    ):
        raise InputError(
            f"row {index}: column {columns['prompt']!r} is neither text nor a list of {{role, content}} messages"
        )
    users = [m["content"] for m in messages if m["role"] == "user"]
    systems = [m["content"] for m in messages if m["role"] == "system"]
    if not users:
        return None, None
    return users[-1], {"system": systems[0] if systems else None}


def _id(row: dict[str, Any], columns: dict[str, str], text: str, chat: dict[str, Any] | None) -> str:
    """The dataset's id, else ``q`` + 12 hex digits of sha256 of the question (and its system turn)."""
    value = _get(row, columns.get("id"))
    if value not in (None, ""):
        return str(value)
    system = (chat or {}).get("system") or ""
    return "q" + hashlib.sha256(f"{system}\x00{text}".encode("utf-8")).hexdigest()[:12]


def _label(value: Any, index: int) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return int(text in _TRUE)
    raise InputError(f"row {index}: label {value!r} is not 1/0, true/false or member/non_member")


def _get(row: dict[str, Any], path: str | None) -> Any:
    if path is None:
        return None
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _optional_str(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _source_name(source: str) -> str:
    path = Path(source)
    return path.stem if path.suffix else (path.name or source)


def write_questions(result: ImportResult, output: str | Path) -> tuple[Path, Path]:
    """Write the imported questions and their provenance (``<output>.meta.json``)."""
    return write_question_file(result.questions, output, {"provenance": [result.provenance]})
