"""What each output-level detector costs per question on a real model, at its paper defaults
and at the budgets ``configs/demo-smollm.yaml`` sets (issue 42, item 5).

    python benchmarks/bench_smollm_cost.py [--testbed probes/testbed/checkpoints/smollm-seed0]
        [--questions 2] [--detectors ppl,cdd] [--defaults paper|demo]

Audits the first ``--questions`` members and as many non-members of the real-model testbed with
the RL adapter (merged into SmolLM2-135M-Instruct, float32, CPU), one detector at a time through
``probes.detect`` (the reference detectors against the checkpoint before RL), and prints per
detector: seconds per question, generated responses per question, the share of them that hit the
token budget (a truncated answer), and the parameters in force. ``paper`` runs every detector
at its defaults (the papers' budgets: 1,024-token answers, CDD's 50 samples…); ``demo`` at the
demo config's ``detect.params``. The detectors run in turn on one loaded model, as a run does:
an answer one of them generated is reused by the next (the toolkit's response cache), so a row
is what that detector adds and the total is what all of them cost together. Needs the smollm
extra; no score is asserted here, only cost.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import probes  # noqa: E402
from probes.detectors import REGISTRY  # noqa: E402


def demo_params() -> dict:
    import yaml

    config = yaml.safe_load((ROOT / "configs" / "demo-smollm.yaml").read_text())
    return config["detect"].get("params", {})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", type=Path, default=ROOT / "probes/testbed/checkpoints/smollm-seed0")
    parser.add_argument("--questions", type=int, default=2, help="members, and as many non-members")
    parser.add_argument("--detectors", help="comma-separated (default: all fifteen)")
    parser.add_argument("--defaults", choices=("paper", "demo"), default="paper")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = [json.loads(line) for line in (args.testbed / "questions.jsonl").read_text().splitlines()]
    picked = [r for s in ("member", "non_member") for r in [x for x in rows if x["split"] == s][: args.questions]]
    manifest = json.loads((args.testbed / "testbed.json").read_text())
    temperature = manifest["settings"]["grpo"]["temperature"]
    audited = probes.load_model(str(args.testbed / "rl"), device="cpu", dtype="float32")
    reference = probes.load_model(str(args.testbed / "sft"), device="cpu", dtype="float32")
    names = args.detectors.split(",") if args.detectors else sorted(REGISTRY)
    params = demo_params() if args.defaults == "demo" else {}
    print(
        f"SmolLM2-135M-Instruct + RL adapter, CPU float32, {len(picked)} questions, detectors at "
        f"{'their paper defaults' if args.defaults == 'paper' else 'demo-smollm.yaml budgets'}, sampling T = {temperature}"
    )
    print("(in this order on one model: a row is what the detector adds to those above it, reused answers free)")
    print("| detector | s / question | responses / question | at the token budget | parameters |")
    print("|---|---|---|---|---|")
    total = 0.0
    for name in names:
        started = time.perf_counter()
        detection = probes.detect(
            audited,
            picked,
            [name],
            reference=reference if REGISTRY[name].requires_reference else None,
            params={name: params[name]} if name in params else None,
            prompt_format="chat",
            sampling_temperature=temperature,
        )
        seconds = time.perf_counter() - started
        total += seconds
        described = detection.summary.info["detectors"][name]
        responses = described["responses"]
        shown = {k: v for k, v in described["params"].items() if "token" in k or k in ("n", "k", "n_prefix")}
        capped = f"{responses['capped'] / responses['n']:.0%}" if responses["n"] else "—"
        print(
            f"| {name} | {seconds / len(picked):.1f} | {responses['n'] / len(picked):.1f} | {capped} | "
            f"{', '.join(f'{k}={v}' for k, v in sorted(shown.items()))} |"
        )
    print(f"all {len(names)}: {total / len(picked):.0f} s per question ({total:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
