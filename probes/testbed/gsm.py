"""Testbed problems nobody here wrote: GSM-Symbolic's templates of GSM8K test questions.

reasoning-gym (the ``gsm`` extra: ``pip install -e ".[gsm]"``) ships Apple's GSM-Symbolic
templates as generators: each draws names, objects and numbers and returns the question, its
chain-of-thought solution ending in ``#### n`` and the template's variables. A testbed problem is
one draw, kept as written; its solution is the template's own chain of thought.

One generic rule, the same for every template, picks the draws a small model trained from
scratch on two CPU cores can learn (:func:`learnable`): every number in the question and the
solution is a whole number below 1,000, the solution has at most 400 characters and the question
at most 480. A template is used when at least :data:`MIN_SHARE` of its draws pass (a screening
draw from the seed, :func:`usable_templates`); which templates were used is recorded.

What makes two problems the same (:attr:`Problem.key`) is the template and its numeric variables,
so the SFT pool never shares a (template, numbers) pair with the audited splits, whatever names
or objects were drawn.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Any, Callable

from ..errors import InputError
from .problems import Problem

MAX_NUMBER = 999
MAX_SOLUTION_CHARS = 400
MAX_QUESTION_CHARS = 480
MIN_SHARE = 0.2
SCREEN_DRAWS = 100

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
FINAL = re.compile(r"####\s*(-?\d+)\s*$")

Generator = Callable[[random.Random, float], dict[str, Any]]


@lru_cache(maxsize=1)
def generators() -> dict[int, Generator]:
    """``{template: generate(rng, difficulty)}`` for every template reasoning-gym marks as working."""
    try:
        from reasoning_gym.arithmetic.gsm_symbolic import generators_00_49, generators_50_99
        from reasoning_gym.arithmetic.gsm_symbolic.gsm_symbolic import tasks_ok
    except ImportError:
        raise InputError(
            'the gsm testbed needs reasoning-gym: pip install -e ".[gsm]" (or pip install reasoning-gym)'
        ) from None
    found = {
        int(name.split("_")[1]): getattr(module, name)
        for module in (generators_00_49, generators_50_99)
        for name in dir(module)
        if name.startswith("generate_")
    }
    return {t: found[t] for t in sorted(tasks_ok) if t in found}


def learnable(question: str, solution: str) -> bool:
    """The generic filter: whole numbers below 1,000 throughout, short question and solution."""
    if len(solution) > MAX_SOLUTION_CHARS or len(question) > MAX_QUESTION_CHARS or not FINAL.search(solution):
        return False
    for number in NUMBER.findall(f"{question}\n{solution}"):
        plain = number.replace(",", "")
        if "." in plain or int(plain) > MAX_NUMBER:
            return False
    return True


def to_problem(template: int, example: dict[str, Any]) -> Problem | None:
    """A testbed problem from one generator draw, or None when the draw fails :func:`learnable`."""
    question = example["question"].strip()
    solution = example["metadata"]["answer_cot"].strip()
    if not learnable(question, solution):
        return None
    answer = int(FINAL.search(solution).group(1))
    variables = example["metadata"].get("variables", {})
    numbers = tuple(
        sorted((k, v) for k, v in variables.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    )
    if not numbers:  # nothing to tell two draws apart but the text: key on the text's numbers
        numbers = tuple((f"n{i}", int(n.replace(",", ""))) for i, n in enumerate(NUMBER.findall(question)))
    return Problem(template, numbers, question, solution, answer)


def draw_gsm(template: int, rng: random.Random) -> Problem | None:
    """One draw of GSM-Symbolic template ``template`` (None when it is not learnable or the
    generator refuses the draw)."""
    try:
        example = generators()[template](rng, 1.0)
    except Exception:  # noqa: BLE001 - a generator's own assertion on an unlucky draw: draw again
        return None
    return to_problem(template, example)


def usable_templates(seed: int, draws: int = SCREEN_DRAWS, min_share: float = MIN_SHARE) -> list[int]:
    """Templates whose draws pass :func:`learnable` at least ``min_share`` of the time (screened
    with their own seeded draws, so the choice does not depend on the split sizes)."""
    kept = []
    for template in generators():
        rng = random.Random(f"screen:{seed}:{template}")
        passed = sum(draw_gsm(template, rng) is not None for _ in range(draws))
        if passed >= min_share * draws:
            kept.append(template)
    return kept
