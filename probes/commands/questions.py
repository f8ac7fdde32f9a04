"""``lara questions import`` (a benchmark into a questions file) and ``lara questions pair`` (member
and non-member sets into one labelled file, duplicates removed, balance and confound shown)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lara_core.configio import prompt_text

from ..errors import InputError
from ..questions import ImportOptions, TableSource, import_questions, write_questions
from ..questions.lm_eval_tasks import LmEvalSource, import_lm_eval_task
from ..questions.presets import PRESETS
from ._common import command_parser
from .pair import register_pair
from .split import register_split

QUESTIONS_EXAMPLES = """examples:
  lara questions import HuggingFaceH4/MATH-500 --preset math500 --split test -o math500.jsonl    # where the hub is reachable
  lara questions import ./aime2024_saved --preset aime2024 --label 0 -o aime24.jsonl              # a save_to_disk directory
  lara questions import gsm8k_test.parquet --preset gsm8k --limit 200 -o gsm8k.jsonl
  lara questions import rl_data.jsonl --preset chat --label 1 -o members.jsonl                     # prompt = message list
  lara questions import mine.csv --field question=prompt_text --field answer=target -o q.jsonl
  lara questions import --lm-eval-task gsm8k --num-fewshot task --limit 200 -o gsm8k.jsonl       # the harness's prompts
  lara questions pair --members members.jsonl --nonmembers aime24.jsonl --clean-ref clean.jsonl -o labelled.jsonl
  lara questions split runs/demo -o runs/demo/split                                             # back to the harness
"""


def register(sub: Any) -> None:
    questions = command_parser(
        sub,
        "questions",
        "bring benchmarks in (import a dataset, pair members with non-members) and out (split a run)",
        QUESTIONS_EXAMPLES,
    )
    actions = questions.add_subparsers(dest="questions_command", required=True, metavar="ACTION")
    imp = command_parser(
        actions,
        "import",
        "a hub dataset, save_to_disk directory or Parquet/JSON/JSONL/CSV file -> questions JSONL",
        QUESTIONS_EXAMPLES + "\npresets:\n" + "\n".join(f"  {p.name:<14} {p.description}" for p in PRESETS.values()),
    )
    imp.add_argument(
        "source",
        nargs="?",
        help="hub dataset name, a datasets save_to_disk directory, or a .parquet/.json/.jsonl/.csv file "
        "(or --lm-eval-task)",
    )
    imp.add_argument(
        "--lm-eval-task",
        metavar="NAME",
        help="an lm-evaluation-harness task (or group): one question per evaluation document, its text the "
        "prompt the harness sends, its answer doc_to_target (the lm-eval extra)",
    )
    imp.add_argument("--include-path", help="a directory of further lm-eval task YAMLs (lm_eval --include_path)")
    imp.add_argument(
        "--num-fewshot",
        default="0",
        metavar="N|task",
        help="few-shot examples in each lm-eval prompt: N, or 'task' for the count the task is evaluated with "
        "(default: 0, the bare doc_to_text prompt)",
    )
    imp.add_argument(
        "-o", "--output", type=Path, required=True, help="questions JSONL to write (provenance in OUTPUT.meta.json)"
    )
    imp.add_argument(
        "--preset",
        help=f"the benchmark's schema: {', '.join(PRESETS)} (default: columns named question/problem, id, answer, label)",
    )
    imp.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="KEY=COLUMN",
        help="read KEY (id, question, answer, label, split, source, context, prompt) from COLUMN; dotted for nested, repeatable",
    )
    imp.add_argument("--config", help="hub dataset config (subset) name")
    imp.add_argument("--split", help="split of a hub dataset or saved DatasetDict (default: the only one, else test)")
    imp.add_argument("--revision", help="hub revision (branch, tag or commit) to pin")
    imp.add_argument("--label", type=int, choices=[0, 1], help="label every question: 1 = member, 0 = non-member")
    imp.add_argument("--split-name", help="set every question's split, e.g. clean_ref (LaRA's clean reference)")
    imp.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="keep only rows whose COLUMN (dotted for nested) equals VALUE, repeatable, e.g. --where data_source=numina_olympiads",
    )
    imp.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="a random sample of N rows (after --where), seeded by --seed, in table order",
    )
    imp.add_argument("--seed", type=int, default=0, help="seed of --sample (default: 0)")
    imp.add_argument("--limit", type=int, help="import at most N questions")
    imp.add_argument(
        "--strip-suffix",
        type=prompt_text,
        metavar="TEXT",
        help="remove this fixed instruction from the end of every question that carries it (e.g. RL data's "
        "answer-format line, which only members would carry: a confound); \\n is a newline; recorded in the provenance",
    )
    imp.set_defaults(handler=handle_import)

    register_pair(actions)
    register_split(actions)


def parse_pairs(items: list[str], flag: str, example: str) -> dict[str, str]:
    """``["question=problem", …]`` → ``{"question": "problem", …}``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or (flag == "--field" and not value.strip()):
            raise InputError(f"{flag} {item!r}: expected KEY=VALUE, e.g. {flag} {example}")
        out[key.strip()] = value.strip()
    return out


def handle_import(args: argparse.Namespace) -> int:
    for flag in ("limit", "sample"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise InputError(f"--{flag} must be at least 1")
    if (args.source is None) == (args.lm_eval_task is None):
        raise InputError("give a source (a dataset or a file) or --lm-eval-task NAME, one of the two")
    options = ImportOptions(
        preset=args.preset,
        fields=parse_pairs(args.field, "--field", "question=problem"),
        label=args.label,
        split_name=args.split_name,
        limit=args.limit,
        where=parse_pairs(args.where, "--where", "data_source=numina_olympiads"),
        sample=args.sample,
        seed=args.seed,
        strip_suffix=args.strip_suffix,
    )
    if args.lm_eval_task is not None:
        result = import_lm_eval_task(lm_eval_source(args), options)
    else:
        spec = TableSource(args.source, config=args.config, split=args.split, revision=args.revision)
        result = import_questions(spec, options)
    files = write_questions(result, args.output)
    print(result.describe())
    print(f"wrote {', '.join(str(f) for f in files)}")
    return 0


def lm_eval_source(args: argparse.Namespace) -> LmEvalSource:
    """The harness task the flags name; a table source's flags are refused with it (the options
    that read a table, by the import itself)."""
    given = [f"--{name}" for name in ("config", "split", "revision") if getattr(args, name) is not None]
    if given:
        raise InputError(f"--lm-eval-task reads the task's own documents; {', '.join(given)} do not apply")
    fewshot = args.num_fewshot.strip().lower()
    if fewshot != "task" and not (fewshot.isdigit()):
        raise InputError(f"--num-fewshot {args.num_fewshot!r}: a count (0, 5, …) or 'task'")
    return LmEvalSource(args.lm_eval_task, args.include_path, None if fewshot == "task" else int(fewshot))
