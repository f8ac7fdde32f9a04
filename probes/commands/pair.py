"""``lara questions pair``: members + non-members (+ clean reference) → one labelled questions file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..operations.pair_questions import PairSettings, pair_questions
from ..questions.pairing import format_balance
from ..questions.question_files import provenance_path


def register_pair(actions: Any) -> None:
    pair = actions.add_parser(
        "pair",
        help="members + non-members (+ clean reference) -> one labelled questions file, "
        "duplicates removed, balance and blind baseline shown",
    )
    pair.add_argument(
        "--members", type=Path, required=True, help="questions JSONL of the RL-trained questions (label 1)"
    )
    pair.add_argument(
        "--nonmembers", type=Path, required=True, help="questions JSONL of questions never trained on (label 0)"
    )
    pair.add_argument(
        "--clean-ref", type=Path, help="questions JSONL of a clean reference pool (split clean_ref, no label)"
    )
    pair.add_argument(
        "--near",
        type=float,
        default=0.9,
        help="rapidfuzz ratio (0–1) at or above which two questions are near duplicates (default: 0.9)",
    )
    pair.add_argument(
        "--seed", type=int, default=0, help="seed of the blind baseline's folds and bootstrap (default: 0)"
    )
    pair.add_argument(
        "-o", "--output", type=Path, required=True, help="labelled questions JSONL (provenance in OUTPUT.meta.json)"
    )
    pair.set_defaults(handler=handle_pair)


def handle_pair(args: argparse.Namespace) -> int:
    inputs = {"members": args.members, "non_members": args.nonmembers, "clean_ref": args.clean_ref}
    done = pair_questions(inputs, args.output, PairSettings(near=args.near, seed=args.seed))
    duplicates = done.paired.duplicates
    print(
        f"{len(done.paired.questions)} questions kept of {done.read}; "
        f"{len(duplicates)} duplicate(s) removed (exact, or ratio >= {args.near:g})"
    )
    for dup in duplicates[:20]:
        print(f"  removed: {dup.describe()}")
    if len(duplicates) > 20:
        print(f"  … and {len(duplicates) - 20} more (all listed in {provenance_path(args.output)})")
    print("balance:\n" + format_balance(done.balance))
    print(_blind_line(done.blind))
    if "error" not in done.blind and done.blind.get("warning"):
        print(f"warning: {done.blind['warning']}")
    print(f"wrote {', '.join(str(f) for f in done.written)}")
    return 0


def _blind_line(blind: dict[str, Any]) -> str:
    """The blind baseline's figures in one line (or why there are none)."""
    if "error" in blind:
        return f"blind baseline: {blind['error']}"
    auc, null = blind["auc"], blind["null"]
    return (
        f"blind baseline (question text only, out-of-fold): AUC {auc['value']:.2f} [{auc['ci'][0]:.2f}, {auc['ci'][1]:.2f}]; "
        f"null under swaps within matched groups ({null['groups']}): 95th percentile {null['q95']:.2f}, p = {null['p']:.3f}"
    )
