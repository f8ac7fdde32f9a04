"""New values for a question's quantities that keep the original's relations (the offline generator's
similar questions): a :class:`DrawPlan` worked out once per question, and :func:`draw_values`.

A plan holds the question's distinct quantities, the relations a similar keeps at each level of
strictness (:mod:`generation.relations`: all of them; order, divisibility and shares; order
alone), an optional program that the drawn values must give an answer on (the original's worked
solution: :class:`generation.solution_program.WorkedSolution`), and the levels that already failed for this
question, which later draws skip: a level that found no values once is not searched again for
every further similar (that search was most of the generator's time on real benchmarks).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from .magnitudes import balanced_weights, weighted_order
from .numbers import Slot, int_support, rendered_value, vary, vary_share
from .relations import kept, relations


class Program(Protocol):
    """A worked solution that runs on new values (:class:`generation.solution_program.WorkedSolution`)."""

    def answer_of(self, quantities: Sequence[Any]) -> Any: ...

    def stages(self) -> list[list[int]]: ...

    def extend(self, quantities: Sequence[Any], results: dict[int, Any], steps: Sequence[int]) -> dict | None: ...

    @property
    def held(self) -> frozenset[int]: ...


LEVELS = ("all", "basic", "order")
NARROWED = (20, 300)  # joint draws and search budget with each narrowing (DrawPlan.narrow)
_BASIC = ("lt", "div", "den", "below1")  # the relations kept when all of them cannot be
_STRICT = ("div", "divdiff", "divsum", "den")  # the relations a random value rarely keeps


@dataclass
class DrawPlan:
    """What one question's draws keep (see the module docstring)."""

    slots: list[Slot]
    keys: list[tuple]
    quantities: list[Slot]
    levels: dict[str, set]
    program: Program | None = None
    failed: set[tuple[str, bool]] = field(default_factory=set)  # (level, with the program) found nothing
    searched: set[tuple[str, bool]] = field(default_factory=set)  # no joint draw found these: search at once
    pools: dict[tuple, tuple[list[str], list[float] | None]] = field(default_factory=dict)
    # each quantity's values a search tries, and their weights (None: equally likely)
    narrowing: list[frozenset[int]] = field(default_factory=list)  # more quantities to hold, in turn, once the
    # program gives no answer on values that vary the others (matched controls only: a similar varies them all)
    narrowed: frozenset[int] = frozenset()  # the ones held now

    @property
    def held(self) -> frozenset[int]:
        """The quantities a draw with the program keeps at their original values: those its answer rests
        on, and those held since the program gave no answer while they varied (:meth:`narrow`)."""
        return (self.program.held if self.program is not None else frozenset()) | self.narrowed

    def narrow(self) -> bool:
        """Hold the next set of :attr:`narrowing` (the levels with the program are searched anew); False
        when none is left."""
        if not self.narrowing:
            return False
        self.narrowed = self.narrowing.pop(0)
        self.failed = {f for f in self.failed if not f[1]}
        self.searched = {f for f in self.searched if not f[1]}
        return True

    def narrowings(self) -> None:
        """Fill :attr:`narrowing`: each quantity the program does not hold held alone (the others vary), in
        order, then all of them but one (that one varies alone) — for a question whose similars give no
        answer: a control that varies fewer quantities keeps what made the answer whole."""
        free = [i for i, q in enumerate(self.quantities) if i not in self.held and not q.year]
        alone = [frozenset({i}) for i in free] if len(free) > 2 else []
        self.narrowing = alone + [frozenset(free) - {i} for i in free] if len(free) > 1 else []

    def held_share(self) -> float:
        """The share of the slots whose quantity the program holds."""
        held = {self.keys[i] for i in self.held}
        return sum(slot.key in held for slot in self.slots) / len(self.slots) if self.slots else 0.0

    def holds(self, values: Sequence[Any]) -> bool:
        """Whether the program (if any) gives an answer on ``values``."""
        return self.program is None or self.program.answer_of(values) is not None

    @classmethod
    def of(cls, slots: list[Slot], arithmetic: bool = True, program: Program | None = None) -> "DrawPlan":
        distinct: dict[tuple, Slot] = {}
        for slot in slots:
            distinct.setdefault(slot.key, slot)
        keys = list(distinct)
        quantities = [distinct[k] for k in keys]
        old = [_number(q.value) for q in quantities]
        percent = [q.percent for q in quantities]
        order = relations(old, False)
        if not arithmetic:
            return cls(slots, keys, quantities, {"order": _reachable(order, quantities)}, program)
        everything = _reachable(relations(old, True, percent), quantities)
        levels = {"all": everything, "basic": {rel for rel in everything if rel[0] in _BASIC}, "order": order}
        return cls(slots, keys, quantities, levels, program)


