"""Two `lara run` directories side by side (not a test; issue 33): each model's verdict line and
every method's ROC-AUC in the second run against the first run's 95 % CI — e.g. the demo on
engine vllm against the demo on engine hf:

    lara run configs/demo.yaml --set run_dir=runs/demo-vllm --set model.engine=vllm
    python benchmarks/compare_runs.py runs/demo runs/demo-vllm
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROW = re.compile(r"^\| (\S+) \| (n/a[^|]*|[\d.]+ \[([\d.]+), ([\d.]+)\]) \|")


def sections(report: Path) -> dict[str, dict[str, object]]:
    """Per model section of a run's report.md: its verdict line and ``{method: (auc, lo, hi)}``."""
    out: dict[str, dict[str, object]] = {}
    current, model = None, ""
    for line in report.read_text().splitlines():
        if line.startswith("# "):
            model = line[2:].strip()
        elif line.startswith("## "):
            current = f"{model} / {line[3:].strip()}"
            out[current] = {"verdict": None, "auc": {}}
        elif current and line.startswith("**") and out[current]["verdict"] is None:
            out[current]["verdict"] = line.strip("*").split(" (")[0]
        elif current:
            match = ROW.match(line)
            if match and match.group(3):
                auc = float(match.group(2).split()[0])
                out[current]["auc"][match.group(1)] = (auc, float(match.group(3)), float(match.group(4)))  # type: ignore[index]
    return {k: v for k, v in out.items() if v["auc"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args()
    first, second = sections(args.first / "report.md"), sections(args.second / "report.md")
    for name in first:
        if name not in second:
            continue
        a, b = first[name], second[name]
        print(f"{name}\n  verdict: {a['verdict']}\n       vs: {b['verdict']}")
        inside, rows = 0, []
        for method, (auc, lo, hi) in a["auc"].items():  # type: ignore[union-attr]
            theirs = b["auc"].get(method)  # type: ignore[union-attr]
            if theirs is None:
                continue
            ok = lo <= theirs[0] <= hi
            inside += ok
            rows.append(
                f"  {method:<18} {auc:.2f} [{lo:.2f}, {hi:.2f}]  {theirs[0]:.2f}  {'inside' if ok else 'OUTSIDE'}"
            )
        print("\n".join(rows))
        print(f"  {inside} of {len(rows)} AUCs of {args.second} inside {args.first}'s 95% CI")


if __name__ == "__main__":
    main()
