"""Field maps of the benchmarks RL-contamination papers audit, and of chat-format RL data.

A preset names, for each field of a question record, the dataset columns to read it from (the
first present wins, compared without case; a dotted name reads into a nested column, e.g.
``reward_model.ground_truth``), and how to turn the raw answer into a final answer. ``--field
KEY=COLUMN`` overrides any of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError
from .equations import worked_solution

FIELDS = ("id", "question", "answer", "label", "split", "source", "context", "prompt")


Answer = tuple[Any, dict[str, Any]]  # the final answer, and what else the raw value held (into ``extra``)


def plain_answer(value: Any) -> Answer:
    """An answer as the dataset gives it (numbers and LaTeX strings untouched)."""
    return value, {}


def gsm8k_answer(value: Any) -> Answer:
    """GSM8K's final answer: what follows ``####`` in its worked solution (commas dropped); the
    worked solution before it goes to ``extra["solution"]``."""
    if not isinstance(value, str) or "####" not in value:
        return value, {}
    solution, final = value.rsplit("####", 1)
    return final.strip().replace(",", ""), {"solution": solution.strip()}


def first_or_joined(value: Any) -> Answer:
    """OlympiadBench's ``final_answer`` list: its only element, or the elements joined by ``, ``
    (the list itself kept in ``extra["answers"]``)."""
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
        return (items[0] if len(items) == 1 else ", ".join(items)), {"answers": items}
    return value, {}


def equation_solution(row: dict[str, Any], answer: Any) -> dict[str, Any]:
    """SVAMP's ``Equation`` as a worked solution (``extra["solution"]``: the offline generator
    re-solves controls from it), or why it gives none (``extra["no_solution"]``)."""
    equation = row.get("Equation")
    if not isinstance(equation, str) or not equation.strip():
        return {"no_solution": "no equation"}
    solution, reason = worked_solution(equation, answer)
    return {"solution": solution} if solution is not None else {"no_solution": reason}


@dataclass(frozen=True)
class Preset:
    """Where each field comes from in one benchmark's schema."""

    name: str
    description: str
    columns: dict[str, tuple[str, ...]]
    answer: Callable[[Any], Answer] = plain_answer
    keep: tuple[str, ...] = ()  # further columns copied into ``extra``
    joiner: str = "\n\n"  # between the context (the facts) and the question, as the benchmark joins them
    derive: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None  # (row, answer) -> more ``extra``


_QUESTION = ("question", "problem")

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "math500",
            "MATH-500 (problem, solution, answer, subject, level, unique_id)",
            {"id": ("unique_id", "id"), "question": ("problem",), "answer": ("answer",)},
            keep=("solution", "subject", "level"),
        ),
        Preset(
            "aime2024",
            "AIME 2024 (problem, answer; also ID/Problem/Answer)",
            {"id": ("id",), "question": ("problem",), "answer": ("answer",)},
            keep=("solution", "url", "year"),
        ),
        Preset(
            "aime2025",
            "AIME 2025 and later, e.g. MathArena's (question, answer or problem_idx, problem, answer)",
            {"id": ("id", "problem_idx"), "question": _QUESTION, "answer": ("answer",)},
            keep=("solution", "url", "year"),
        ),
        Preset(
            "gsm8k",
            "GSM8K (question; the final answer after '####' in answer)",
            {"question": ("question",), "answer": ("answer",)},
            answer=gsm8k_answer,
        ),
        Preset(
            "svamp",
            "SVAMP (Body: the facts, Question: the ask, joined by a space; Answer; Equation: the worked solution)",
            {"id": ("ID", "id"), "question": ("Question",), "context": ("Body",), "answer": ("Answer",)},
            keep=("Equation", "Type"),
            joiner=" ",
            derive=equation_solution,
        ),
        Preset(
            "amc23",
            "AMC 2023 (id, question, answer)",
            {"id": ("id",), "question": _QUESTION, "answer": ("answer",)},
            keep=("url",),
        ),
        Preset(
            "minerva",
            "Minerva Math (question, answer)",
            {"id": ("id", "idx"), "question": _QUESTION, "answer": ("answer",)},
            keep=("solution", "type", "subject"),
        ),
        Preset(
            "olympiadbench",
            "OlympiadBench (question, final_answer list, context)",
            {"id": ("id",), "question": ("question",), "answer": ("final_answer",), "context": ("context",)},
            answer=first_or_joined,
            keep=("subfield", "answer_type", "unit", "subject"),
        ),
        Preset(
            "chat",
            "chat-format RL data (prompt = message list, its user turn is the question; member -> label)",
            {
                "id": ("id", "extra_info.index"),
                "prompt": ("prompt", "messages"),
                "answer": ("answer", "reward_model.ground_truth", "ground_truth"),
                "label": ("member", "label"),
                "source": ("data_source", "source"),
            },
            keep=("ability",),
        ),
    ]
}


GENERIC = Preset(
    "generic",
    "any table with a question column",
    {
        "id": ("id", "unique_id", "uid", "idx"),
        "question": ("question", "problem", "prompt_text", "text"),
        "answer": ("answer", "final_answer"),
        "label": ("label", "member"),
        "split": ("split",),
        "source": ("source", "data_source"),
        "prompt": ("prompt", "messages"),
    },
)


def preset_named(name: str | None) -> Preset:
    """The preset called ``name`` (``MATH-500`` and ``math500`` alike), or the generic one for None."""
    if name is None:
        return GENERIC
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for preset in PRESETS.values():
        if preset.name == key:
            return preset
    raise InputError(
        f"unknown preset {name!r}; choose one of {', '.join(PRESETS)} (or map fields with --field KEY=COLUMN)"
    )