def draw_values(
    plan: DrawPlan,
    rng: random.Random,
    arithmetic: bool = True,
    full: bool = True,
    checked: bool = True,
    joint: int = 100,
    tries: int = 2,
    per_quantity: int = 12,
    budget: int = 1200,
) -> tuple[list[str], tuple[str, bool] | None]:
    """New renderings for ``plan.slots``: equal quantities stay equal, and the strictest level of
    relations (all, or from ``basic`` on when not ``full``, or ``order`` alone when not
    ``arithmetic``) that a draw allows is kept — first with the plan's check (when ``checked``),
    then without;
    failing every level, an unconstrained draw. Also returns the level drawn at (its name, and
    whether with the program), None for the unconstrained draw.

    At each level, up to ``joint`` joint draws come first: an accepted one is uniform over the
    values that keep every relation, as the originals' own numbers are. Where none is accepted —
    a question with many quantities almost never keeps them all in one joint draw — quantities are
    drawn one at a time in order of appearance, each among ``per_quantity`` redraws that keep every
    relation with those already drawn, stepping back to an earlier quantity's next redraw where
    none does (:func:`_search`, ``budget`` values tried, up to ``tries`` times). That draw is not
    uniform over the set (early quantities range freely, late ones are squeezed), and on the
    testbed, where joint draws succeed, it made the clean SFT checkpoint's absolute mode reject
    18 % of subsets instead of 5 %: so it is the fallback, not the rule."""
    names = [n for n in LEVELS if n in plan.levels]
    if arithmetic and not full:
        names = [n for n in names if n != "all"]
    elif not arithmetic:
        names = ["order"]
    for with_program in (True, False) if plan.program is not None and checked else (False,):
        while True:
            for name in names if not (with_program and plan.narrowed) else names[-1:]:
                if (name, with_program) in plan.failed:
                    continue
                effort = (0 if (name, with_program) in plan.searched else joint, tries, per_quantity, budget)
                if with_program and plan.narrowed:  # a fallback: a small search each
                    effort = (min(effort[0], NARROWED[0]), 1, per_quantity, NARROWED[1])
                drawn = _draw_level(plan, name, with_program, rng, arithmetic, effort)
                if drawn is not None:
                    return _per_slot(plan, drawn), (name, with_program)
                plan.failed.add((name, with_program))
            if not (with_program and plan.narrow()):
                break
    return _per_slot(plan, [vary(q, rng, keep_digits=arithmetic) for q in plan.quantities]), None


def _draw_level(
    plan: DrawPlan,
    level: str,
    with_program: bool,
    rng: random.Random,
    keep_digits: bool,
    effort: tuple[int, int, int, int],
) -> list[str] | None:
    """One rendering per quantity keeping every relation of ``level`` (and, ``with_program``, on
    which the plan's program gives an answer): up to ``joint`` joint draws (none once they failed
    for this question: :attr:`DrawPlan.searched`), then up to ``tries``
    order-wise rounds, each quantity drawn among the values that also keep the program's steps so
    far whole and non-negative; None when all fail."""
    joint, tries, per_quantity, budget = effort
    wanted = plan.levels[level]
    quantities = plan.quantities
    denominators = _denominators(wanted, len(quantities))
    percent = [q.percent for q in quantities]
    program = plan.program if with_program else None
    held = plan.held if with_program else frozenset()
    for _ in range(joint):  # an accepted joint draw is uniform over the values that keep every relation
        drawn = [
            q.text if i in held else _redraw(q, rng, keep_digits, d)
            for i, (q, d) in enumerate(zip(quantities, denominators))
        ]
        values = [_number(rendered_value(q, t)) for q, t in zip(quantities, drawn)]
        if kept(wanted, values, percent) and (program is None or plan.holds(values)):
            return drawn
    if joint:
        plan.searched.add((level, with_program))  # the next draw at this level searches at once
    stages = program.stages() if program is not None else None
    for _ in range(tries):
        drawn = _search(plan, wanted, denominators, rng, keep_digits, per_quantity, budget, stages)
        if drawn is not None and (
            program is None or plan.holds([_number(rendered_value(q, t)) for q, t in zip(quantities, drawn)])
        ):
            return drawn
    return None


def _per_slot(plan: DrawPlan, drawn: list[str]) -> list[str]:
    """``drawn`` (one rendering per distinct quantity, in ``plan.keys``' order) spread over the slots."""
    new = dict(zip(plan.keys, drawn))
    return [new[slot.key] for slot in plan.slots]


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


