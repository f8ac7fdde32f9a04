"""The audited model's accuracy as an operation (the run's ``accuracy`` stage): each audited
question's greedy answer, judged by the toolkit's verifier against the question's answer, one row
a question in ``RUN/<model>/accuracy.csv``. The answers come through the model's response store,
so where a detector already generated the greedy answer with the same budget it is read back, not
generated again. The verdict turns the rows into the accuracy table (:mod:`probes.accuracy.table`)."""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..accuracy.verifier import gold_readable, judge
from ..detectors.likelihood import GREEDY_TOKENS, greedy_params
from ..errors import InputError
from ..scores import CLEAN_SPLIT, write_csv_atomically

if TYPE_CHECKING:
    from ..responders.base import Responder

logger = logging.getLogger(__name__)

COLUMNS = ["id", "correct", "rule", "response"]


@dataclass(frozen=True)
class AccuracySettings:
    """The accuracy the verdict reports beside its decisions (issue 44).

    Attributes:
        enabled: measure it, where the audited questions have answers.
        max_new_tokens: the greedy answer's budget (None: the run's detectors' greedy budget, so
            the answers they generated are read back from the store; 1024 without one).
    """

    enabled: bool = True
    max_new_tokens: int | None = None


def greedy_budget(settings: AccuracySettings, detectors: Sequence[Any]) -> int:
    """The answer's budget: the settings', else the largest ``max_new_tokens`` among the detectors
    that answer greedily (those with the parameter that do not sample at a temperature: their
    answers are in the store), else :data:`GREEDY_TOKENS`."""
    if settings.max_new_tokens is not None:
        return settings.max_new_tokens
    budgets = [
        d.max_new_tokens
        for d in detectors
        if not d.samples_at_temperature and isinstance(getattr(d, "max_new_tokens", None), int)
    ]
    return max(budgets, default=GREEDY_TOKENS)


def audited_with_answers(questions: Sequence[Any]) -> list[Any]:
    """The audited questions (not of split ``clean_ref``) that have an answer to judge against."""
    return [q for q in questions if q.split != CLEAN_SPLIT and q.answer is not None and str(q.answer).strip()]


def judge_answers(questions: Sequence[Any], responder: Responder, max_new_tokens: int) -> list[list[Any]]:
    """One row a question (:data:`COLUMNS`): its greedy answer judged; ``correct`` empty (not
    judged) where the question has no answer, or one the verifier cannot read (every answer would
    read wrong)."""
    answerable = audited_with_answers(questions)
    generations = responder.generate([q.question for q in answerable], greedy_params(max_new_tokens))
    judged = {
        q.id: (judge(g[0].text, q.answer) if gold_readable(q.answer) else None, g[0].text)
        for q, g in zip(answerable, generations, strict=True)
    }
    rows = []
    for q in questions:
        if q.split == CLEAN_SPLIT:
            continue
        if q.id not in judged:
            rows.append([q.id, "", "no answer to judge against", ""])
            continue
        verdict, text = judged[q.id]
        if verdict is None:
            rows.append([q.id, "", "an answer the verifier cannot read", text])
        else:
            rows.append([q.id, int(verdict.reward), verdict.rule, text])
    return rows


def write_accuracy(rows: list[list[Any]], path: str | Path) -> None:
    write_csv_atomically(path, COLUMNS, rows)
    n = sum(r[1] != "" for r in rows)
    logger.info(
        "accuracy: %d of %d judged answers right (%d not judged)", sum(r[1] == 1 for r in rows), n, len(rows) - n
    )


def read_accuracy(path: str | Path) -> dict[str, bool | None]:
    """``accuracy.csv`` as id → right (True), wrong (False) or not judged (None)."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or not {"id", "correct"} <= set(reader.fieldnames):
            raise InputError(f"{path} is not an accuracy file (columns id, correct); rerun the run's accuracy stage")
        return {row["id"]: None if row["correct"] == "" else row["correct"] == "1" for row in reader}
