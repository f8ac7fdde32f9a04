"""Questions imported from a chat message list are audited in chat format with their own system
turn: ``lara detect`` on them equals ``lara detect --system-prompt`` on the plain questions, and
differs from no system turn; mixed system turns are refused; ``lara run`` fills the settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from generation.records import Question
from probes.cli import main
from probes.errors import InputError
from probes.pipeline.config import config_from_dict
from probes.pipeline.run import with_chat_system_turn
from probes.questions.chat import chat_system_turn
from probes.scores import ScoreTable

SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
TEXTS = ["What is 12 + 30?", "Solve $3x = 21$.", "How many primes are below 20?", "Compute $7 \\cdot 6$."]


def write(path, chat: bool):
    path.write_text(
        "".join(
            json.dumps({"id": f"q{k}", "question": t, **({"chat": {"system": SYSTEM}} if chat else {})}) + "\n"
            for k, t in enumerate(TEXTS)
        )
    )
    return path


def detect(tmp_path, toy_dirs, questions, *flags) -> tuple[np.ndarray, dict]:
    out = tmp_path / f"{questions.stem}{len(flags)}.csv"
    assert (
        main(
            [
                "-q",
                "detect",
                "ppl",
                str(questions),
                "--model",
                str(toy_dirs["qwen2"]),
                "--device",
                "cpu",
                "--param",
                "ppl.max_new_tokens=6",
                "--store",
                str(tmp_path / "store.sqlite"),
                "-o",
                str(out),
                "--no-progress",
                *flags,
            ]
        )
        == 0
    )
    return ScoreTable.read_csv(out).columns["ppl"], json.loads(out.with_suffix(".meta.json").read_text())


def test_chat_questions_are_scored_with_their_system_turn(tmp_path, toy_dirs):
    chat, meta = detect(tmp_path, toy_dirs, write(tmp_path / "chat.jsonl", True))
    explicit, _ = detect(tmp_path, toy_dirs, write(tmp_path / "plain.jsonl", False), "--system-prompt", SYSTEM)
    bare, _ = detect(tmp_path, toy_dirs, tmp_path / "plain.jsonl")
    np.testing.assert_array_equal(chat, explicit)
    assert not np.array_equal(chat, bare)
    assert meta["responder"]["prompt_format"] == {
        "mode": "auto",
        "template": "{prompt}",
        "system": SYSTEM,
        "chat": True,
    }


def test_mixed_system_turns_are_refused_unless_one_is_given():
    qs = [Question("a", "x?", extra={"chat": {"system": "A"}}), Question("b", "y?", extra={"chat": {"system": "B"}})]
    with pytest.raises(InputError, match="2 different system turns"):
        chat_system_turn(qs)
    assert chat_system_turn([Question("c", "z?")]) == (False, None)


def test_lara_run_fills_the_system_prompt_of_detectors_and_chat_extraction():
    qs = [Question("a", "x?", extra={"chat": {"system": SYSTEM}})]
    base = {"questions": "q.jsonl", "model": {"source": "m"}}
    config = with_chat_system_turn(config_from_dict(base), qs)
    assert config.detect.system_prompt == SYSTEM and config.extraction.system_prompt is None  # raw activations stay raw
    chat = with_chat_system_turn(config_from_dict({**base, "extraction": {"prompt_format": "chat"}}), qs)
    assert chat.extraction.system_prompt == SYSTEM
    mine = with_chat_system_turn(config_from_dict({**base, "detect": {"system_prompt": "mine"}}), qs)
    assert mine.detect.system_prompt == "mine"
