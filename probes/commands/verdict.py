"""``lara verdict``: the label-free verdict of SPEC §8."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..questions.reading import read_labels, read_splits
from ..scorefiles import read_scored
from ..verdicts.modes import VerdictSettings
from ._common import add_setting, command_parser, settings_from

NO_VERDICT_EXIT = 3  # no mode had a usable detector: not a negative answer

VERDICT_EXAMPLES = """exit status: 0 a verdict (contaminated or not), 2 an error, 3 no verdict (no mode had a detector
with a usable question: the scores are NaN or too few controls were scored; the counts say which)

examples:
  lara detect ppl,min_k,cdd q.jsonl --model ./rl --sets sets.jsonl -o rl.csv        # also scores 3 controls per question
  lara detect ppl,min_k,cdd q.jsonl --model ./sft --sets sets.jsonl -o sft.csv      # the reference model, same texts
  lara verdict rl.csv --reference-scores sft.csv -o verdict.json                    # reference mode (calibrated)
  lara verdict rl.csv --reference-scores sft.csv --fdr 0.05 -o verdict.json         # which questions: verdict.questions.csv
  lara verdict rl.csv --questions q.jsonl --subsets members,non_members -o v.json   # clean_ref questions: relative mode
  lara verdict rl.csv -o verdict.json                                               # absolute mode (uncalibrated)
"""

VERDICT_HELP = (
    "label-free verdict: was this benchmark trained on? calibrated tests against each question's matched controls"
)

INPUT_FILES = {  # the files a verdict reads beside the audited model's scores: flag → help
    "--controls": "its SCORES.controls.csv (default: the one beside SCORES.csv that "
    "lara detect recorded in SCORES.meta.json; a file the meta does not bind is refused)",
    "--reference-scores": "the reference model's SCORES.csv on the same questions (reference mode)",
    "--reference-controls": "the reference model's SCORES.controls.csv (default: beside it)",
    "--clean": "SCORES.csv of a clean set drawn like the audited questions (relative mode)",
    "--clean-controls": "the clean set's SCORES.controls.csv (default: beside it)",
    "--questions": "questions JSONL: split clean_ref questions are the clean set; labels "
    "and splits define --subsets (the verdict itself never reads labels)",
}


def register(sub: Any) -> None:
    verdict = command_parser(sub, "verdict", VERDICT_HELP, VERDICT_EXAMPLES)
    verdict.add_argument("scores", type=Path, help="SCORES.csv of the audited model (lara detect --sets)")
    for flag, text in INPUT_FILES.items():
        verdict.add_argument(flag, type=Path, help=text)
    verdict.add_argument(
        "--subsets", help="also a verdict on these groups, e.g. members,non_members (by label) or a split name"
    )
    verdict.add_argument(
        "--detectors",
        help="detectors combined, comma-separated (default: all with controls, and lara in the relative mode)",
    )
    add_setting(
        verdict, "--alpha", VerdictSettings, "alpha", f"level of the combined test (default: {VerdictSettings.alpha})"
    )
    add_setting(verdict, "--combine", VerdictSettings, "combine", f"(default: {VerdictSettings.combine})")
    add_setting(
        verdict,
        "--permutations",
        VerdictSettings,
        "permutations",
        f"permutations of the within-question test (default: {VerdictSettings.permutations})",
    )
    add_setting(
        verdict,
        "--bootstrap",
        VerdictSettings,
        "bootstrap",
        f"bootstrap resamples of the CIs (default: {VerdictSettings.bootstrap})",
    )
    add_setting(verdict, "--seed", VerdictSettings, "seed")
    add_setting(
        verdict,
        "--fdr",
        VerdictSettings,
        "fdr",
        "false-discovery rate of the per-question "
        f"decisions, written to VERDICT.questions.csv (default: {VerdictSettings.fdr:.2f})",
    )
    add_setting(
        verdict,
        "--fdr-method",
        VerdictSettings,
        "fdr_method",
        f"Benjamini-Hochberg, or an adaptive form: two-stage or storey (default: {VerdictSettings.fdr_method})",
    )
    verdict.add_argument("-o", "--output", type=Path, required=True, help="VERDICT.json")
    verdict.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..operations.verdict import VerdictInputs, write_verdict  # lazy: pulls scipy
    from ..report.verdict_text import decided, describe_verdict  # lazy: `lara --help` loads no report module

    detectors = tuple(d.strip() for d in args.detectors.split(",")) if args.detectors else None
    subsets = tuple(x.strip() for x in args.subsets.split(",")) if args.subsets else ()
    settings = settings_from(VerdictSettings, args, detectors=detectors, subsets=subsets)
    tables = {}
    for key, path, controls in (
        ("audited", args.scores, args.controls),
        ("reference", args.reference_scores, args.reference_controls),
        ("clean", args.clean, args.clean_controls),
    ):
        if path is not None:
            tables[key] = read_scored(path, controls)
    labels = read_labels(args.questions, required=False) if args.questions else {}
    splits = read_splits(args.questions) if args.questions else {}
    inputs = VerdictInputs(
        tables["audited"],
        reference=tables.get("reference"),
        clean=tables.get("clean"),
        labels=labels,
        splits=splits,
    )
    table = args.output.with_suffix(".questions.csv")
    verdict = write_verdict(inputs, settings, args.output, table)
    print(describe_verdict(verdict))
    print(f"wrote {args.output}, {table}")
    return 0 if decided(verdict) else NO_VERDICT_EXIT
