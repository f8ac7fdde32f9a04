"""The offline generator on questions nobody here wrote (issue 24, item 2): GSM-Symbolic's GSM8K
templates (reasoning-gym's generators; ``pip install reasoning-gym``, the ``gsm`` extra).

    python benchmarks/bench_generator_gsm.py [--per-template 3] [--similars 5] [--controls 5] [--seed 0]

For each template, draws questions, asks the offline generator for similar questions, and
recomputes each similar's answer *under the template's own computation*: the numbers of the
original question are matched to the template's input variables (by value, in text order), the
similar's numbers (same positions) replace them, and the template's ``generate_from_variables``
recomputes the answer. A similar is *valid* when that answer is a whole, non-negative number (a
real GSM8K answer). Prints the share of valid similars, and why the others are not — the figure
the generator's "98 % of similars keep whole answers on the testbed's templates" is compared with.
A similar that changed a number the template does not read as one input (a derived number, a
percentage of a fraction) cannot be judged this way and is counted apart.

It also checks the answers :mod:`generation.answers` re-solves from the original's worked solution
(what lets reward gain be scored on a question's controls) against the template's: how many
similars and further controls (drawn, as ``lara run`` draws them, with the worked solution: a
control may keep quantities its answer rests on) get one, and how many of those differ from the template's, each such template shown with
one example to check by hand (two are the template's own: template 75 reads "three times" as fixed
text where the similar changed the word, template 99 rounds money to whole dollars).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def templates() -> dict[int, Callable[..., dict[str, Any]]]:
    """``{template: generate(rng, difficulty)}`` for every template reasoning-gym ships as working
    (the testbed's own loader, :func:`probes.testbed.gsm.generators`)."""
    from lara_core.errors import LaraError
    from probes.testbed.gsm import generators

    try:
        return generators()
    except LaraError as error:
        sys.exit(str(error))


def draw(generate: Callable[..., dict[str, Any]], rng: Random) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """One example, the exact inputs its ``generate_from_variables`` was called with, and that
    function (a closure inside the template's generator, caught as the generator returns)."""
    caught: dict[str, Any] = {}

    def watch(frame: types.FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name == "generate_from_variables" and "inputs" not in caught:
            caught["inputs"] = {n: frame.f_locals[n] for n in code.co_varnames[: code.co_argcount]}
        elif event == "return" and code is generate.__code__:
            caught["function"] = frame.f_locals.get("generate_from_variables")

    sys.setprofile(watch)
    try:
        example = generate(rng, 1.0)
    finally:
        sys.setprofile(None)
    return example, caught.get("inputs", {}), caught.get("function")


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(text)]


def slot_inputs(question: str, inputs: dict[str, Any]) -> list[list[str]]:
    """For each number of the question, in text order, the numeric inputs of the template equal
    to it (none: a number the template derives or shows otherwise, e.g. 0.75 as '25%')."""
    numeric = {n: float(v) for n, v in inputs.items() if not isinstance(v, bool) and isinstance(v, (int, float))}
    return [[name for name, value in numeric.items() if value == number] for number in numbers(question)]


def judge(
    similar: str,
    question: str,
    inputs: dict[str, Any],
    slots: list[list[str]],
    recompute: Callable[..., dict[str, Any]],
) -> tuple[str, float | None]:
    """(``valid`` or why not, the template's answer); ``unjudged: …`` when the template cannot say
    (a changed number it does not read as one input)."""
    new, old = numbers(similar), numbers(question)
    if len(new) != len(old):
        return "unjudged: another count of numbers", None
    values = dict(inputs)
    given: dict[str, float] = {}
    for position, (before, after) in enumerate(zip(old, new)):
        names = slots[position]
        if before == after:
            continue
        if len(names) != 1:
            return "unjudged: a changed number is no single input", None
        if given.setdefault(names[0], after) != after:
            return "one input given two values", None
    for name, value in given.items():
        values[name] = int(value) if value.is_integer() and isinstance(inputs[name], int) else value
    try:
        answer = recompute(**values)["answer_value"]
    except Exception:  # noqa: BLE001 - the template's own computation refuses these numbers
        return "the template's computation fails", None
    answer = float(answer)
    if answer < 0:
        return "negative answer", answer
    if not answer.is_integer():
        return "fractional answer", answer
    return "valid", answer


@dataclass
class Tally:
    """What the offline generator's similars came to, over every drawn question."""

    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    per_template: dict[int, collections.Counter[str]] = field(default_factory=dict)
    originals: collections.Counter[str] = field(default_factory=collections.Counter)
    resolved: collections.Counter[str] = field(default_factory=collections.Counter)  # re-solved against the template's
    differing: dict[int, tuple[str, Any, Any]] = field(default_factory=dict)  # per template, one differing similar
    unsolved: collections.Counter[str] = field(default_factory=collections.Counter)  # why a worked solution is unusable
    questions: int = 0
    unmapped: int = 0
    no_similars: int = 0
    seconds: float = 0.0  # the generator's and the judging's time, imports left out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-template", type=int, default=3)
    parser.add_argument("--similars", type=int, default=5)
    parser.add_argument("--controls", type=int, default=5, help="further controls a question (lara run's default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print_tally(count_similars(args), args)


def count_similars(args: argparse.Namespace) -> Tally:
    """Draws ``--per-template`` questions of every template and judges each similar the generator makes."""
    from generation.answers import read_solution
    from generation.config import GenerationConfig
    from generation.pipeline import make_generator
    from generation.records import Question

    start = time.perf_counter()
    config = GenerationConfig(similars=args.similars, seed=args.seed, controls=args.controls)
    generator = make_generator(config)
    t = Tally()
    for template, generate in sorted(templates().items()):
        counts = t.per_template.setdefault(template, collections.Counter())
        for k in range(args.per_template):
            example, inputs, recompute = draw(generate, Random(args.seed * 1000 + template * 10 + k))
            question = example["question"]
            t.questions += 1
            if recompute is None or not inputs:  # the template computes its answer otherwise: cannot recompute
                t.unmapped += 1
                continue
            slots = slot_inputs(question, inputs)
            t.originals[judge(question, question, inputs, slots, recompute)[0]] += 1  # the method's check: valid
            solution = example["metadata"]["answer_cot"]
            record = generator.generate(
                Question(
                    id=f"t{template}-{k}", question=question, answer=example["answer"], extra={"solution": solution}
                )
            )
            similars = [s for s in record.similars if s is not None]
            t.no_similars += not similars
            worked = read_solution(question, solution, example["answer"])
            if isinstance(worked, str):
                t.unsolved[worked.split(" (")[0]] += 1
            controls = [("similar", s) for s in similars] + [("control", c) for c in record.controls if c is not None]
            for kind, similar in controls:
                verdict, truth = judge(similar, question, inputs, slots, recompute)
                if kind == "similar":
                    t.outcomes[verdict] += 1
                    counts[verdict] += 1
                mine = None if isinstance(worked, str) else worked.answer_for(similar)
                outcome = _compare(mine, truth, verdict)
                t.resolved[f"{kind}s: {outcome}"] += 1
                if outcome.startswith("answered, differs"):
                    t.differing.setdefault(template, (similar, mine, truth))
    t.seconds = time.perf_counter() - start
    return t


def print_tally(t: Tally, args: argparse.Namespace) -> None:
    outcomes, per_template, originals, resolved = t.outcomes, t.per_template, t.originals, t.resolved
    differing, unsolved, questions, unmapped, no_similars = (
        t.differing,
        t.unsolved,
        t.questions,
        t.unmapped,
        t.no_similars,
    )
    total = sum(outcomes.values())
    judged = sum(n for v, n in outcomes.items() if not v.startswith("unjudged"))
    print(
        f"offline generator on GSM-Symbolic ({len(per_template)} templates × {args.per_template} questions, K = {args.similars}; "
        f"{t.seconds:.0f} s)"
    )
    print(
        f"  questions: {questions}; left out, no generate_from_variables to recompute with: {unmapped}; "
        f"no similar made: {no_similars}"
    )
    print(
        f"  the originals themselves, judged the same way: {originals['valid']} of {sum(originals.values())} valid (the check)"
    )
    print(f"  similars: {total}; judged by the template's computation: {judged}")
    for verdict, n in outcomes.most_common():
        share = "" if verdict.startswith("unjudged") else f"  {n / max(judged, 1):6.1%} of judged"
        print(f"    {verdict:<48}{n:>6}{share}")

    def judged_in(c: collections.Counter[str]) -> int:
        return sum(n for v, n in c.items() if not v.startswith("unjudged"))

    worst = sorted((c["valid"] / judged_in(c), t) for t, c in per_template.items() if judged_in(c))[:8]
    print("  templates with the fewest valid similars: " + ", ".join(f"{t} ({share:.0%})" for share, t in worst))
    print(
        f"  answers re-solved from the worked solution (generation.answers), against the template's, of {total} "
        f"similars and {sum(n for o, n in resolved.items() if o.startswith('controls'))} further controls:"
    )
    for outcome, n in sorted(resolved.items()):
        print(f"    {outcome:<48}{n:>6}")
    for template, (similar, mine, truth) in sorted(differing.items()):
        print(f"    template {template}: {similar!r}: re-solved {mine}, the template's computation {truth}")
    print(
        f"  questions whose worked solution could not be used: {sum(unsolved.values())} of {questions - unmapped}: "
        + ", ".join(f"{why} {n}" for why, n in unsolved.most_common(5))
    )


def _compare(mine: float | None, truth: float | None, verdict: str) -> str:
    if verdict.startswith("unjudged"):
        return "answered, template cannot judge" if mine is not None else "no answer, template cannot judge"
    if mine is None:
        return "no answer (judged similar)"
    if truth is None:
        return "answered where the template's computation fails"
    return (
        "answered, equal to the template's"
        if abs(float(mine) - truth) < 1e-9
        else "answered, differs from the template's"
    )


if __name__ == "__main__":
    main()
