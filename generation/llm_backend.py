"""The LLM backend: the four steps of SPEC §1 as prompts to an OpenAI-compatible model.

For one question: (1) K similar questions, (2) the key-information description, (3) one
blanked variant per member (0 = original), (4) M paraphrases per blanked variant. Steps 3 and 4
run their members concurrently. An answer that fails validation is retried with the previous
answer and what was wrong appended to the conversation (a new request, so a new cache entry);
valid items of list answers are pooled across attempts. What is still missing after
``max_attempts`` is recorded with the last reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from . import records as r
from .config import GenerationConfig
from .llm import CallStats, ChatClient, TransportFailure, build_request, derive_seed
from .llm_answers import answer_settings, majority_answers
from .parsing import ParseError, parse_blanked, parse_description, parse_string_list
from .prompts import PromptTemplate
from .records import Failure, PerturbationSet, Question
from .source_digest import code_digest
from .structured import response_format
from .validate import Problem, check_blanked, check_key_information, check_paraphrase, check_similar, removed_spans

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    value: T | None
    failure: Failure | None


class LLMGenerator:
    """Perturbation sets from an LLM (see the module docstring)."""

    name = "llm"

    def __init__(
        self, config: GenerationConfig, toolkit_version: str, client: ChatClient, templates: dict[str, PromptTemplate]
    ) -> None:
        self.config = config
        self.toolkit_version = toolkit_version
        self.client = client
        self.templates = templates

    def provenance(self) -> dict[str, Any]:
        c, o = self.config, self.config.openai
        where = {"model": o.model, "base_url": o.base_url} if c.backend == "openai" else {"model": c.local.model}
        return {
            "backend": c.backend,
            "code": code_digest(),
            **where,
            "templates": {step: {"id": t.id, "sha256": t.sha256} for step, t in self.templates.items()},
            "temperatures": {
                "similars": o.temperature.similars,
                "key_information": o.temperature.key_information,
                "blanked": o.temperature.blanked,
                "paraphrases": o.temperature.paraphrases,
            },
            "max_tokens": o.max_tokens,
            "max_attempts": o.max_attempts,
            "structured": o.structured,
            **({"answers": answer_settings(o, self.templates["solve"])} if o.answer_samples else {}),
            "seed": c.seed,
            "similars": c.similars,
            "paraphrases": c.paraphrases,
            "blanks": c.blanks,
            "min_changed": c.min_changed,
            **({"controls": c.controls} if c.controls else {}),
            "toolkit_version": self.toolkit_version,
        }

    @property
    def stats(self) -> CallStats:
        return self.client.stats

    def run(self, questions: list[Question], finish: Callable[[PerturbationSet], None]) -> None:
        """Generate the questions' sets, ``concurrency`` questions at a time (requests are capped
        separately by the client), handing each finished set to ``finish``."""
        asyncio.run(self._run(questions, finish))

    async def _run(self, questions: list[Question], finish: Callable[[PerturbationSet], None]) -> None:
        slots = asyncio.Semaphore(self.config.openai.concurrency)

        async def one(question: Question) -> None:
            async with slots:
                finish(await self.generate(question))

        tasks = [asyncio.ensure_future(one(q)) for q in questions]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            await self.client.aclose()

    def close(self) -> None:
        self.client.cache.close()

    async def generate(self, question: Question) -> PerturbationSet:
        c = self.config
        record = r.empty_set(question, c.similars, c.paraphrases, self.provenance(), c.controls)
        q0 = question.question

        similars = await self._similars(question)
        record.similars[: len(similars.value or [])] = similars.value or []
        if similars.failure:
            missing = range(len(similars.value or []) + 1, c.similars + 1)
            record.failures += [
                Failure("similars", i, similars.failure.reason, similars.failure.detail, similars.failure.attempts)
                for i in missing
            ]
        if c.controls:
            controls = await self._similars(question, c.controls, [s for s in record.similars if s is not None])
            record.controls[: len(controls.value or [])] = controls.value or []
            if controls.failure:
                f = controls.failure
                record.failures += [
                    Failure(r.CONTROLS_STEP, i, f.reason, f.detail, f.attempts)
                    for i in range(len(controls.value or []) + 1, c.controls + 1)
                ]

        if c.openai.answer_samples:
            texts = [*record.similars, *record.controls]
            answers, agreement = await majority_answers(
                self.client, c.openai, self.templates["solve"], c.seed, question.id, texts
            )
            k = len(record.similars)
            record.answers = {
                "similars": answers[:k],
                "controls": answers[k:],
                "agreement": {"similars": agreement[:k], "controls": agreement[k:]},
            }

        info = await self._key_information(question)
        record.key_information = info.value
        members: list[str | None] = [q0, *record.similars]
        if info.failure:
            record.failures.append(info.failure)
            record.failures.append(Failure("blanked", None, r.UPSTREAM_MISSING, "no key information to remove"))
            record.failures.append(Failure("paraphrases", None, r.UPSTREAM_MISSING, "no blanked variants"))
            return record

        async def blank(i: int) -> None:
            member = members[i]
            if member is None:
                record.failures.append(Failure("blanked", i, r.UPSTREAM_MISSING, f"similar question {i} is missing"))
                return
            outcome = await self._blank(question, i, member, info.value or "")
            if outcome.failure:
                record.failures.append(outcome.failure)
            else:
                record.blanked[i] = outcome.value

        await asyncio.gather(*(blank(i) for i in range(len(members))))

        async def paraphrase(i: int) -> None:
            blanked, member = record.blanked[i], members[i]
            if blanked is None or member is None:
                record.failures.append(Failure("paraphrases", i, r.UPSTREAM_MISSING, f"blanked variant {i} is missing"))
                return
            outcome = await self._paraphrases(question, i, member, blanked)
            record.paraphrases[i][: len(outcome.value or [])] = outcome.value or []
            if outcome.failure:
                record.failures.append(outcome.failure)

        await asyncio.gather(*(paraphrase(i) for i in range(len(members))))
        record.failures.sort(
            key=lambda f: ((*r.STEPS, r.CONTROLS_STEP).index(f.step), -1 if f.member is None else f.member)
        )
        return record

    # -- the four steps ----------------------------------------------------------------------

    async def _similars(
        self, question: Question, count: int | None = None, taken: list[str] | None = None
    ) -> Outcome[list[str]]:
        """K similars; or (``count``, ``taken``) further ones distinct from ``taken``, matched controls
        only (their own request: member -1 in its seed)."""
        k, q0, taken = count or self.config.similars, question.question, taken or []
        pool: list[str] = []

        def accept(answer: str) -> Problem | None:
            return self._pool_items(
                answer,
                k,
                pool,
                lambda item: check_similar(q0, item, taken + pool, self.config.min_changed),
                "similar problems",
            )

        prompt = self.templates["similars"].render(question=q0, count=k)
        failure = await self._ask(question, "similars", None if count is None else -1, prompt, accept, (k, len(q0)))
        return Outcome(pool[:k], failure)

    async def _key_information(self, question: Question) -> Outcome[str]:
        found: list[str] = []

        def accept(answer: str) -> Problem | None:
            description = parse_description(answer)
            problem = check_key_information(description, question.question)
            if problem is None:
                found.append(description)
            return problem

        prompt = self.templates["key_information"].render(question=question.question)
        failure = await self._ask(question, "key_information", None, prompt, accept, (1, 0))
        return Outcome(found[0] if found else None, failure)

    async def _blank(self, question: Question, i: int, member: str, information: str) -> Outcome[str]:
        found: list[str] = []
        k = self.config.blanks

        def accept(answer: str) -> Problem | None:
            try:
                blanked = parse_blanked(answer)
            except ParseError as err:
                return Problem(r.INVALID_JSON, str(err))
            problem = check_blanked(member, blanked, k)
            if problem is None:
                found.append(blanked)
            return problem

        prompt = self.templates["blanked"].render(question=member, information=information, k=k)
        failure = await self._ask(question, "blanked", i, prompt, accept, (1, len(member)))
        return Outcome(found[0] if found else None, failure)

    async def _paraphrases(self, question: Question, i: int, member: str, blanked: str) -> Outcome[list[str]]:
        m, k = self.config.paraphrases, self.config.blanks
        removed = removed_spans(member, blanked) or []
        pool: list[str] = []

        def accept(answer: str) -> Problem | None:
            return self._pool_items(
                answer, m, pool, lambda item: check_paraphrase(blanked, item, k, pool, removed), "paraphrases"
            )

        prompt = self.templates["paraphrases"].render(question=blanked, count=m, k=k)
        failure = await self._ask(question, "paraphrases", i, prompt, accept, (m, len(blanked)))
        return Outcome(pool[:m], failure)

    # -- shared machinery --------------------------------------------------------------------

    @staticmethod
    def _pool_items(
        answer: str, count: int, pool: list[str], check: Callable[[str], Problem | None], what: str
    ) -> Problem | None:
        """Add the answer's valid items to ``pool``; a Problem while fewer than ``count``."""
        try:
            items = parse_string_list(answer)
        except ParseError as err:
            return Problem(r.INVALID_JSON, str(err))
        first_problem: Problem | None = None
        for item in items:
            if len(pool) >= count:
                break
            problem = check(item)
            if problem is None:
                pool.append(item)
            elif first_problem is None:
                first_problem = problem
        if len(pool) >= count:
            return None
        if len(items) < count or first_problem is None:
            return Problem(r.WRONG_COUNT, f"expected {count} {what}, got {len(items)}; {len(pool)} usable so far")
        return first_problem

    async def _ask(
        self,
        question: Question,
        step: str,
        member: int | None,
        prompt: str,
        accept: Callable[[str], Problem | None],
        shape: tuple[int, int],
    ) -> Failure | None:
        """Ask until ``accept`` finds no problem; the failure to record otherwise. ``shape``: the
        answer's item count and the length of the text it rewrites (its JSON schema's bounds)."""
        o = self.config.openai
        fmt = response_format(step, *shape) if o.structured else None
        temperature = getattr(o.temperature, step)
        seed = derive_seed(self.config.seed, question.id, step, member)
        messages = [{"role": "user", "content": prompt}]
        problem: Problem | None = None
        answer = ""
        for _attempt in range(1, o.max_attempts + 1):
            body = build_request(o.model, messages, temperature, seed, o.max_tokens, fmt)
            try:
                answer = await self.client.complete(body)
            except TransportFailure as err:
                return Failure(step, member, err.reason, err.detail, err.attempts)
            problem = accept(answer)
            if problem is None:
                return None
            feedback = self.templates["retry_feedback"].render(problem=problem.detail)
            messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": feedback}]
        assert problem is not None
        quoted = answer if len(answer) <= 300 else answer[:299] + "…"
        return Failure(step, member, problem.reason, f"{problem.detail}; last answer: {quoted!r}", o.max_attempts)