def _by_last_index(wanted: set, n: int, position: dict[int, int]) -> list[tuple[int, tuple]]:
    """(the draw position of the last quantity it involves, relation) for each relation of ``wanted``
    (checked once that quantity is drawn), in a fixed order (a set's order would make the draws
    depend on the process's hash seed), the rarely kept first."""
    ordered = sorted(wanted, key=lambda rel: (rel[0] not in _STRICT, rel))
    return [(max(position[q] for q in (rel[1], *rel[2])), rel) for rel in ordered]


def _search(
    plan: DrawPlan,
    wanted: set,
    denominators: list[int | None],
    rng: random.Random,
    keep_digits: bool,
    options: int,
    budget: int,
    stages: list[list[int]] | None = None,
) -> list[str] | None:
    """One value per quantity keeping every relation in ``wanted`` with the quantities drawn before
    it: each quantity tries its values (:func:`_options`) in random order, and where none fits, the
    previous quantity takes its next one (a depth-first search), up to ``budget`` values drawn and
    tried in all; None when the budget runs out. Quantities are drawn in order of appearance with
    ``stages`` (each value also keeps the program's steps that the quantities so far let run:
    :meth:`Program.extend`), else the most constrained first (those in the most divisibility
    relations: a wrong early choice there is what a search spends its budget undoing)."""
    n = len(plan.quantities)
    order = list(range(n)) if stages is not None else _most_constrained_first(wanted, n)
    position = {q: p for p, q in enumerate(order)}
    groups: list[list] = [[] for _ in range(n)]
    for relation in _by_last_index(wanted, n, position):
        groups[relation[0]].append(relation[1])
    percent = [q.percent for q in plan.quantities]
    texts: list[str | None] = [None] * n
    values: list[Any] = [None] * n
    results: list[dict[int, Any]] = [{}]
    choices: list[list[str]] = []
    while len(choices) <= n:
        depth = len(results) - 1
        if depth == n:
            return texts  # type: ignore[return-value]
        index = order[depth]
        if len(choices) == depth:
            held = plan.held if stages is not None else frozenset()
            tried = _options(plan, index, rng, keep_digits, denominators[index], options, held)
            choices.append(tried[::-1])  # taken by pop(): the first to try last
            budget -= len(choices[-1])
        while choices[depth] and budget > 0:
            text = choices[depth].pop()
            budget -= 1
            values[index] = _number(rendered_value(plan.quantities[index], text))
            if not kept(groups[depth], values, percent):
                continue
            extended: dict[int, Any] | None = results[depth]
            if stages is not None and stages[index]:
                extended = plan.program.extend(values[: index + 1], results[depth], stages[index])  # type: ignore[union-attr]
                if extended is None:
                    continue
            texts[index] = text
            results.append(extended)  # type: ignore[arg-type]
            break
        else:
            if budget <= 0 or depth == 0:
                return None
            choices.pop()  # back to the previous quantity, which takes its next value
            values[index] = None
            results.pop()
    return None


def _most_constrained_first(wanted: set, n: int) -> list[int]:
    """Quantity indices by how many divisibility relations they are in (most first), then in order."""
    count = [0] * n
    for kind, i, others, _ in wanted:
        if kind in _STRICT:
            for q in (i, *others):
                count[q] += 1
    return sorted(range(n), key=lambda q: (-count[q], q))


def _options(
    plan: DrawPlan,
    index: int,
    rng: random.Random,
    keep_digits: bool,
    denominator: int | None,
    count: int,
    held: frozenset[int] = frozenset(),
) -> list[str]:
    """Quantity ``index``'s values to try, the first to try first: up to ``4 * count`` of its values, drawn
    without replacement from every value an integer can take (as often below the old value as above:
    :mod:`generation.magnitudes`), or from a pool of distinct redraws made once for the question
    (:attr:`DrawPlan.pools`: a search visits a quantity many times)."""
    if index in held:  # searched with a program that holds it: it keeps its value
        return [plan.quantities[index].text]
    key = (index, keep_digits, denominator)
    if key not in plan.pools:
        slot = plan.quantities[index]
        support = int_support(slot, keep_digits) if denominator is None else None
        if support is not None:
            plan.pools[key] = (support, balanced_weights([rendered_value(slot, v) for v in support], slot.value))
        else:
            redraws = (_redraw(slot, rng, keep_digits, denominator) for _ in range(4 * count))
            plan.pools[key] = (list(dict.fromkeys(redraws)), None)
    pool, weights = plan.pools[key]
    if weights is None:
        return rng.sample(pool, min(len(pool), 4 * count))
    return weighted_order(pool, weights, 4 * count, rng)


def _number(value: Any) -> Any:
    """A whole Fraction as an int (much faster arithmetic in the relation checks)."""
    return int(value) if value.denominator == 1 else value
