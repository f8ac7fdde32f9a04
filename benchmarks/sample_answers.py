"""Samples of re-solved control answers for a hand check, and their grading.

    python benchmarks/sample_answers.py draw --gsm8k test.jsonl --seed 41 --held -o sample
    # a grader solves each control of sample.blind.json by hand into sample.graded.json:
    #   [{"n": 0, "answer": 12.5, "well_posed": true, "note": "…"}, …]
    python benchmarks/sample_answers.py grade sample --gsm8k test.jsonl       # writes sample.checked.json
    python benchmarks/sample_answers.py grade benchmarks/hand_checks/*.checked.json --gsm8k test.jsonl

``draw`` runs the offline generator as ``lara run`` does (5 similars, 5 further controls) on GSM8K's
test questions, and picks ``--n`` questions at random (``--seed``) with a control that has a
re-solved answer, one such control each (``--held``: only controls that keep one of the original's
quantities — the answers that held quantities or narrowed draws give; ``--exclude``: questions of
earlier samples). It writes ``<out>.blind.json`` (the original, its official solution, the control:
what the grader sees) and ``<out>.key.json`` (the same with the generator's answer). ``grade``
compares the grader's answers with the key — right, wrong on a well-posed control, wrong on an
ill-posed one — and re-solves each control with the resolver as it is now, graded the same way
(so a sample checks the rules it was drawn under, and later rules are checked on it too); it keeps
the graded sample as ``<sample>.checked.json`` (GSM8K's question index, the control, both answers,
the grader's note). The samples behind docs/real-benchmarks.md's hand checks are in
``benchmarks/hand_checks/`` (derived from GSM8K's test set, MIT: openai/grade-school-math).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _split(row: dict[str, Any]) -> tuple[str, str]:
    solution, answer = row["answer"].split("####")
    return solution, answer.strip().replace(",", "")


def _answered(rows: list[dict[str, Any]], held_only: bool) -> dict[int, list[tuple[str, Any]]]:
    """Per question index, its controls with a re-solved answer (``held_only``: those keeping a quantity)."""
    from generation.answers import attach_answers
    from generation.config import GenerationConfig
    from generation.numbers import find_slots
    from generation.offline import OfflineGenerator
    from generation.records import Question

    generator = OfflineGenerator(GenerationConfig(controls=5, paraphrases=1), "sample")
    out: dict[int, list[tuple[str, Any]]] = {}
    for i, row in enumerate(rows):
        solution, answer = _split(row)
        record = generator.generate(Question(str(i), row["question"], answer=answer, extra={"solution": solution}))
        attach_answers(record)
        answers = record.answers or {}
        original = [s.value for s in find_slots(row["question"])]
        texts = [*record.similars, *record.controls]
        for text, value in zip(texts, [*answers.get("similars", []), *answers.get("controls", [])]):
            if text is None or value is None:
                continue
            kept = any(a == b for a, b in zip(original, (s.value for s in find_slots(text))))
            if kept or not held_only:
                out.setdefault(i, []).append((text, value))
    return out


def draw(args: argparse.Namespace) -> None:
    rows = _rows(args.gsm8k)
    answered = _answered(rows, args.held)
    excluded = {s["gsm8k_index"] for path in args.exclude for s in json.loads(Path(path).read_text())}
    rng = random.Random(args.seed)
    picked = rng.sample(sorted(set(answered) - excluded), args.n)
    key = []
    for n, i in enumerate(picked):
        control, value = rng.choice(answered[i])
        original = rows[i]
        key.append({"n": n, "gsm8k_index": i, "original": original["question"], "original_solution": original["answer"],
                    "control": control, "ours": value})  # fmt: skip
    out = Path(args.out)
    out.with_suffix(".key.json").write_text(json.dumps(key, indent=1))
    out.with_suffix(".blind.json").write_text(
        json.dumps([{k: v for k, v in s.items() if k != "ours"} for s in key], indent=1)
    )
    print(f"{len(key)} controls of {len(answered)} answered questions -> {out}.blind.json, {out}.key.json")


def _tally(pairs: list[tuple[Any, dict[str, Any]]]) -> dict[str, int]:
    tally = {"right": 0, "wrong, well-posed": 0, "wrong, ill-posed": 0, "no answer": 0}
    for ours, graded in pairs:
        truth = graded.get("answer")
        if ours is None:
            tally["no answer"] += 1
        elif truth is not None and abs(float(ours) - float(truth)) < 1e-6:
            tally["right"] += 1
        else:
            tally["wrong, well-posed" if graded.get("well_posed") else "wrong, ill-posed"] += 1
    return tally


def grade(args: argparse.Namespace) -> None:
    """Grade each checked sample (``<sample>.key.json`` with ``<sample>.graded.json`` beside it, merged into
    ``<sample>.checked.json``; or a ``.checked.json`` itself, its originals read from ``--gsm8k``)."""
    from generation.answers import answers_for

    rows = _rows(args.gsm8k)
    for sample in args.samples:
        path = Path(sample)
        if path.name.endswith(".checked.json"):
            checked = json.loads(path.read_text())
        else:
            graded = {g["n"]: g for g in json.loads(path.with_suffix(".graded.json").read_text())}
            checked = [{"gsm8k_index": s["gsm8k_index"], "control": s["control"], "ours": s["ours"],
                        **{k: graded[s["n"]].get(k) for k in ("answer", "well_posed", "note")}}
                       for s in json.loads(path.with_suffix(".key.json").read_text())]  # fmt: skip
            path = path.with_suffix(".checked.json")
            path.write_text(json.dumps(checked, indent=1))
        now = []
        for c in checked:
            solution, answer = _split(rows[c["gsm8k_index"]])
            now.append(answers_for(rows[c["gsm8k_index"]]["question"], solution, answer, [c["control"]])[0][0])
        print(f"{path.name}: as drawn {_tally([(c['ours'], c) for c in checked])}")
        print(f"{' ' * len(path.name)}  re-solved now {_tally(list(zip(now, checked)))}")
        for c in checked:
            truth = c.get("answer")
            if truth is None or abs(float(c["ours"]) - float(truth)) >= 1e-6:
                print(f"    GSM8K {c['gsm8k_index']}: ours {c['ours']}, the grader's {truth}; {c.get('note') or ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--gsm8k", type=Path, default=REPO / "tests/fixtures/benchmarks/gsm8k_test_excerpt.jsonl")
    d.add_argument("--n", type=int, default=50)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--held", action="store_true", help="only controls that keep a quantity of the original")
    d.add_argument("--exclude", nargs="*", default=[], help="key files of earlier samples")
    d.add_argument("-o", "--out", default="sample")
    g = sub.add_parser("grade")
    g.add_argument(
        "samples", nargs="+", help="-o of draw (with <sample>.graded.json beside it), or .checked.json files"
    )
    g.add_argument("--gsm8k", type=Path, default=REPO / "tests/fixtures/benchmarks/gsm8k_test_excerpt.jsonl")
    args = parser.parse_args()
    draw(args) if args.command == "draw" else grade(args)


if __name__ == "__main__":
    main()
