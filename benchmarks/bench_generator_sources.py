"""The offline generator per source of questions: its time a question, complete sets, and how many
questions have matched controls that carry a re-solved answer.

    python benchmarks/bench_generator_sources.py --gsm8k test.jsonl --math500 math500.jsonl
    python benchmarks/bench_generator_sources.py            # the shipped excerpts (40 questions each)

Sources: the toolkit's templates (the shipped testbed's first 400 questions, with their worked
solutions: ``probes/testbed/checkpoints/cpu-seed0``), GSM-Symbolic's
templates (3 questions of each, with the ``gsm`` extra: reasoning-gym), GSM8K's test questions
(``--gsm8k``: openai/grade-school-math's ``test.jsonl``), SVAMP (``--svamp``: arkilpatel/SVAMP's
``SVAMP.json``, its equations as worked solutions), MATH-500 (``--math500``: problem, solution,
answer, subject, level). Each question gets what ``lara run`` draws by default: K = 5 similars and
5 further controls (10 controls), answers re-solved from its worked solution (GSM8K's calculator
annotations and written steps, MATH's arithmetic; a question that is one computation or one
equation by sympy). Per source: seconds a question (generation and answers, one process; mean, p95,
max), complete sets, the controls with an answer, and the share of questions with at least 3 of them
(the controls an answer-reading detector scores); MATH-500 also by subject and by level, and why a
solution could not be re-run; SVAMP by problem type; and how the re-solved answers compare in size with the original's
(median ratio, share larger). ``--similars`` and ``--controls`` change the draw.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "fixtures" / "benchmarks"
AT_LEAST = 3


@dataclass
class SourceTally:
    """What the generator made of one source's questions."""

    seconds: list[float] = field(default_factory=list)
    complete: int = 0
    controls: int = 0
    answered: int = 0
    enough: int = 0
    unsolved: collections.Counter = field(default_factory=collections.Counter)
    groups: dict[str, list[int]] = field(default_factory=dict)  # subject or level -> [questions, enough]
    ratios: list[float] = field(default_factory=list)  # each re-solved answer over its original's (both > 0)
    unrated: int = 0  # re-solved answers left out of the ratios: theirs or the original's no positive number

    def add(self, record: Any, seconds: float, groups: tuple[str, ...] = ()) -> None:
        self.seconds.append(seconds)
        self.complete += record.complete
        texts = [*record.similars, *record.controls]
        answers = record.answers or {}
        given = [*answers.get("similars", [None] * len(record.similars)), *answers.get("controls", [])]
        answered = sum(t is not None and a is not None for t, a in zip(texts, given))
        self.controls += sum(t is not None for t in texts)
        self.answered += answered
        self.enough += answered >= AT_LEAST
        original = _positive(record.question.answer)
        values = [_positive(a) for t, a in zip(texts, given) if t is not None and a is not None]
        rated = [] if original is None else [v / original for v in values if v is not None]
        self.ratios += rated
        self.unrated += answered - len(rated)
        if answers.get("unavailable"):
            self.unsolved[answers["unavailable"].split(" (")[0]] += 1
        elif answered < AT_LEAST:
            self.unsolved[f"re-run, fewer than {AT_LEAST} controls with an answer"] += 1
        for group in groups:
            cell = self.groups.setdefault(group, [0, 0])
            cell[0] += 1
            cell[1] += answered >= AT_LEAST


def _positive(answer: Any) -> float | None:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def show_ratios(name: str, tally: SourceTally, width: int = 44) -> None:
    """How the controls' answers compare in size with the originals': alike when the median ratio is
    1 and half are larger (a matched control as hard as its original, as far as size goes)."""
    if tally.ratios:
        r = sorted(tally.ratios)
        larger = sum(x > 1 for x in r) / len(r)
        print(
            f"{name:{width}s} {len(r):6d} answers: median {r[len(r) // 2]:.2f} times the original's, {100 * larger:.0f} % larger"
            f" ({tally.unrated} left out: no positive number)"
        )


def generate_all(questions: list[Any], args: argparse.Namespace, group_of: Any = None) -> SourceTally:
    """Each question's set and answers, timed one at a time."""
    from generation.answers import attach_answers
    from generation.config import GenerationConfig
    from generation.offline import OfflineGenerator

    generator = OfflineGenerator(GenerationConfig(similars=args.similars, controls=args.controls), "bench")
    tally = SourceTally()
    for question in questions:
        start = time.perf_counter()
        record = generator.generate(question)
        attach_answers(record)
        tally.add(record, time.perf_counter() - start, group_of(question) if group_of else ())
    return tally


