"""Walk the two journeys of docs/development.md with a call tracer and count them (not a test).

A journey is the union of the toolkit's call stacks (frames in probes/, cache/, generation/,
lara_core/) at the points where the followed thing changes hands — so it is the chain of calls a
reader walks, from the command to each of those points, counted once:

1. **A question, from the questions file to its row in questions.csv** (``lara run``, the
   detectors' branch): the questions file read; the question scored by a detector (CDD) and its
   text given to the model; the detectors' scores written to ``detectors.csv``; read back by the
   verdict and joined with LaRA's table; the decisions written to ``questions.csv``.
2. **``detect.params.cdd.n``, from the config to the sampler**: the config read; the value checked
   (``check_values``: the detector's declared parameters); the sampler's parameters built and
   handed to the engine.

The run is the demo's (``configs/demo.yaml``) on a subset of its questions (``--per-split`` of
each split), so that the trace takes a few minutes; the path does not depend on how many there are.

    python benchmarks/walk_journeys.py
    python benchmarks/walk_journeys.py --per-split 12 --config configs/demo.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, whatever the environment installed
PACKAGES = tuple(str(ROOT / p) + "/" for p in ("probes", "cache", "generation", "lara_core"))

QUESTION_POINTS = (  # (file, function): where a question changes hands
    ("generation/records.py", "read_questions"),
    ("probes/detectors/sampling.py", "CDD.score"),
    ("probes/responders/local.py", "LocalResponder.generate"),
    ("probes/scorefiles.py", "write_scored"),
    ("probes/scorefiles.py", "read_scored"),
    ("probes/scores.py", "join_tables"),
    ("probes/verdicts/decision_table.py", "QuestionDecisions.write_csv"),
    ("probes/verdicts/decision_table.py", "write_no_decisions"),
)
UNDER = {  # a point counts only under this caller: CDD's text to the model and its sampler, the verdict's join
    "LocalResponder.generate": "CDD.score",
    "GenerationParams.__post_init__": "CDD.score",
    "join_tables": "verdict",
}
CDD_POINTS = (
    ("probes/pipeline/config.py", "load_run_config"),
    ("lara_core/params.py", "check_values"),
    ("probes/responders/base.py", "GenerationParams.__post_init__"),
    ("probes/responders/local.py", "LocalResponder.generate"),
)
JOINS = ("join_tables", "reindex", "align_labels")  # functions that put rows back together by id


class StackTracer:
    """At each entry of a point, the stack of the toolkit's frames above it, kept in first-seen order."""

    def __init__(self, points: tuple[tuple[str, str], ...], when=None) -> None:
        self.points, self.when = set(points), when
        self.path: list[tuple[str, str]] = []
        self.hits: Counter = Counter()

    def __call__(self, frame, event, arg):  # noqa: ANN001
        if event != "call" or not frame.f_code.co_filename.startswith(PACKAGES):
            return
        here = _where(frame)
        if here not in self.points or (self.when is not None and not self.when(here, frame)):
            return
        self.hits[here] += 1
        stack = []
        while frame is not None:
            if frame.f_code.co_filename.startswith(PACKAGES):
                stack.append(_where(frame))
            frame = frame.f_back
        for call in reversed(stack):
            if call not in self.path:
                self.path.append(call)


def _under(here: tuple[str, str], frame) -> bool:  # noqa: ANN001
    """Whether the point's required caller (:data:`UNDER`) is on the stack."""
    caller = UNDER.get(here[1])
    while caller is not None and frame is not None:
        if frame.f_code.co_qualname == caller:
            return True
        frame = frame.f_back
    return caller is None


def _where(frame) -> tuple[str, str]:  # noqa: ANN001
    return str(Path(frame.f_code.co_filename).relative_to(ROOT)), frame.f_code.co_qualname


def _subset(questions: Path, per_split: int, out: Path) -> None:
    """The first ``per_split`` questions of each split."""
    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    taken: Counter = Counter()
    kept = []
    for row in rows:
        group = row.get("split") or str(row.get("label"))
        if taken[group] < per_split:
            taken[group] += 1
            kept.append(row)
    out.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")


def _traced(argv: list[str], tracer: StackTracer) -> StackTracer:
    from probes.cli import main

    sys.setprofile(tracer)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    return tracer


def _print(title: str, tracer: StackTracer, points: tuple[tuple[str, str], ...]) -> None:
    files = list(dict.fromkeys(f for f, _ in tracer.path))
    print(f"\n## {title}: {len(tracer.path)} calls in {len(files)} files")
    for i, (file, name) in enumerate(tracer.path, 1):
        mark = "  <- " + ("reached" if tracer.hits[(file, name)] else "") if (file, name) in points else ""
        print(f"{i:3d}. {file}:{name}{mark}")
    missed = [p for p in points if not tracer.hits[p] and p[1] != "write_no_decisions"]
    if missed:
        print("points never reached: " + ", ".join(f"{f}:{n}" for f, n in missed))
    joins = [n for _, n in tracer.path if n.split(".")[-1] in JOINS]
    print(f"joins by id on the path: {len(joins)}" + (f" ({', '.join(joins)})" if joins else ""))
    entered = Counter(f for f, _ in tracer.path)
    print("files entered with more than one call: " + ", ".join(f"{f} {n}" for f, n in entered.most_common() if n > 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs/demo.yaml")
    parser.add_argument("--per-split", type=int, default=8)
    parser.add_argument("--journey", choices=["question", "cdd", "both"], default="both")
    args = parser.parse_args()

    from probes.pipeline.config import load_run_config

    with tempfile.TemporaryDirectory() as tmp:
        questions = Path(tmp) / "questions.jsonl"
        _subset(Path(load_run_config(args.config).questions), args.per_split, questions)
        base = ["run", str(args.config), "--no-progress", "--set", f"questions={questions}"]
        if args.journey in ("question", "both"):
            first = _traced([*base, "--set", f"run_dir={tmp}/run"], StackTracer(QUESTION_POINTS, _under))
            _print(
                f"a question -> questions.csv ({args.config.name}, {args.per_split} per split)", first, QUESTION_POINTS
            )
        if args.journey == "question":
            return

        def cdd_only(here, frame) -> bool:  # noqa: ANN001
            values = frame.f_locals
            if here[1] == "check_values":
                return values.get("detector") == "cdd"
            if here[1] == "GenerationParams.__post_init__":
                params = values["self"]
                return params.n > 1 and params.max_new_tokens == _cdd_budget(args.config) and _under(here, frame)
            return _under(here, frame)

        second = _traced([*base, "--set", f"run_dir={tmp}/run2"], StackTracer(CDD_POINTS, cdd_only))
        _print("detect.params.cdd.n -> the sampler", second, CDD_POINTS)
        print(f"cdd.n checked: {second.hits[('lara_core/params.py', 'check_values')]} time(s)")


def _cdd_budget(config: Path) -> int:
    from probes.pipeline.config import load_run_config

    return load_run_config(config).detect.params.get("cdd", {}).get("max_tokens", 100)


if __name__ == "__main__":
    main()
