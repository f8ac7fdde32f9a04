"""Questions in, perturbation sets out: the records and their JSONL formats.

Input (one JSON object per line)::

    {"id": "gsm8k-17", "question": "...", "label": 1, "answer": "18", "source": "gsm8k", "split": "test"}

``id`` (string or integer, unique; stored as a string) and ``question`` are required; ``label``
(1 = member/contaminated, 0 = clean, or null) and the other fields are optional and copied to the
output; any further keys are kept under ``extra``.

Output: one :class:`PerturbationSet` per question (see :meth:`PerturbationSet.to_dict`). Member
``i = 0`` is the original question, ``i = 1 … K`` the similar questions. Every part is either a
validated string or ``null``; every ``null`` has an entry in ``failures`` naming its step, member
and reason, so nothing goes missing silently (:func:`unexplained_gaps` checks this).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from lara_core.errors import json_problem
from lara_core.files import utf8_lines

from .errors import InputError

logger = logging.getLogger(__name__)

BLANK = "[BLANK]"
STEPS = ("similars", "key_information", "blanked", "paraphrases")
CONTROLS_STEP = "controls"  # further similars drawn only as matched controls (no blanks, no paraphrases)
QUESTION_FIELDS = ("id", "question", "label", "answer", "source", "split")

# Reasons a part can be missing. Per-question problems, never crashes.
NO_NUMBERS = "no_numbers"  # offline: nothing numeric to vary or blank
TOO_FEW_VALUES = "too_few_values"  # fewer quantities than [BLANK]s asked for
NOT_ENOUGH_DISTINCT = "not_enough_distinct"  # could not make enough different texts
INVALID_JSON = "invalid_json"  # the LLM answer held no usable JSON of the right shape
WRONG_COUNT = "wrong_count"  # fewer valid items than asked for, after every attempt
BLANK_COUNT = "blank_count"  # not exactly k [BLANK] markers
COPY = "copy_of_source"  # identical (up to case and spacing) to the text it rewrites
DUPLICATE = "duplicate"  # identical to a sibling
NUMBERS_UNCHANGED = "numbers_unchanged"  # a similar question kept the original's values
CHANGED_OUTSIDE_BLANKS = "changed_outside_blanks"  # a blanked variant edits text away from its markers
REVEALS_BLANK = "reveals_blank"  # the removed value reappears
EMPTY = "empty"
TOO_LONG = "too_long"
RATE_LIMITED = "rate_limited"  # HTTP 429 on every attempt
SERVER_ERROR = "server_error"  # HTTP 5xx on every attempt
TIMEOUT = "timeout"
CONNECTION_ERROR = "connection_error"
BAD_REQUEST = "bad_request"  # HTTP 400/422: the request itself was refused
UPSTREAM_MISSING = "upstream_missing"  # the part it depends on is missing


def record_field(record: Mapping[str, Any], key: str) -> Any:
    """A questions-file line's field ``key``, top-level or under its ``extra`` object, or None."""
    nested = record.get("extra")
    return record.get(key, nested.get(key) if isinstance(nested, Mapping) else None)


@dataclass(frozen=True)
class Question:
    """One audited question (a line of the questions file)."""

    id: str
    question: str
    label: int | None = None
    answer: Any = None
    source: str | None = None
    split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def extra_value(self, key: str) -> Any:
        """A field the questions file gives beyond the standard ones, top-level or under its
        ``extra`` object (where ``lara questions import`` and the testbeds write the worked
        solution and the template), or None."""
        return record_field(self.extra, key)

    def fields(self) -> dict[str, Any]:
        """The input fields as they are copied into the output record."""
        out = {name: getattr(self, name) for name in QUESTION_FIELDS}
        if self.extra:
            out["extra"] = dict(self.extra)
        return out


@dataclass(frozen=True)
class Failure:
    """Why a part of a set is missing.

    Attributes:
        step: one of :data:`STEPS`, or :data:`CONTROLS_STEP`.
        member: the group member concerned (0 = original, 1…K = similars), or None for the
            whole step.
        reason: a reason code (module constants), stable for counting.
        detail: a human-readable explanation (may quote the rejected output, truncated).
        attempts: how many requests/tries were made before giving up.
    """

    step: str
    member: int | None
    reason: str
    detail: str = ""
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "member": self.member,
            "reason": self.reason,
            "detail": self.detail,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Failure":
        return cls(data["step"], data["member"], data["reason"], data.get("detail", ""), data.get("attempts", 1))


