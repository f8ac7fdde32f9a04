"""``lara testbed build``: a small causal LM with a known RL (GRPO) training set."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

PRESET_NAMES = ("smoke", "cpu", "gpu", "gsm", "gsm-smoke")  # probes.testbed.PRESETS' keys (a test keeps them equal)

TESTBED_EXAMPLES = """examples:
  lara testbed build --out testbed-smoke --preset smoke            # under a minute; plumbing only
  lara testbed build --out testbed-cpu --preset cpu --seed 0       # rebuilds the shipped demo checkpoints
  lara testbed build --out testbed-gpu --preset gpu --device cuda
  lara testbed build --out probes/testbed/checkpoints/gsm-seed0 --preset gsm --seed 0   # GSM-Symbolic (needs .[gsm])
"""


def register(sub: Any) -> None:
    testbed = sub.add_parser(
        "testbed",
        help="build a small causal LM with a known RL (GRPO) training set",
        epilog=TESTBED_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    testbed_sub = testbed.add_subparsers(dest="testbed_command", required=True, metavar="ACTION")
    build = testbed_sub.add_parser(
        "build",
        help="draw the problems, train the tokenizer, SFT, then GRPO on the members",
        epilog=TESTBED_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument(
        "--out", type=Path, required=True, help="directory to create (sft/, rl/, questions.jsonl, testbed.json, logs)"
    )
    build.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default="cpu",
        help="smoke: seconds, plumbing only; cpu: the shipped demo checkpoints (~17 min on 2 cores); gpu: "
        "larger; gsm: GSM-Symbolic's GSM8K templates (the gsm extra; ~50 min); gsm-smoke: its plumbing",
    )
    build.add_argument(
        "--seed", type=int, default=0, help="seed of the problems, the weights and the training (default: 0)"
    )
    build.add_argument("--device", help="torch device (default: the preset's: cpu, or cuda for gpu)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    build.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..testbed import build_testbed  # lazy: pulls torch

    command = f"lara testbed build --out {args.out} --preset {args.preset} --seed {args.seed}"
    manifest = build_testbed(
        args.out, args.preset, args.seed, device=args.device, overwrite=args.overwrite, command=command
    )
    acc = manifest["accuracy"]
    print(f"testbed {args.out} ({args.preset}, seed {args.seed}) built in {manifest['seconds']['total']:.0f} s")
    for stage in ("sft", "rl"):
        print(
            f"  accuracy after {stage.upper():<4} members {acc[stage]['members']:.1%}, non-members "
            f"{acc[stage]['non_members']:.1%}, held-out test {acc[stage]['test']:.1%}"
        )
    print(f"  checkpoints: {args.out / 'sft'}, {args.out / 'rl'}; questions: {args.out / 'questions.jsonl'}")
    return 0
