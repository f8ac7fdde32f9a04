"""The verdict's size on real benchmark questions a shipped checkpoint never trained on.

    python benchmarks/bench_real_size.py --testbed smollm --gsm8k test.jsonl --math500 math500.jsonl [--n 120]
    python benchmarks/bench_real_size.py --testbed cpu --gsm8k test.jsonl --math500 math500.jsonl

The shipped testbeds' RL sets are questions of our own templates, so GSM8K's and MATH-500's
questions are non-members of every one of them. This audits the testbed's RL checkpoint against
its reference (the checkpoint right before RL: the reference mode) on ``--n`` questions drawn (seed
0) from each benchmark, as the benchmark states them and in the prompt format its RL used, with the
default detectors (PPL, Min-K%, zlib, ReCaLL, reward gain) calibrated on matched controls whose
answers the generator re-solves. Nothing is contaminated, so the verdict must not reject, no
question may be named at the false-discovery rate, and the per-question p-values must look uniform:
the share under 0.05 within its binomial band, and a Kolmogorov–Smirnov test against the uniform.

``--gsm8k`` is GSM8K's ``test.jsonl`` (openai/grade-school-math), ``--math500`` MATH-500's
(problem, solution, answer, subject, level, unique_id); without them the excerpts shipped in
``tests/fixtures/benchmarks`` are used (fewer questions: a smoke run). Resumable: the run is
``lara run``'s (``--run-dir``). Prints the figures and writes ``bench/real_size.json`` there.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "fixtures" / "benchmarks"
TESTBEDS = {
    "smollm": ("configs/demo-smollm.yaml", "probes/testbed/checkpoints/smollm-seed0"),
    "cpu": ("configs/demo.yaml", "probes/testbed/checkpoints/cpu-seed0"),
    "gsm": ("configs/demo-gsm.yaml", "probes/testbed/checkpoints/gsm-seed0"),
}
DETECTORS = ["ppl", "min_k", "zlib", "recall", "reward_gain"]


def real_questions(path: Path, preset: str, n: int, chat: bool) -> list[dict[str, Any]]:
    """``n`` questions of the benchmark at ``path`` (seed 0), as the testbed's questions file holds
    them: label 0, split ``non_member``, the problem (with the RL's answer instruction after it on
    the real-model testbed), the known answer and the worked solution."""
    from probes.questions.importing import ImportOptions, import_questions
    from probes.questions.tables import TableSource
    from probes.testbed.smollm import INSTRUCTION

    result = import_questions(TableSource(str(path)), ImportOptions(preset=preset, sample=n, seed=0))
    rows = []
    for q in result.questions:
        text = f"{q.question}\n{INSTRUCTION}" if chat else q.question
        extra = {**q.extra, "benchmark": preset}
        rows.append({"id": f"{preset}-{q.id}", "question": text, "label": 0, "answer": q.answer, "source": preset,
                     "split": "non_member", "extra": extra})  # fmt: skip
    return rows


def write_questions(args: argparse.Namespace, testbed: Path, out: Path) -> Path:
    """The audited questions (both benchmarks) and the testbed's clean_ref questions (the detectors'
    clean set), as one questions file."""
    chat = args.testbed == "smollm"
    rows = real_questions(args.gsm8k, "gsm8k", args.n, chat) + real_questions(args.math500, "math500", args.n, chat)
    clean = [json.loads(line) for line in (testbed / "questions.jsonl").read_text().splitlines() if line.strip()]
    rows += [r for r in clean if r.get("split") == "clean_ref"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def run(args: argparse.Namespace) -> Path:
    """Runs (or resumes) the audit; returns the run directory."""
    from probes.pipeline import load_run_config, run_pipeline

    config_path, testbed = (REPO / p for p in TESTBEDS[args.testbed])
    run_dir = args.run_dir or REPO / "runs" / f"real-size-{args.testbed}"
    questions = write_questions(args, testbed, run_dir / "real_questions.jsonl")
    names = json.dumps(DETECTORS)
    sets = [
        f"questions={questions}",
        f"run_dir={run_dir}",
        "lara=false",
        f"detect.names={names}",
        f"calibration.detectors={names}",
        "fusion=[]",
        f"detect.clean_ref={args.clean_ref}",
        "verdict.subsets=[non_members]",
        *args.set,
    ]
    run_pipeline(load_run_config(config_path, sets), progress=False)
    return run_dir


def figures(run_dir: Path, audited: str = "rl") -> dict[str, Any]:
    """The verdict, the names, and the per-question p-values' uniformity, overall and per benchmark."""
    import csv

    from scipy import stats

    verdict = json.loads((run_dir / audited / "verdict.json").read_text())
    with open(run_dir / audited / "questions.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    out: dict[str, Any] = {
        "reject": verdict.get("reject"),
        "p": (verdict.get("combined") or {}).get("p_value"),
        "mode": verdict.get("mode"),
        "flagged": (verdict.get("questions") or {}).get("n_flagged"),
        "at_least": (verdict.get("questions") or {}).get("at_least"),
        "detectors": _per_detector(verdict),
        "by_benchmark": {},
    }
    for name in ("all", "gsm8k", "math500"):
        ps = [float(r["p_value"]) for r in rows if r["p_value"] not in ("", "nan") and _of(r["id"], name)]
        ps = [p for p in ps if math.isfinite(p)]
        if not ps:
            continue
        under = sum(p < 0.05 for p in ps)
        band = 2 * math.sqrt(0.05 * 0.95 / len(ps))
        ks = stats.kstest(ps, "uniform")
        out["by_benchmark"][name] = {
            "n": len(ps),
            "under_0.05": under / len(ps),
            "band": [max(0.0, 0.05 - band), 0.05 + band],
            "ks": float(ks.statistic),
            "ks_p": float(ks.pvalue),
            "flagged": sum(r.get("flagged") in ("True", "true", "1") for r in rows if _of(r["id"], name)),
        }
    return out


