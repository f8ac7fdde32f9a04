"""Synthetic math word problems with known answers, and their disjoint splits.

A template is a question text with placeholders (``{n}`` a name, ``{a}``… numbers) and a list of
solution steps ``(left, op, right, result)`` over those numbers and earlier results. A problem is
a template plus one draw of its numbers; its solution text spells every step (``7 * 6 = 42.``)
and ends with ``The answer is 42.`` Every intermediate result must be a non-negative integer
(divisions exact, products of small factors), so a small model can learn the steps digit by
digit.

Splits never share a (template, numbers) pair: SFT pool, RL members, template-matched
non-members (one per member, same template, other numbers) and a held-out test set.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..scores import CLEAN_SPLIT

NAMES = ("Ava", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea")
PROMPT_TEMPLATE = "Q: {prompt}\nA:"
ANSWER_PATTERN = re.compile(r"(?:The answer is|####)\s*(-?\d+)")  # ours, and GSM8K's final line

Step = tuple[str, str, str, str]  # (left, op, right, result): names of numbers or results


@dataclass(frozen=True)
class Template:
    """A problem template.

    Attributes:
        text: question text with ``{n}`` (a name) and number placeholders.
        steps: the solution, one arithmetic step each; the last step's result is the answer.
        ranges: inclusive range of every number placeholder.
    """

    text: str
    steps: tuple[Step, ...]
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)


def _t(text: str, steps: str, **ranges: tuple[int, int]) -> Template:
    """``steps`` like ``"b*c=x; x+a=ans"``; numbers default to a ∈ [2, 20], others ∈ [2, 9]."""
    parsed = []
    for step in steps.split(";"):
        expr, result = step.strip().split("=")
        op = next(o for o in "+-*/" if o in expr)
        left, right = expr.split(op)
        parsed.append((left.strip(), op, right.strip(), result.strip()))
    names = set(re.findall(r"\{([a-z])\}", text)) - {"n"}
    full = {k: (ranges[k] if k in ranges else (2, 20) if k == "a" else (2, 9)) for k in sorted(names)}
    return Template(text, tuple(parsed), full)


TEMPLATES: tuple[Template, ...] = (
    _t(
        "{n} has {b} boxes with {c} pencils in each box and {a} loose pencils. How many pencils does {n} have?",
        "b*c=x; x+a=ans",
    ),
    _t(
        "{n} has {b} boxes with {c} pencils in each box and gives away {a} pencils. How many pencils are left?",
        "b*c=x; x-a=ans",
    ),
    _t(
        "A shelf has {b} rows of {c} books. Then {a} more books are added. How many books are on the shelf?",
        "b*c=x; x+a=ans",
    ),
    _t("A baker makes {b} trays of {c} muffins and sells {a} of them. How many muffins remain?", "b*c=x; x-a=ans"),
    _t(
        "{n} reads {b} pages a day for {c} days and then {a} more pages. How many pages did {n} read?", "b*c=x; x+a=ans"
    ),
    _t(
        "A farm has {b} pens with {c} sheep each. The farmer sells {a} sheep. How many sheep are left?",
        "b*c=x; x-a=ans",
    ),
    _t("{n} buys {b} packs of {c} stickers and finds {a} more. How many stickers does {n} have?", "b*c=x; x+a=ans"),
    _t("A bus makes {b} trips with {c} people on each trip. How many people ride the bus?", "b*c=ans"),
    _t(
        "A garden has {b} rows of {c} tulips and {d} rows of {e} roses. How many flowers are in the garden?",
        "b*c=x; d*e=y; x+y=ans",
    ),
    _t("{n} walks {b} km each day for {c} days. How many km does {n} walk?", "b*c=ans"),
    _t(
        "A train has {b} cars with {c} seats in each car. {a} seats are empty. How many seats are taken?",
        "b*c=x; x-a=ans",
    ),
    _t("{n} has {a} coins and earns {b} coins a day for {c} days. How many coins does {n} have?", "b*c=x; a+x=ans"),
    _t("A box holds {b} bags of {c} marbles. {n} adds {a} marbles. How many marbles are in the box?", "b*c=x; x+a=ans"),
    _t(
        "{n} saves {b} dollars a week for {c} weeks and spends {a} dollars. How many dollars are left?",
        "b*c=x; x-a=ans",
    ),
    _t("A class has {b} tables with {c} students at each table. How many students are in the class?", "b*c=ans"),
    _t(
        "{n} plants {b} trees in each of {c} rows and {d} trees by the gate. How many trees did {n} plant?",
        "b*c=x; x+d=ans",
    ),
    _t(
        "A store has {a} apples and gets {b} crates of {c} apples. How many apples does the store have?",
        "b*c=x; a+x=ans",
    ),
    _t("{n} has {a} cookies and eats {b} of them. How many cookies are left?", "a-b=ans", a=(10, 40)),
    _t(
        "A tank holds {a} liters. {n} pours in {b} liters and then {c} liters. How many liters are in the tank?",
        "a+b=x; x+c=ans",
    ),
    _t("{n} has {a} cards, wins {b} cards and loses {c} cards. How many cards does {n} have?", "a+b=x; x-c=ans"),
    _t(
        "A rope is {a} meters long. {n} cuts off {b} meters and then {c} meters. How long is the rope now?",
        "a-b=x; x-c=ans",
        a=(20, 60),
    ),
    _t(
        "{n} shares {a} candies equally among {b} friends. How many candies does each friend get?", "a/b=ans", a=(4, 81)
    ),
    _t(
        "A pack of {b} pens costs {c} dollars each. {n} pays with {a} dollars. How much change does {n} get?",
        "b*c=x; a-x=ans",
        a=(20, 99),
    ),
    _t("{n} runs {b} laps of {c} km and then walks {d} km. How many km did {n} cover?", "b*c=x; x+d=ans"),
    _t(
        "A library lends {b} books a day for {c} days and gets {a} books back. How many books are still out?",
        "b*c=x; x-a=ans",
    ),
    _t(
        "{n} has {b} bags with {c} apples each and {d} bags with {e} pears each. How many fruits does {n} have?",
        "b*c=x; d*e=y; x+y=ans",
    ),
    _t("A hall has {b} rows of {c} chairs. {d} chairs break. How many chairs can be used?", "b*c=x; x-d=ans"),
    _t("{n} packs {a} eggs into boxes of {b}. How many boxes does {n} fill?", "a/b=ans", a=(4, 81)),
    _t(
        "A school orders {b} boxes of {c} crayons and gives {d} boxes away. How many crayons are left?",
        "b-d=x; x*c=ans",
    ),
    _t(
        "{n} bakes {b} pies and cuts each into {c} slices. {a} slices are eaten. How many slices remain?",
        "b*c=x; x-a=ans",
    ),
    _t(
        "A parking lot has {b} levels with {c} cars on each and {a} cars outside. How many cars are there?",
        "b*c=x; x+a=ans",
    ),
    _t(
        "{n} earns {b} dollars an hour for {c} hours and gets a tip of {a} dollars. How much did {n} earn?",
        "b*c=x; x+a=ans",
    ),
    _t(
        "A zoo has {a} birds. {b} fly away and {c} new birds arrive. How many birds are in the zoo?",
        "a-b=x; x+c=ans",
        a=(10, 40),
    ),
    _t("{n} has {a} stamps and buys {b} sheets of {c} stamps. How many stamps does {n} have?", "b*c=x; a+x=ans"),
    _t(
        "A truck carries {b} crates of {c} melons. {a} melons are sold and {d} melons spoil. How many melons are left?",
        "b*c=x; x-a=y; y-d=ans",
    ),
    _t(
        "{n} swims {b} lengths a day for {c} days and {d} lengths on the last day. How many lengths did {n} swim?",
        "b*c=x; x+d=ans",
    ),
    _t("A choir has {b} rows of {c} singers and {d} soloists. How many people sing?", "b*c=x; x+d=ans"),
    _t(
        "{n} splits {a} stickers equally into {b} albums and then adds {c} to one album. How many stickers are in that album?",
        "a/b=x; x+c=ans",
        a=(4, 81),
    ),
    _t("A boat takes {b} groups of {c} tourists and {d} guides. How many people are on the boat?", "b*c=x; x+d=ans"),
    _t(
        "{n} had {a} balloons, gave {b} to a friend and popped {c}. How many balloons does {n} have?",
        "a-b=x; x-c=ans",
        a=(20, 40),
    ),
)


@dataclass(frozen=True)
class Problem:
    """One drawn problem: its template index, numbers, question, solution and answer."""

    template: int
    numbers: tuple[tuple[str, int], ...]
    question: str
    solution: str
    answer: int

    @property
    def key(self) -> tuple[int, tuple[tuple[str, int], ...]]:
        """What makes two problems the same: the template and the numbers (not the name)."""
        return (self.template, self.numbers)

    def prompt(self) -> str:
        return PROMPT_TEMPLATE.format(prompt=self.question)

    def text(self) -> str:
        """The training text: prompt then solution."""
        return f"{self.prompt()} {self.solution}"


def solve(template: Template, numbers: dict[str, int]) -> tuple[str, int] | None:
    """The solution text and answer, or None when a step leaves the small non-negative integers."""
    values = dict(numbers)
    parts = []
    for left, op, right, result in template.steps:
        x, y = values[left], values[right]
        if op == "*" and (x > 12 or y > 12):
            return None
        if op == "/" and (y == 0 or x % y):
            return None
        z = {"+": x + y, "-": x - y, "*": x * y, "/": x // y if y else 0}[op]
        if z < 0 or z > 199:
            return None
        values[result] = z
        parts.append(f"{x} {op} {y} = {z}.")
    answer = values[template.steps[-1][3]]
    return " ".join(parts) + f" The answer is {answer}.", answer


def draw_problem(index: int, rng: random.Random) -> Problem | None:
    """A random draw of template ``index`` (None when its numbers break a step's rules)."""
    template = TEMPLATES[index]
    numbers = {k: rng.randint(lo, hi) for k, (lo, hi) in template.ranges.items()}
    solved = solve(template, numbers)
    if solved is None:
        return None
    key = tuple(sorted(numbers.items()))
    # the name depends only on (template, numbers): the same pair always reads the same
    name = NAMES[hash_key(index, key) % len(NAMES)]
    question = template.text.format(n=name, **numbers)
    return Problem(index, key, question, solved[0], solved[1])


def hash_key(template: int, numbers: Iterable[tuple[str, int]]) -> int:
    """A stable (process-independent) integer of a (template, numbers) pair."""
    import hashlib

    text = f"{template}:" + ",".join(f"{k}={v}" for k, v in numbers)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def parse_answer(text: str) -> int | None:
    """The final integer of a generated solution (the first ``The answer is N`` or ``#### N``), or None."""
    match = ANSWER_PATTERN.search(text)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Splits:
    """The four disjoint splits; ``non_members[i]`` shares ``members[i]``'s template."""

    sft: list[Problem]
    members: list[Problem]
    non_members: list[Problem]
    test: list[Problem]

    def all_keys(self) -> dict[str, set]:
        return {name: {p.key for p in getattr(self, name)} for name in ("sft", "members", "non_members", "test")}


Draw = Callable[[int, random.Random], "Problem | None"]


def make_splits(
    n_sft: int,
    n_members: int,
    n_test: int,
    seed: int,
    max_draws: int = 2000,
    draw: Draw | None = None,
    templates: Sequence[int] | None = None,
) -> Splits:
    """Draw distinct problems and deal them into the splits.

    ``draw(template, rng)`` makes one problem of a template (None: draw again) and ``templates``
    lists the template ids; both default to this module's templates (:func:`draw_problem`).

    Members and test problems are spread over the templates round-robin; each member gets a
    non-member of its own template. The SFT pool is drawn from all templates too, so the
    model learns every template's form, but never with a pair used elsewhere.
    """
    draw = draw or draw_problem
    templates = list(range(len(TEMPLATES)) if templates is None else templates)
    rng = random.Random(seed)
    seen: set = set()

    def fresh(template: int) -> Problem | None:
        for _ in range(max_draws):
            problem = draw(template, rng)
            if problem is not None and problem.key not in seen:
                seen.add(problem.key)
                return problem
        return None

    def required(template: int) -> Problem:
        problem = fresh(template)
        if problem is None:
            raise ValueError(f"template {template} ran out of distinct problems; lower the split sizes")
        return problem

    order = list(templates)
    rng.shuffle(order)
    members, non_members, test = [], [], []
    for i in range(n_members):
        t = order[i % len(order)]
        members.append(required(t))
        non_members.append(required(t))
    for i in range(n_test):
        test.append(required(order[i % len(order)]))
    sft: list[Problem] = []
    open_templates = list(templates)
    while len(sft) < n_sft:
        if not open_templates:
            raise ValueError(f"only {len(sft)} distinct SFT problems exist besides the other splits; lower n_sft")
        t = rng.choice(open_templates)
        problem = fresh(t)
        if problem is None:  # a template with few number combinations is used up
            open_templates.remove(t)
        else:
            sft.append(problem)
    return Splits(sft, members, non_members, test)


def question_rows(
    splits: Splits,
    source: str,
    id_of: Callable[[Problem], str],
    question_of: Callable[[Problem], str],
    extra_of: Callable[[Problem], dict[str, Any]],
) -> list[dict[str, Any]]:
    """A testbed's questions file: members (label 1), non-members (label 0), clean_ref (no label),
    one row a problem with its id, question text and ``extra`` from the callables."""
    labelled = (("member", 1, splits.members), ("non_member", 0, splits.non_members), (CLEAN_SPLIT, None, splits.test))
    return [
        {
            "id": id_of(p),
            "question": question_of(p),
            "label": label,
            "answer": p.answer,
            "source": source,
            "split": split,
            "extra": extra_of(p),
        }
        for split, label, problems in labelled
        for p in problems
    ]
