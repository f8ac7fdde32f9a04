"""Templated maths questions with known answers: the built-in benchmark for demos and tests.

Twenty-four templates in four families (arithmetic word problems, geometry, probability,
algebra with LaTeX) cover what the offline generator must handle: units, money, decimals,
negative numbers, percentages, plain and LaTeX fractions, number words and exponents.
:func:`sample_questions` draws from them deterministically.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from .records import Question

Draw = Callable[[random.Random], tuple[str, str]]
NAMES = ("Janet", "Omar", "Priya", "Lucas", "Mei", "Tomás", "Aisha", "Noah", "Sofia", "Kwame")
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


@dataclass(frozen=True)
class Template:
    name: str
    family: str
    draw: Draw


def _fmt(x: Fraction | float) -> str:
    value = Fraction(x).limit_denominator(10**6)
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.4g}"


def _eggs(rng: random.Random) -> tuple[str, str]:
    n, eat, bake, price = rng.randint(12, 30), rng.randint(2, 4), rng.randint(3, 6), rng.randint(2, 5)
    name = rng.choice(NAMES)
    return (
        f"{name}'s ducks lay {n} eggs per day. {name} eats {eat} for breakfast every morning and bakes muffins with {bake}. "
        f"{name} sells the remainder at the farmers' market for ${price} per egg. How much money does {name} make every day?",
        str((n - eat - bake) * price),
    )


def _apples(rng: random.Random) -> tuple[str, str]:
    boxes, per, sold = rng.randint(3, 9), rng.randint(10, 24), rng.randint(5, 20)
    return (
        f"A store has {boxes} boxes with {per} apples in each box. It sells {sold} apples in the morning. How many apples are left?",
        str(boxes * per - sold),
    )


def _speed(rng: random.Random) -> tuple[str, str]:
    speed, hours = rng.choice([40, 45, 50, 55, 60, 65]), rng.randint(2, 6)
    return (
        f"A train travels at {speed} km per hour for {hours} hours. What is the distance it covers in kilometres?",
        str(speed * hours),
    )


def _money_decimal(rng: random.Random) -> tuple[str, str]:
    price, qty, paid = rng.choice([1.25, 2.50, 3.75, 4.20]), rng.randint(2, 6), 50
    return (
        f"Omar buys {qty} notebooks that cost ${price:.2f} each and pays with a ${paid} bill. How much change does he receive?",
        f"{paid - price * qty:.2f}",
    )


def _discount(rng: random.Random) -> tuple[str, str]:
    price, pct = rng.choice([80, 120, 150, 240]), rng.choice([10, 15, 20, 25, 30])
    return (
        f"A jacket costs ${price}. During a sale it is discounted by {pct}%. What is the sale price of the jacket?",
        _fmt(Fraction(price * (100 - pct), 100)),
    )


def _temperature(rng: random.Random) -> tuple[str, str]:
    start, drop = rng.randint(-8, -2), rng.randint(3, 12)
    return (
        f"At midnight the temperature was {start} degrees Celsius. By dawn it had dropped another {drop} degrees. What was the temperature at dawn?",
        str(start - drop),
    )


def _ages(rng: random.Random) -> tuple[str, str]:
    a, gap, years = rng.randint(8, 15), rng.randint(3, 9), rng.randint(2, 10)
    return (
        f"Mei is {a} years old and her brother is {gap} years older. How old will her brother be in {years} years?",
        str(a + gap + years),
    )


def _work_words(rng: random.Random) -> tuple[str, str]:
    workers, hours = rng.choice(list(WORDS)), rng.randint(3, 8)
    rate = rng.randint(4, 12)
    return (
        f"{WORDS[workers].capitalize()} workers each pack {rate} boxes per hour. If they work for {hours} hours, how many boxes do they pack in total?",
        str(workers * rate * hours),
    )


def _saving(rng: random.Random) -> tuple[str, str]:
    goal, weekly, have = rng.choice([300, 450, 600, 1200]), rng.choice([15, 20, 25, 30]), rng.randint(20, 90)
    weeks = -(-(goal - have) // weekly)
    return (
        f"Lucas wants to buy a bike that costs ${goal:,}. He has ${have} and saves ${weekly} each week. How many weeks must he save to afford the bike?",
        str(weeks),
    )


def _recipe_fraction(rng: random.Random) -> tuple[str, str]:
    num, den, batches = rng.choice([(1, 2), (2, 3), (3, 4), (1, 3)]) + (rng.randint(2, 6),)
    return (
        f"A recipe uses {num}/{den} cup of sugar per batch. How many cups of sugar are needed for {batches} batches?",
        _fmt(Fraction(num, den) * batches),
    )


def _rectangle(rng: random.Random) -> tuple[str, str]:
    w, h = rng.randint(3, 20), rng.randint(3, 20)
    return (
        f"A rectangle has a length of {w} cm and a width of {h} cm. What is the area of the rectangle in square centimetres?",
        str(w * h),
    )


def _circle(rng: random.Random) -> tuple[str, str]:
    radius = rng.randint(2, 15)
    return (
        f"A circle has a radius of {radius} meters. What is its circumference? Express your answer in terms of $\\pi$.",
        f"{2 * radius}\\pi",
    )


def _triangle(rng: random.Random) -> tuple[str, str]:
    a, b = rng.choice([(3, 4), (5, 12), (6, 8), (8, 15), (9, 12)])
    return f"A right triangle has legs of length {a} and {b}. What is the length of its hypotenuse?", _fmt(
        Fraction(round((a * a + b * b) ** 0.5))
    )


def _box_volume(rng: random.Random) -> tuple[str, str]:
    a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(2, 9)
    return (
        f"A box is {a} cm long, {b} cm wide and {c} cm tall. What is the volume of the box in cubic centimetres?",
        str(a * b * c),
    )


def _perimeter_square(rng: random.Random) -> tuple[str, str]:
    side = rng.choice([2.5, 3.5, 4.5, 6.5, 7.5])
    return f"Find the perimeter of a square garden whose side is {side} metres long.", _fmt(Fraction(side) * 4)


def _marbles(rng: random.Random) -> tuple[str, str]:
    red, blue = rng.randint(3, 9), rng.randint(3, 9)
    return (
        f"A bag contains {red} red marbles and {blue} blue marbles. One marble is drawn at random. What is the probability that it is red?",
        str(Fraction(red, red + blue)),
    )


def _dice(rng: random.Random) -> tuple[str, str]:
    target = rng.randint(4, 10)
    count = sum(1 for a in range(1, 7) for b in range(1, 7) if a + b == target)
    return (
        f"Two fair 6-sided dice are rolled. What is the probability that the sum of the numbers shown is {target}?",
        str(Fraction(count, 36)),
    )


def _coins(rng: random.Random) -> tuple[str, str]:
    n = rng.randint(3, 6)
    return f"A fair coin is tossed {n} times. What is the probability of getting heads every time?", str(
        Fraction(1, 2**n)
    )


def _cards(rng: random.Random) -> tuple[str, str]:
    hearts, total = 13, 52
    draws = rng.randint(2, 3)
    p = Fraction(1)
    for i in range(draws):
        p *= Fraction(hearts - i, total - i)
    return (
        f"From a standard deck of {total} cards, {draws} cards are drawn without replacement. What is the probability that all of them are hearts?",
        str(p),
    )


def _committee(rng: random.Random) -> tuple[str, str]:
    n, k = rng.randint(6, 12), rng.randint(2, 4)
    from math import comb

    return f"In how many ways can a committee of {k} people be chosen from a group of {n} people?", str(comb(n, k))


def _linear(rng: random.Random) -> tuple[str, str]:
    x, a, b = rng.randint(2, 12), rng.randint(2, 9), rng.randint(1, 30)
    return f"Solve for $x$: ${a}x + {b} = {a * x + b}$.", str(x)


def _quadratic(rng: random.Random) -> tuple[str, str]:
    r1, r2 = rng.randint(1, 9), rng.randint(1, 9)
    return f"What is the sum of the roots of $x^2 - {r1 + r2}x + {r1 * r2} = 0$?", str(r1 + r2)


def _latex_fraction(rng: random.Random) -> tuple[str, str]:
    (a, b), (c, d) = rng.choice([(1, 2), (1, 3), (2, 5)]), rng.choice([(1, 4), (3, 8), (2, 7)])
    return f"Compute $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{d}}}$.", str(Fraction(a, b) + Fraction(c, d))


def _system(rng: random.Random) -> tuple[str, str]:
    x, y = rng.randint(1, 9), rng.randint(1, 9)
    return f"If $x + y = {x + y}$ and $x - y = {x - y}$, what is the value of $x$?", str(x)


def _exponent(rng: random.Random) -> tuple[str, str]:
    base, k = rng.choice([2, 3, 5]), rng.randint(2, 5)
    return f"Find the value of $n$ such that ${base}^n = {base**k}$.", str(k)


def _arithmetic_sequence(rng: random.Random) -> tuple[str, str]:
    a1, d, n = rng.randint(2, 9), rng.randint(2, 7), rng.randint(10, 30)
    return (
        f"The first term of an arithmetic sequence is {a1} and the common difference is {d}. What is the {n}th term?",
        str(a1 + (n - 1) * d),
    )


TEMPLATES: tuple[Template, ...] = tuple(
    Template(fn.__name__.lstrip("_"), family, fn)
    for family, fns in (
        (
            "arithmetic",
            (
                _eggs,
                _apples,
                _speed,
                _money_decimal,
                _discount,
                _temperature,
                _ages,
                _work_words,
                _saving,
                _recipe_fraction,
            ),
        ),
        ("geometry", (_rectangle, _circle, _triangle, _box_volume, _perimeter_square)),
        ("probability", (_marbles, _dice, _coins, _cards, _committee)),
        ("algebra", (_linear, _quadratic, _latex_fraction, _system, _exponent, _arithmetic_sequence)),
    )
    for fn in fns
)


def sample_questions(n: int, seed: int = 0, prefix: str = "q") -> list[Question]:
    """``n`` questions cycling through :data:`TEMPLATES`, numbers drawn with ``seed``; ids ``{prefix}{i:04d}``."""
    rng = random.Random(seed)
    out: list[Question] = []
    seen: set[str] = set()
    i = 0
    while len(out) < n:
        template = TEMPLATES[i % len(TEMPLATES)]
        i += 1
        text, answer = template.draw(rng)
        if text in seen and i < 50 * n:
            continue
        seen.add(text)
        out.append(
            Question(
                id=f"{prefix}{len(out):04d}",
                question=text,
                answer=answer,
                source=f"bank/{template.family}/{template.name}",
            )
        )
    return out