def _per_detector(verdict: dict[str, Any]) -> dict[str, Any]:
    """Each detector's own test in the verdict's mode: its p-value, within-AUC with CI, and the
    questions it decided (the verdict's ``coverage``)."""
    mode = verdict.get("mode")
    section = verdict.get(mode) if isinstance(verdict.get(mode), dict) else verdict
    coverage = verdict.get("coverage") or {}
    out = {}
    for name, r in (section.get("detectors") or {}).items():
        auc = r.get("within_auc") or {}
        decided = coverage.get(name) or {}
        out[name] = {
            "p": r.get("p_value"),
            "within_auc": auc.get("value"),
            "ci": auc.get("ci"),
            "decided": decided.get("decided"),
            "of": decided.get("of"),
        }
    return out


def _of(qid: str, name: str) -> bool:
    return (name == "all" and qid.startswith(("gsm8k-", "math500-"))) or qid.startswith(f"{name}-")


def show(found: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"testbed {args.testbed}: the RL checkpoint against its reference on real questions it never trained on")
    print(
        f"  verdict ({found['mode']}): {'REJECTS' if found['reject'] else 'not rejected'}, p = {found['p']}; "
        f"named at the FDR: {found['flagged']}, at least {found['at_least']}"
    )
    for name, d in found["detectors"].items():
        ci = d["ci"] or [math.nan, math.nan]
        print(
            f"  {name:12s} p = {d['p']:.3f}, within-AUC {d['within_auc']:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]; "
            f"decided {d['decided']} of {d['of']}"
        )
    for name, f in found["by_benchmark"].items():
        lo, hi = f["band"]
        print(
            f"  {name:8s} n = {f['n']:3d}: p < 0.05 for {100 * f['under_0.05']:.1f} % (band [{100 * lo:.1f}, {100 * hi:.1f}] %), "
            f"KS D = {f['ks']:.3f} (p = {f['ks_p']:.2f}), named {f['flagged']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", choices=sorted(TESTBEDS), default="smollm")
    parser.add_argument("--gsm8k", type=Path, default=FIXTURES / "gsm8k_test_excerpt.jsonl")
    parser.add_argument("--math500", type=Path, default=FIXTURES / "math500_test_excerpt.jsonl")
    parser.add_argument("--n", type=int, default=120, help="questions drawn from each benchmark")
    parser.add_argument("--clean-ref", type=int, default=20, help="clean_ref questions the detectors score")
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE, passed to the run's config")
    args = parser.parse_args()
    run_dir = run(args)
    found = figures(run_dir)
    (run_dir / "bench").mkdir(exist_ok=True)
    (run_dir / "bench" / "real_size.json").write_text(json.dumps(found, indent=2))
    show(found, args)


if __name__ == "__main__":
    main()
