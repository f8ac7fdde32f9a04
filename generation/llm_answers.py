"""Answers of LLM-written similar questions: the generator model's own majority over k solutions.

A similar question the LLM backend writes has no worked solution to re-run, so its answer is asked
of the generator model: ``answer_samples`` (k, default 5) solutions at ``answer_temperature`` (0.7),
each ending in one final answer (``{"solution": …, "answer": …}`` under a JSON schema); the answers
are read as numbers where they are numbers (``18``, ``18.0`` and ``$18`` agree) and as trimmed text
otherwise, and the most frequent one is the control's answer when its share reaches
``answer_agreement`` (0.6: 3 of 5). Below it the control has no answer — never a guess. Every
control's agreement (the majority's share) is recorded beside its answer. The detectors that read
answers check them again with the toolkit's verifier (``usable_answer``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from .answers import number_of
from .config import OpenAIConfig
from .llm import TransportFailure, build_request, derive_seed
from .parsing import ParseError, find_json
from .prompts import PromptTemplate
from .solution_program import as_answer
from .structured import response_format

METHOD = "generator-majority-v1"


def answer_settings(config: OpenAIConfig, template: PromptTemplate) -> dict[str, Any]:
    """What the answers of a set depend on (part of its provenance)."""
    return {
        "method": METHOD,
        "samples": config.answer_samples,
        "temperature": config.answer_temperature,
        "agreement": config.answer_agreement,
        "template": {"id": template.id, "sha256": template.sha256},
    }


def read_answer(text: str) -> Any:
    """The final answer of one solution: its number (an int where whole), or its trimmed text; None
    when the reply holds no answer."""
    try:
        value = find_json(text, lambda v: v.get("answer") if isinstance(v, dict) else None, 'JSON object {"answer": …}')
    except ParseError:
        return None
    number = number_of(str(value).strip().rstrip("."))
    if number is not None:
        written = as_answer(number)  # 18, 18.5; a third stays a fraction's text ("1/3")
        return written if written is not None else str(number)
    text = str(value).strip()
    return text or None


def majority(answers: list[Any], threshold: float) -> tuple[Any, float]:
    """The most frequent answer and its share of ``answers`` (None answers count as disagreeing);
    the answer is None when the share is below ``threshold``."""
    if not answers:
        return None, 0.0
    counts = Counter(json.dumps(a) for a in answers if a is not None)
    if not counts:
        return None, 0.0
    top, n = counts.most_common(1)[0]
    share = n / len(answers)
    return (json.loads(top) if share >= threshold else None), share


async def majority_answers(
    client: Any, config: OpenAIConfig, template: PromptTemplate, seed: int, qid: str, texts: list[str | None]
) -> tuple[list[Any], list[float | None]]:
    """Each text's majority answer and its agreement (None for a missing text), its k solutions
    asked concurrently (each its own seed, so each is cached on its own)."""

    async def solve(index: int, text: str, sample: int) -> Any:
        body = build_request(
            config.model,
            [{"role": "user", "content": template.render(question=text)}],
            config.answer_temperature,
            derive_seed(seed, qid, "solve", index, sample),
            config.max_tokens,
            response_format("solve") if config.structured else None,
        )
        try:
            return read_answer(await client.complete(body))
        except TransportFailure:
            return None

    async def one(index: int, text: str | None) -> tuple[Any, float | None]:
        if text is None or config.answer_samples == 0:
            return None, None
        found = await asyncio.gather(*(solve(index, text, k) for k in range(config.answer_samples)))
        return majority(list(found), config.answer_agreement)

    results = await asyncio.gather(*(one(i, t) for i, t in enumerate(texts)))
    return [a for a, _ in results], [s for _, s in results]
