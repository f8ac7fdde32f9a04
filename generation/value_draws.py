"""New values for a question's quantities that keep the original's relations (the offline generator's
similar questions): :func:`draw_values` and the levels it falls back through."""

from __future__ import annotations

import random
from typing import Any

from .numbers import Slot, rendered_value, vary, vary_share
from .relations import kept, relations


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
