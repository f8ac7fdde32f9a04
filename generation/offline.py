"""The built-in offline generator: deterministic perturbation sets without any model.

* **Similar questions**: every quantity of q0 (see :mod:`generation.numbers`) is re-drawn with
  the same kind and a comparable magnitude (integers stay integers, round numbers round,
  decimals keep their places, proper fractions stay proper, percentages stay under 100, signs
  and units stay). A quantity that appears several times gets the same new value each time,
  and the original's arithmetic relations are kept where a draw allows it (order, divisibility,
  sums and products against a third quantity, digit counts: :mod:`generation.relations`), so a
  similar question's answer stays as whole and non-negative as the original's
  (:mod:`generation.value_draws`).
* **Key information and blanking**: the quantity at ``offline.blank_slot`` (default the first,
  in order of appearance) is replaced by ``[BLANK]`` in every member; similar questions keep the
  slot structure, so the same slot is blanked in all of them. The rule is fixed in advance and
  never looks at the audited model. ``blanks: k`` blanks k consecutive quantities. The key
  information names the blanked quantity's type (:mod:`generation.slot_names`).
* **Paraphrases**: rule-based rewrites (:mod:`generation.rewrite`) that never touch markers,
  numbers or LaTeX.

The draws for a question depend only on the seed and the question's id and text, so a set
does not depend on which other questions are in the job or in what order they run.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Callable

from . import records as r
from .answers import read_solution
from .config import GenerationConfig
from .numbers import Slot, find_slots, replace_spans, signed_span
from .records import Failure, PerturbationSet, Question
from .rewrite import paraphrase_candidates
from .slot_names import describe_slots
from .solution_program import WorkedSolution
from .source_digest import code_digest
from .validate import check_blanked, check_paraphrase, check_similar, removed_spans
from .value_draws import DrawPlan, draw_values

ALGORITHM_VERSION = "offline-v6"  # v6: a control keeps the quantities its answer rests on, and varies fewer where none gives an answer; v5: a new value as often below the old as above (generation/magnitudes.py); v4: values whose worked solution re-runs first, a level that found nothing skipped, protected numbers; v3: each similar its own draws and relaxations (prefix-stable); v2: joint draws, then quantities in order keeping their relations with the earlier ones; shares; years by context


def question_rng(seed: int, question: Question, purpose: str) -> random.Random:
    """A generator seeded by (seed, id, text, purpose) only."""
    digest = hashlib.sha256(f"{seed}\x1f{question.id}\x1f{question.question}\x1f{purpose}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class OfflineGenerator:
    """Deterministic perturbation sets (see the module docstring)."""

    name = "offline"

    def __init__(self, config: GenerationConfig, toolkit_version: str) -> None:
        self.config = config
        self.toolkit_version = toolkit_version

    def provenance(self) -> dict[str, Any]:
        c = self.config
        return {
            "backend": "offline",
            "algorithm": ALGORITHM_VERSION,
            "code": code_digest(),
            "seed": c.seed,
            "similars": c.similars,
            "paraphrases": c.paraphrases,
            "blanks": c.blanks,
            "min_changed": c.min_changed,
            "blank_slot": c.offline.blank_slot,
            "max_tries": c.offline.max_tries,
            "relations": c.offline.relations,
            "toolkit_version": self.toolkit_version,
            **({"controls": c.controls} if c.controls else {}),
        }

    stats = None  # no endpoint, nothing to count

    def run(self, questions: list[Question], finish: Callable[[PerturbationSet], None]) -> None:
        """Generate each question's set in turn, handing each to ``finish``."""
        for question in questions:
            finish(self.generate(question))

    def close(self) -> None:
        pass

    def generate(self, question: Question) -> PerturbationSet:
        c = self.config
        record = r.empty_set(question, c.similars, c.paraphrases, self.provenance(), c.controls)
        q0 = question.question
        slots = find_slots(q0)
        if not slots:
            reason = "the question states no quantity to vary or blank (no numbers, fractions or number words)"
            record.failures += [
                Failure(step, None, r.NO_NUMBERS, reason)
                for step in r.STEPS + ((r.CONTROLS_STEP,) if c.controls else ())
            ]
            return record
        self._fill_draws(record, question, slots)
        self._fill_blanks(record, slots)
        for i, blanked in enumerate(record.blanked):
            if blanked is not None:
                member_text = q0 if i == 0 else record.similars[i - 1]
                assert member_text is not None
                self._fill_paraphrases(
                    record, i, member_text, blanked, question_rng(c.seed, question, f"paraphrases/{i}")
                )
        return record

    # -- similars ---------------------------------------------------------------------------

    def _fill_draws(self, record: PerturbationSet, question: Question, slots: list[Slot]) -> None:
        """The similars, then the further controls: a control may keep quantities a similar changes
        (:meth:`_program`), and where its worked solution gives no answer on values that vary them all,
        it varies fewer (:meth:`DrawPlan.narrowings`)."""
        c = self.config
        program = self._program(question)
        shared = program is None or not program.held
        plan = self._plan(slots, program if shared else None)
        self._fill_similars(record, plan, question_rng(c.seed, question, "similars"))
        if c.controls:
            plan = plan if shared else self._plan(slots, program)
            plan.narrowings()
            self._fill_controls(record, plan, question_rng(c.seed, question, "controls"))

    def _plan(self, slots: list[Slot], program: WorkedSolution | None) -> DrawPlan:
        """How the question's values are drawn: its slots, their relations and its worked solution."""
        return DrawPlan.of(slots, self.config.offline.relations == "arithmetic", program)

    def _program(self, question: Question) -> WorkedSolution | None:
        """The question's worked solution as a program, where it can be re-run (:mod:`generation.answers`,
        with ``answers`` on): similars are drawn first among the values that give an answer as whole
        and non-negative as the original's. A program that holds quantities (a number may have been
        worked out from them where no step shows it) serves the further controls alone: a similar
        question changes every quantity, a control drawn for its answer keeps those."""
        solution = question.extra_value("solution")
        if not self.config.answers or solution is None or question.answer is None:
            return None
        worked = read_solution(question.question, solution, question.answer)
        return None if isinstance(worked, str) else worked

    def _fill_similars(self, record: PerturbationSet, plan: DrawPlan, rng: random.Random) -> None:
        accepted, tries = self._draw_similars(record.question.question, plan, rng, self.config.similars, [])
        record.similars[: len(accepted)] = accepted
        if len(accepted) < self.config.similars:
            detail = f"only {len(accepted)} distinct similar questions in {tries} draws (too few quantities or too little room to vary them)"
            for i in range(len(accepted) + 1, self.config.similars + 1):
                record.failures.append(Failure("similars", i, r.NOT_ENOUGH_DISTINCT, detail, tries))

    def _fill_controls(self, record: PerturbationSet, plan: DrawPlan, rng: random.Random) -> None:
        """Further similars, drawn alike but from their own stream (the K similars stay as they
        were) and distinct from them: matched controls only."""
        n = self.config.controls
        taken = [s for s in record.similars if s is not None]
        accepted, tries = self._draw_similars(record.question.question, plan, rng, n, taken)
        record.controls[: len(accepted)] = accepted
        if len(accepted) < n:
            detail = (
                f"only {len(accepted)} further distinct similar questions in {tries} draws (too few quantities or too little "
                "room to vary them)"
            )
            record.failures += [
                Failure(r.CONTROLS_STEP, i, r.NOT_ENOUGH_DISTINCT, detail, tries)
                for i in range(len(accepted) + 1, n + 1)
            ]

    def _draw_similars(
        self, q0: str, plan: DrawPlan, rng: random.Random, count: int, taken: list[str]
    ) -> tuple[list[str], int]:
        """Up to ``count`` distinct similars of ``q0``, also distinct from ``taken``; and the draws made.

        Each similar has its own ``max_tries`` draws and its own schedule of relaxations, one
        after the other from one stream, so the first n of a draw of N > n are the draw of n:
        asking for more only adds (a similar not found in its draws is left out; the next one
        has draws of its own)."""
        accepted: list[str] = []
        per_similar = self.config.offline.max_tries
        keeps_arithmetic, tries = self.config.offline.relations == "arithmetic", 0
        repeats: dict[tuple[str, bool] | None, int] = {}  # duplicates drawn at each level
        for _ in range(count):
            for attempt in range(per_similar):
                tries += 1
                # all relations are kept while distinct similars that keep them can be found (a level that found
                # none is skipped from then on: plan.failed); after half its draws, order, divisibility and shares
                # alone; a question with little room (2, 2 and 6) falls back to order alone for the last quarter
                # and values whose worked solution re-runs are drawn for the first quarter (where few values do, the
                # rest may be the same few: distinct similars without an answer are then drawn)
                full = attempt < per_similar // 2
                arithmetic = keeps_arithmetic and attempt < 3 * per_similar // 4
                values, level = draw_values(
                    plan, rng, arithmetic=arithmetic, full=full, checked=attempt < per_similar // 4
                )
                candidate = replace_spans(q0, [(s.start, s.end, new) for s, new in zip(plan.slots, values)])
                changed = (
                    self.config.min_changed * (1 - plan.held_share()) if level and level[1] else self.config.min_changed
                )
                problem = check_similar(q0, candidate, taken + accepted, changed)
                if problem is None:
                    accepted.append(candidate)
                    break
                repeats[level] = repeats.get(level, 0) + (problem.reason == r.DUPLICATE)
                if level is not None and repeats[level] >= 3:  # its few values are all taken: a weaker level
                    plan.failed.add(level)
        return accepted, tries

    # -- key information and blanking --------------------------------------------------------

    def _fill_blanks(self, record: PerturbationSet, slots: list[Slot]) -> None:
        k = self.config.blanks
        q0 = record.question.question
        first = (
            self.config.offline.blank_slot % len(slots)
            if -len(slots) <= self.config.offline.blank_slot < len(slots)
            else None
        )
        if first is None or first + k > len(slots):
            detail = f"blanking {k} quantity(ies) from slot {self.config.offline.blank_slot} needs more than the {len(slots)} the question states"
            record.failures.append(Failure("key_information", None, r.TOO_FEW_VALUES, detail))
            record.failures.append(Failure("blanked", None, r.TOO_FEW_VALUES, detail))
            record.failures.append(Failure("paraphrases", None, r.UPSTREAM_MISSING, "no blanked variants"))
            return
        record.key_information = describe_slots(q0, slots[first : first + k], first)
        members: list[str | None] = [q0, *record.similars]
        for i, member in enumerate(members):
            if member is None:
                record.failures.append(Failure("blanked", i, r.UPSTREAM_MISSING, f"similar question {i} is missing"))
                record.failures.append(
                    Failure("paraphrases", i, r.UPSTREAM_MISSING, f"similar question {i} is missing")
                )
                continue
            member_slots = find_slots(member)
            if len(member_slots) != len(slots):  # cannot happen for our own similars; guard anyway
                record.failures.append(
                    Failure("blanked", i, r.TOO_FEW_VALUES, "slot structure differs from the original's")
                )
                record.failures.append(Failure("paraphrases", i, r.UPSTREAM_MISSING, "no blanked variant"))
                continue
            targets = member_slots[first : first + k]
            blanked = replace_spans(member, [(*signed_span(member, s), r.BLANK) for s in targets])
            problem = check_blanked(member, blanked, k)
            if problem is not None:
                record.failures.append(Failure("blanked", i, problem.reason, problem.detail))
                record.failures.append(Failure("paraphrases", i, r.UPSTREAM_MISSING, "no blanked variant"))
                continue
            record.blanked[i] = blanked

    # -- paraphrases -------------------------------------------------------------------------

    def _fill_paraphrases(self, record: PerturbationSet, i: int, member: str, blanked: str, rng: random.Random) -> None:
        m = self.config.paraphrases
        removed = removed_spans(member, blanked) or []
        accepted: list[str] = []
        tries = self.config.offline.max_tries * m
        last_problem = None
        for candidate in paraphrase_candidates(blanked, rng, tries):
            problem = check_paraphrase(blanked, candidate, self.config.blanks, accepted, removed)
            if problem is None:
                accepted.append(candidate)
                if len(accepted) == m:
                    break
            else:
                last_problem = problem
        record.paraphrases[i][: len(accepted)] = accepted
        if len(accepted) < m:
            detail = f"only {len(accepted)} of {m} distinct valid paraphrases in {tries} draws"
            if last_problem is not None:
                detail += f" (last rejection: {last_problem.reason})"
            record.failures.append(Failure("paraphrases", i, r.NOT_ENOUGH_DISTINCT, detail, tries))