@dataclass
class PerturbationSet:
    """The perturbation set of one question (SPEC §1).

    Attributes:
        question: the input question.
        similars: K similar questions q1…qK (None where invalid).
        key_information: the removed information, in a few words (None if that step failed).
        blanked: 1+K blanked variants q_i⁻ (index 0 = the original's).
        paraphrases: 1+K lists of M paraphrases of q_i⁻ (entries None where missing).
        failures: one entry per missing part.
        provenance: backend, model, templates, temperatures, seed, sizes, toolkit version.
        controls: further similar questions drawn only as matched controls (SPEC §8.10's
            ``decision_controls``): no blanked variants, no paraphrases (None where invalid).
        answers: the similars' and controls' answers re-solved from the question's worked
            solution (:mod:`generation.answers`): ``{"similars": [...], "controls": [...]}``
            aligned with them (None where unknown), and ``"unavailable"`` with the reason when the
            solution could not be read; None when the question has no worked solution.
    """

    question: Question
    similars: list[str | None]
    key_information: str | None
    blanked: list[str | None]
    paraphrases: list[list[str | None]]
    failures: list[Failure]
    provenance: dict[str, Any]
    controls: list[str | None] = field(default_factory=list)
    answers: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        """True when every part is present and valid."""
        return (
            all(s is not None for s in self.similars)
            and self.key_information is not None
            and all(b is not None for b in self.blanked)
            and all(p is not None for row in self.paraphrases for p in row)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.question.fields(),
            "complete": self.complete,
            "similars": list(self.similars),
            "key_information": self.key_information,
            "blanked": list(self.blanked),
            "paraphrases": [list(row) for row in self.paraphrases],
            "failures": [f.to_dict() for f in self.failures],
            "provenance": self.provenance,
            **({"controls": list(self.controls)} if self.controls else {}),
            **({"answers": self.answers} if self.answers is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PerturbationSet":
        question = Question(**{k: data.get(k) for k in QUESTION_FIELDS}, extra=data.get("extra") or {})
        return cls(
            question=question,
            similars=list(data["similars"]),
            key_information=data["key_information"],
            blanked=list(data["blanked"]),
            paraphrases=[list(row) for row in data["paraphrases"]],
            failures=[Failure.from_dict(f) for f in data["failures"]],
            provenance=data["provenance"],
            controls=list(data.get("controls") or []),
            answers=data.get("answers"),
        )

    def failure_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for failure in self.failures:
            counts[failure.reason] = counts.get(failure.reason, 0) + 1
        return counts


def empty_set(
    question: Question, k_similars: int, m_paraphrases: int, provenance: dict[str, Any], n_controls: int = 0
) -> PerturbationSet:
    """A set with every part missing, to be filled in step by step (``n_controls``: further
    similars drawn only as controls)."""
    return PerturbationSet(
        question=question,
        similars=[None] * k_similars,
        key_information=None,
        blanked=[None] * (k_similars + 1),
        paraphrases=[[None] * m_paraphrases for _ in range(k_similars + 1)],
        failures=[],
        provenance=provenance,
        controls=[None] * n_controls,
    )


def unexplained_gaps(record: PerturbationSet) -> list[str]:
    """Missing parts that no failure entry explains (should always be empty)."""

    def explained(step: str, member: int | None) -> bool:
        return any(f.step == step and (f.member is None or f.member == member) for f in record.failures)

    gaps = [
        f"similars[{i}]" for i, s in enumerate(record.similars, start=1) if s is None and not explained("similars", i)
    ]
    gaps += [
        f"controls[{i}]"
        for i, s in enumerate(record.controls, start=1)
        if s is None and not explained(CONTROLS_STEP, i)
    ]
    if record.key_information is None and not explained("key_information", None):
        gaps.append("key_information")
    gaps += [f"blanked[{i}]" for i, b in enumerate(record.blanked) if b is None and not explained("blanked", i)]
    gaps += [
        f"paraphrases[{i}]"
        for i, row in enumerate(record.paraphrases)
        if any(p is None for p in row) and not explained("paraphrases", i)
    ]
    return gaps


# ----------------------------------------------------------------------------- reading questions


def jsonl_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of the non-blank lines of a UTF-8 JSONL file — the one reader of
    question, set and label files: a byte-order mark is skipped, any other encoding is refused
    naming the line (:func:`lara_core.files.utf8_lines`)."""
    for lineno, line in utf8_lines(Path(path)):
        if line.strip():
            yield lineno, line


TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".arrow", ".xlsx")
MAX_LISTED = 10  # bad lines named in one message; the rest counted


def read_questions(path: str | Path) -> list[Question]:
    """Questions of a JSONL file, in file order. Every bad line is named in one error (up to
    :data:`MAX_LISTED`, the rest counted), so a file is fixed in one pass."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"questions file not found: {path}")
    if path.suffix.lower() in TABLE_SUFFIXES:
        raise InputError(
            f"{path} is a {path.suffix.lstrip('.').upper()} table; a questions file is JSONL (one JSON "
            f"object per line): convert it with `lara questions import {path} -o questions.jsonl`"
        )
    questions: list[Question] = []
    seen: dict[str, int] = {}
    problems: list[str] = []
    for lineno, line in jsonl_lines(path):
        try:
            question = parse_question(line, f"{path}:{lineno}")
        except InputError as err:
            problems.append(str(err))
            continue
        if question.id in seen:
            problems.append(
                f"{path}:{lineno}: duplicate id {question.id!r} (first on line {seen[question.id]}); ids must be unique"
            )
            continue
        seen[question.id] = lineno
        questions.append(question)
    if problems:
        more = f"; and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        hint = (
            f" (is it a table? convert it with `lara questions import {path} -o questions.jsonl`)"
            if not questions and "not valid JSON" in problems[0]
            else ""
        )
        head = "" if len(problems) == 1 else f"{len(problems)} bad lines: "
        raise InputError(f"{head}{'; '.join(problems[:MAX_LISTED])}{more}{hint}")
    if not questions:
        raise InputError(f"{path}: no questions (expected one JSON object per line with 'id' and 'question')")
    return questions


def parse_question(line: str, where: str) -> Question:
    """One questions-file line; ``where`` prefixes error messages (``file:line``)."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: not valid JSON ({json_problem(err)})") from err
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object with 'id' and 'question', got {type(data).__name__}")
    for key in ("id", "question"):
        if key not in data:
            raise InputError(f"{where}: missing required key '{key}'")
    qid = data["id"]
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
        raise InputError(f"{where}: 'id' must be a non-empty string or an integer, got {qid!r}")
    text = data["question"]
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: 'question' must be a non-empty string")
    label = data.get("label")
    if label is not None and (isinstance(label, bool) or label not in (0, 1)):
        raise InputError(f"{where}: 'label' must be 1 (member), 0 (clean) or null, got {label!r}")
    for key in ("source", "split"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise InputError(f"{where}: '{key}' must be a string, got {data[key]!r}")
    extra = {k: v for k, v in data.items() if k not in QUESTION_FIELDS}
    return Question(
        id=str(qid),
        question=text,
        label=label,
        answer=data.get("answer"),
        source=data.get("source"),
        split=data.get("split"),
        extra=extra,
    )


def read_sets(path: str | Path) -> list[PerturbationSet]:
    """Perturbation sets of a ``lara generate`` output file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"perturbation-set file not found: {path}; make it with `lara generate QUESTIONS.jsonl -o {path}`"
        )
    records: list[PerturbationSet] = []
    seen: set[str] = set()
    for lineno, line in jsonl_lines(path):
        try:
            record = PerturbationSet.from_dict(json.loads(line))
        except json.JSONDecodeError as err:
            raise InputError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
        except (KeyError, TypeError, AttributeError) as err:
            raise InputError(
                f"{path}:{lineno}: not a perturbation set (missing or malformed {err}); "
                "expected the output of `lara generate`"
            ) from None
        if record.question.id in seen:
            raise InputError(f"{path}:{lineno}: duplicate question id {record.question.id!r}")
        seen.add(record.question.id)
        records.append(record)
    if not records:
        raise InputError(f"{path} holds no perturbation sets")
    return records


def write_questions(questions: Iterable[Question], path: str | Path) -> None:
    """Write questions as JSONL (the input format)."""
    with open(path, "w", encoding="utf-8") as handle:
        for q in questions:
            handle.write(json.dumps({k: v for k, v in q.fields().items() if v is not None}, ensure_ascii=False) + "\n")