def template_questions() -> list[Any]:
    """The shipped testbed's questions (our templates, with their worked solutions): the first 400."""
    from generation.records import read_questions

    return read_questions(REPO / "probes" / "testbed" / "checkpoints" / "cpu-seed0" / "questions.jsonl")[:400]


def gsm_symbolic_questions(per_template: int = 3) -> list[Any] | None:
    """GSM-Symbolic's questions with their chain-of-thought solutions, or None without reasoning-gym."""
    from random import Random

    from generation.records import Question

    try:
        from probes.testbed.gsm import generators

        found = generators()
    except Exception:  # noqa: BLE001 - the gsm extra is optional
        return None
    out = []
    for template, generate in sorted(found.items()):
        for k in range(per_template):
            example = generate(Random(template * 10 + k), 1.0)
            solution = example["metadata"]["answer_cot"]
            out.append(
                Question(
                    f"t{template}-{k}", example["question"], answer=example["answer"], extra={"solution": solution}
                )
            )
    return out


def file_questions(path: Path, preset: str) -> list[Any]:
    from probes.questions.importing import ImportOptions, import_questions
    from probes.questions.tables import TableSource

    return import_questions(TableSource(str(path)), ImportOptions(preset=preset)).questions


def show(name: str, tally: SourceTally, width: int = 44) -> None:
    n = len(tally.seconds)
    if not n:
        return
    seconds = sorted(tally.seconds)
    p95 = seconds[min(n - 1, int(0.95 * n))]
    print(
        f"{name:{width}s} {n:5d}  {1000 * sum(seconds) / n:7.1f} ms {1000 * p95:6.0f} ms {1000 * seconds[-1]:7.0f} ms  "
        f"{tally.complete:5d}  {tally.answered:5d}/{tally.controls:<5d} {100 * tally.enough / n:6.1f} %"
    )


def show_groups(tally: SourceTally) -> None:
    for group, (n, enough) in sorted(tally.groups.items()):
        print(f"    {group:40s} {n:4d} questions: {100 * enough / n:5.1f} % with ≥ {AT_LEAST} answer-bearing controls")


def show_reasons(tally: SourceTally) -> None:
    for reason, count in tally.unsolved.most_common(6):
        print(f"    {count:5d}  {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gsm8k", type=Path, default=FIXTURES / "gsm8k_test_excerpt.jsonl")
    parser.add_argument("--math500", type=Path, default=FIXTURES / "math500_test_excerpt.jsonl")
    parser.add_argument("--svamp", type=Path, default=FIXTURES / "svamp_excerpt.json")
    parser.add_argument("--similars", type=int, default=5)
    parser.add_argument("--controls", type=int, default=5, help="further controls (lara run's default: 10 in all)")
    args = parser.parse_args()
    print(f"offline generator: K = {args.similars} similars + {args.controls} further controls a question")
    print(
        f"{'source':44s} {'n':>5s}  {'mean':>10s} {'p95':>9s} {'max':>10s}  {'compl':>5s}  {'answered':>11s} ≥{AT_LEAST} answered"
    )
    results = {
        "our templates": generate_all(template_questions(), args),
    }
    gsm_symbolic = gsm_symbolic_questions()
    if gsm_symbolic is not None:
        results["GSM-Symbolic (3 a template)"] = generate_all(gsm_symbolic, args)
    results[f"GSM8K ({args.gsm8k.name})"] = generate_all(file_questions(args.gsm8k, "gsm8k"), args)
    results[f"SVAMP ({args.svamp.name})"] = generate_all(
        file_questions(args.svamp, "svamp"), args, lambda q: (f"type {q.extra.get('Type')}",)
    )
    math = file_questions(args.math500, "math500")
    results[f"MATH-500 ({args.math500.name})"] = generate_all(
        math, args, lambda q: (f"subject {q.extra.get('subject')}", f"level {q.extra.get('level')}")
    )
    for name, tally in results.items():
        show(name, tally)
    print("the re-solved answers against their original's answer (positive numbers):")
    for name, tally in results.items():
        show_ratios(name, tally)
    for name, tally in results.items():
        if tally.groups:
            print(f"{name}, by group:")
            show_groups(tally)
    for name, tally in results.items():
        if name != "our templates":
            print(f"{name}: questions left with fewer than {AT_LEAST} answer-bearing controls, by reason")
            show_reasons(tally)


if __name__ == "__main__":
    main()
