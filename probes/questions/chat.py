"""Questions imported from a chat message list (``extra["chat"] = {"system": …}``) are audited in
chat format with their system turn: it becomes the system prompt wherever none is set."""

from __future__ import annotations

import logging
from typing import Sequence

from generation.records import Question

from ..errors import InputError

logger = logging.getLogger(__name__)


def chat_system_turn(questions: Sequence[Question]) -> tuple[bool, str | None]:
    """``(any question came from a message list, the system turn they share)``; refuses questions
    whose system turns differ (one prompt format serves a whole run)."""
    turns = {q.extra["chat"].get("system") for q in questions if isinstance(q.extra.get("chat"), dict)}
    if not turns:
        return False, None
    if len(turns) > 1:
        raise InputError(
            f"the questions carry {len(turns)} different system turns; audit each group in its own run "
            "(lara questions import --where …) or set one system prompt (--system-prompt / detect.system_prompt)"
        )
    return True, turns.pop()


def default_system_prompt(questions: Sequence[Question], given: str | None, where: str) -> str | None:
    """``given`` if set, else the system turn the chat questions share (logged), else None."""
    if given is not None:
        return given
    is_chat, system = chat_system_turn(questions)
    if is_chat and system:
        logger.info(
            "%s: the questions came from chat messages; their system turn is the system prompt (%d chars)",
            where,
            len(system),
        )
    return system
