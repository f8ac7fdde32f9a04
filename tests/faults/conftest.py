"""The fault suite: inputs and events real audits meet (NaN weights, over-long prompts, Ctrl-C,
full and read-only disks, missing tokenizers, stale or misaligned controls, NaN scores). Each
test asserts a one-line error or a visible count, and that no committed work is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def bank_questions(tmp_path_factory) -> Path:
    """40 questions of the generator's bank (half labelled members) as a questions JSONL."""
    from generation.question_bank import sample_questions

    path = tmp_path_factory.mktemp("fault-questions") / "questions.jsonl"
    rows = [
        {"id": f"q{i:02d}", "question": q.question, "label": i % 2, "answer": q.answer}
        for i, q in enumerate(sample_questions(40, seed=5))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
