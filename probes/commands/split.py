"""``lara questions split RUN``: a finished run's audited questions split by its decisions — the
questions not flagged and those flagged, as questions files and, for questions imported from an
lm-eval task, as lm-eval tasks an evaluator reruns their harness on."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..operations.split_questions import split_questions
from ..pipeline.layout import RunLayout

SPLIT_EXAMPLES = """examples:
  lara questions split runs/demo -o runs/demo/split                  # the audited model's decisions
  lara questions split runs/audit --model rl -o clean_subset
  lm_eval --model hf --model_args pretrained=CKPT --include_path clean_subset/lm_eval --tasks gsm8k_not_flagged
"""


def register_split(actions: Any) -> None:
    split = actions.add_parser(
        "split",
        help="a run's audited questions by its decisions: not flagged / flagged, as questions files and lm-eval tasks",
        epilog=SPLIT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    split.add_argument("run_dir", type=Path, metavar="RUN", help="the run directory of `lara run`")
    split.add_argument("--model", help="whose decisions (default: the run's audited model)")
    split.add_argument("-o", "--output", type=Path, required=True, help="directory to write the subsets to")
    split.set_defaults(handler=handle_split)


def handle_split(args: argparse.Namespace) -> int:
    layout = RunLayout(args.run_dir)
    if not layout.config.is_file():
        raise InputError(
            f"{args.run_dir} is not a run directory (no {layout.config.name}): give the RUN_DIR of `lara run`"
        )
    config = yaml.safe_load(layout.config.read_text(encoding="utf-8"))
    model = args.model or config["name"]
    decisions = layout.path(layout.model(model).questions)
    origin = {"run": str(args.run_dir.resolve()), "model": model}
    result = split_questions(config["questions"], decisions, args.output, origin)
    for name, count in result.counts.items():
        print(f"{count} {name.replace('_', ' ')} question(s): {result.files.get(name, 'none, no file written')}")
    if result.tasks:
        print(f"lm-eval tasks (--include_path {result.include_path}): {', '.join(result.tasks)}")
    return 0
