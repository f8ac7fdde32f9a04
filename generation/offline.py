"""The built-in offline generator: deterministic perturbation sets without any model.

* **Similar questions**: every quantity of q0 (see :mod:`generation.numbers`) is re-drawn with
  the same kind and a comparable magnitude (integers stay integers, round numbers round,
  decimals keep their places, proper fractions stay proper, percentages stay under 100, signs
  and units stay). A quantity that appears several times gets the same new value each time,
  and the original's arithmetic relations are kept where a draw allows it (order, divisibility,
  sums and products against a third quantity, digit counts: :mod:`generation.relations`), so a
  similar question's answer stays as whole and non-negative as the original's.
* **Key information and blanking**: the quantity at ``offline.blank_slot`` (default the first,
  in order of appearance) is replaced by ``[BLANK]`` in every member; similar questions keep the
  slot structure, so the same slot is blanked in all of them. The rule is fixed in advance and
  never looks at the audited model. ``blanks: k`` blanks k consecutive quantities.
* **Paraphrases**: rule-based rewrites (:mod:`generation.rewrite`) that never touch markers,
  numbers or LaTeX.

The draws for a question depend only on the seed and the question's id and text, so a set
does not depend on which other questions are in the job or in what order they run.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any, Callable

from . import records as r
from .config import GenerationConfig
from .numbers import Slot, find_slots, in_math, rendered_value, replace_spans, signed_span, vary, vary_share
from .records import Failure, PerturbationSet, Question
from .relations import kept, relations
from .rewrite import paraphrase_candidates
from .source_digest import code_digest
from .validate import check_blanked, check_paraphrase, check_similar, removed_spans

ALGORITHM_VERSION = "offline-v3"  # v3: each similar its own draws and relaxations (prefix-stable); v2: joint draws, then quantities in order keeping their relations with the earlier ones; shares; years by context

_TIME_UNITS = {
    "second",
    "seconds",
    "minute",
    "minutes",
    "hour",
    "hours",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
}
_DISTANCE_UNITS = {
    "km",
    "kilometers",
    "kilometres",
    "miles",
    "mile",
    "meters",
    "metres",
    "m",
    "cm",
    "feet",
    "foot",
    "inches",
    "yards",
}
_TEMPERATURE_UNITS = {"degrees", "degree", "celsius", "fahrenheit", "kelvin"}
_NOT_NOUNS = {
    "of",
    "and",
    "or",
    "more",
    "less",
    "fewer",
    "times",
    "is",
    "are",
    "was",
    "were",
    "to",
    "in",
    "on",
    "at",
    "for",
    "each",
    "per",
    "than",
    "the",
    "a",
    "an",
    "by",
    "with",
    "from",
    "as",
    "if",
    "then",
    "so",
    "it",
    "that",
    "has",
    "have",
    "had",
    "every",
    "cost",
    "costs",
    "will",
    "would",
    "can",
    "do",
    "does",
    "did",
    "be",
    "been",
    "being",
}


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
        self._fill_similars(record, slots, question_rng(c.seed, question, "similars"))
        if c.controls:
            self._fill_controls(record, slots, question_rng(c.seed, question, "controls"))
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

    def _fill_similars(self, record: PerturbationSet, slots: list[Slot], rng: random.Random) -> None:
        accepted, tries = self._draw_similars(record.question.question, slots, rng, self.config.similars, [])
        record.similars[: len(accepted)] = accepted
        if len(accepted) < self.config.similars:
            detail = f"only {len(accepted)} distinct similar questions in {tries} draws (too few quantities or too little room to vary them)"
            for i in range(len(accepted) + 1, self.config.similars + 1):
                record.failures.append(Failure("similars", i, r.NOT_ENOUGH_DISTINCT, detail, tries))

    def _fill_controls(self, record: PerturbationSet, slots: list[Slot], rng: random.Random) -> None:
        """Further similars, drawn alike but from their own stream (the K similars stay as they
        were) and distinct from them: matched controls only."""
        n = self.config.controls
        taken = [s for s in record.similars if s is not None]
        accepted, tries = self._draw_similars(record.question.question, slots, rng, n, taken)
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
        self, q0: str, slots: list[Slot], rng: random.Random, count: int, taken: list[str]
    ) -> tuple[list[str], int]:
        """Up to ``count`` distinct similars of ``q0``, also distinct from ``taken``; and the draws made.

        Each similar has its own ``max_tries`` draws and its own schedule of relaxations, one
        after the other from one stream, so the first n of a draw of N > n are the draw of n:
        asking for more only adds (a similar not found in its draws is left out; the next one
        has draws of its own)."""
        accepted: list[str] = []
        per_similar = self.config.offline.max_tries
        keeps_arithmetic, misses, tries = self.config.offline.relations == "arithmetic", 0, 0
        for _ in range(count):
            for attempt in range(per_similar):
                tries += 1
                # all relations are kept while distinct similars that keep them can be found; after a few
                # misses or half its draws, order, divisibility and shares alone; a question with little
                # room (2, 2 and 6) falls back to order alone for the last quarter of its draws
                full = attempt < per_similar // 2 and misses < 3
                arithmetic = keeps_arithmetic and attempt < 3 * per_similar // 4
                values, held = draw_values(slots, rng, arithmetic=arithmetic, full=full)
                misses += arithmetic and full and not held
                candidate = replace_spans(q0, [(s.start, s.end, new) for s, new in zip(slots, values)])
                if check_similar(q0, candidate, taken + accepted, self.config.min_changed) is None:
                    accepted.append(candidate)
                    break
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


def draw_values(
    slots: list[Slot],
    rng: random.Random,
    arithmetic: bool = True,
    tries: int = 80,
    per_quantity: int = 40,
    full: bool = True,
    joint: int = 100,
) -> tuple[list[str], bool]:
    """New renderings for ``slots``: equal quantities stay equal, and the original's relations
    (:mod:`generation.relations`: order, and with ``arithmetic`` divisibility, sum and product
    signs, shares and digit counts) are kept when a draw allows; failing that (or at once when
    not ``full``), order, divisibility and shares alone; failing that, order alone; failing that,
    an unconstrained draw. Also returns whether the first level tried held.

    At each level, up to ``joint`` joint draws come first: an accepted one is uniform over the
    values that keep every relation, as the originals' own numbers are. Where none is accepted —
    a question with many quantities (GSM8K's have five to eight) almost never keeps them all in
    one joint draw, and fell back to order alone, which is where negative and fractional answers
    came from — quantities are drawn one at a time in order of appearance, each redrawn (up to
    ``per_quantity`` times) until it keeps every relation with the quantities already drawn; a
    round in which some quantity finds no such value starts again (up to ``tries`` rounds). The
    order-wise draw is not uniform over that set (early quantities range freely, late ones are
    squeezed), and on the testbed, where joint draws succeed, it made the clean SFT checkpoint's
    absolute mode reject 18 % of subsets instead of 5 %: so it is the fallback, not the rule."""
    distinct: dict[tuple, Slot] = {}
    for slot in slots:
        distinct.setdefault(slot.key, slot)
    keys = list(distinct)
    old = [_number(distinct[k].value) for k in keys]
    percent = [distinct[k].percent for k in keys]
    quantities = [distinct[k] for k in keys]
    everything = _reachable(relations(old, arithmetic, percent), quantities)
    levels = (
        [everything]
        if not arithmetic
        else [everything, {rel for rel in everything if rel[0] in _BASIC}, relations(old, False)]
    )
    levels = levels[0 if full or not arithmetic else 1 :]
    for level, wanted in enumerate(levels):
        drawn = _draw_level(quantities, wanted, rng, arithmetic, joint, tries, per_quantity)
        if drawn is not None:
            return _per_slot(slots, keys, drawn), level == 0
    return _per_slot(slots, keys, [vary(q, rng, keep_digits=arithmetic) for q in quantities]), False


def _draw_level(
    quantities: list[Slot],
    wanted: set,
    rng: random.Random,
    keep_digits: bool,
    joint: int,
    tries: int,
    per_quantity: int,
) -> list[str] | None:
    """One rendering per quantity keeping every relation in ``wanted``: up to ``joint`` joint
    draws, then up to ``tries`` order-wise rounds (:func:`_draw_in_order`); None when all fail."""
    denominators = _denominators(wanted, len(quantities))
    percent = [q.percent for q in quantities]
    for _ in range(joint):  # an accepted joint draw is uniform over the values that keep every relation
        drawn = [_redraw(q, rng, keep_digits, d) for q, d in zip(quantities, denominators)]
        if kept(wanted, [_number(rendered_value(q, t)) for q, t in zip(quantities, drawn)], percent):
            return drawn
    by_last = _by_last_index(wanted, len(quantities))
    for _ in range(tries):
        drawn = _draw_in_order(quantities, by_last, denominators, rng, keep_digits, per_quantity)
        if drawn is not None:
            return drawn
    return None


def _per_slot(slots: list[Slot], keys: list[tuple], drawn: list[str]) -> list[str]:
    """``drawn`` (one rendering per distinct quantity, in ``keys``' order) spread over ``slots``."""
    new = dict(zip(keys, drawn))
    return [new[slot.key] for slot in slots]


_BASIC = ("lt", "div", "den", "below1")  # the relations kept when all of them cannot be


def _reachable(wanted: set, quantities: list[Slot], draws: int = 60) -> set:
    """``wanted`` less the relations of one quantity alone that none of its redraws can keep (a
    "0.5 as many" must change, and no other half lies below one): each such relation is tried on
    ``draws`` redraws from a generator seeded by the quantity's text, so the answer is the same
    in every run."""
    out = set(wanted)
    percent = [q.percent for q in quantities]
    for relation in sorted(rel for rel in wanted if not rel[2]):  # "den" before "below1"
        index, slot = relation[1], quantities[relation[1]]
        rng = random.Random(f"{slot.text}|{relation}")
        denominator = _denominators(out, len(quantities))[index]
        redraws = (_number(rendered_value(slot, _redraw(slot, rng, True, denominator))) for _ in range(draws))
        if not any(kept([relation], [0] * index + [value], percent) for value in redraws):
            out.discard(relation)
    return out


def _denominators(wanted: set, n: int) -> list[int | None]:
    """Per quantity, the denominator its share must keep (its ``den`` relation in ``wanted``), or None."""
    out: list[int | None] = [None] * n
    for kind, i, _, d in wanted:
        if kind == "den":
            out[i] = d
    return out


def _redraw(slot: Slot, rng: random.Random, keep_digits: bool, denominator: int | None) -> str:
    """A new rendering of ``slot``: on the lattice of its share's ``denominator`` where it has one
    (:func:`generation.numbers.vary_share`), else by :func:`generation.numbers.vary`."""
    on_lattice = vary_share(slot, denominator, rng) if denominator else None
    return on_lattice if on_lattice is not None else vary(slot, rng, keep_digits=keep_digits)


def _by_last_index(wanted: set, n: int) -> list[list]:
    """``wanted`` grouped by the last quantity each relation involves (checked once it is drawn),
    in a fixed order (a set's order would make the draws depend on the process's hash seed)."""
    groups: list[list] = [[] for _ in range(n)]
    for relation in sorted(wanted):
        _, i, others, _ = relation
        groups[max((i, *others))].append(relation)
    return groups


def _draw_in_order(
    quantities: list[Slot],
    by_last: list[list],
    denominators: list[int | None],
    rng: random.Random,
    keep_digits: bool,
    per_quantity: int,
) -> list[str] | None:
    """One value per quantity keeping every relation with the earlier ones, or None."""
    texts: list[str] = []
    values: list[Any] = []
    percent = [q.percent for q in quantities]
    for index, slot in enumerate(quantities):
        for _ in range(per_quantity):
            text = _redraw(slot, rng, keep_digits, denominators[index])
            value = _number(rendered_value(slot, text))
            if kept(by_last[index], values + [value], percent):
                texts.append(text)
                values.append(value)
                break
        else:
            return None
    return texts


def _number(value: Any) -> Any:
    """A whole Fraction as an int (much faster arithmetic in the relation checks)."""
    return int(value) if value.denominator == 1 else value


def describe_slots(text: str, slots: list[Slot], first_index: int) -> str:
    """A few words naming the blanked quantity's type, from its surroundings (not its value)."""
    slot = slots[0]
    before = text[max(0, slot.start - 2) : slot.start]
    phrase = _phrase_after(text, slot.end)
    words = {w.lower() for w in phrase}
    if any(symbol in before for symbol in "$£€") and not in_math(text, slot.start):
        kind = "the amount of money"
    elif slot.percent:
        kind = "the percentage"
    elif slot.kind in ("fraction", "latex_fraction"):
        kind = "the fraction"
    elif in_math(text, slot.start):
        kind = f"the {_ordinal(first_index + 1)} constant in the expression"
    elif "old" in words:
        kind = "the age"
    elif words & _TEMPERATURE_UNITS:
        kind = "the temperature"
    elif words & _TIME_UNITS:
        kind = "the time duration"
    elif words & _DISTANCE_UNITS:
        kind = "the distance measurement"
    elif phrase:
        kind = f"the number of {phrase[-1].lower()}"
    else:
        kind = f"the {_ordinal(first_index + 1)} quantity given"
    return kind if len(slots) == 1 else f"{kind} and the next {len(slots) - 1} quantities"


def _phrase_after(text: str, end: int) -> list[str]:
    """The words of the phrase right after a quantity, up to a function word or punctuation
    ("16 eggs per day" -> [eggs]; "two fair 6-sided dice are" -> [fair, dice])."""
    phrase: list[str] = []
    for token in text[end : end + 60].split()[:4]:
        word = token.strip(".,;:?!)(")
        if re.fullmatch(r"\d+-[A-Za-z-]+", word):  # "6-sided": a modifier, read on
            continue
        if word.lower() in _NOT_NOUNS or not re.fullmatch(r"[A-Za-z][A-Za-z-]*", word):
            break
        phrase.append(word)
        if word != token:  # punctuation ends the phrase
            break
    return phrase


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}.get(n, f"{n}th")
