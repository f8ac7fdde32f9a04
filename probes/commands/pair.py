"""``lara questions pair``: members + non-members (+ clean reference) → one labelled questions file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generation.records import read_questions

from ..errors import InputError
from ..questions.importing import provenance_path, read_provenance, write_question_file
from ..questions.pairing import balance_table, format_balance, pair_sets
from ..scores import match_group
from ..verdicts.blind import blind_baseline


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
    import numpy as np

    if not 0 < args.near <= 1:
        raise InputError(f"--near {args.near}: give a ratio in (0, 1], e.g. 0.9")
    inputs = {"members": args.members, "non_members": args.nonmembers, "clean_ref": args.clean_ref}
    sets = {name: read_questions(path) for name, path in inputs.items() if path is not None}
    paired = pair_sets(sets, near=args.near)
    print(
        f"{len(paired.questions)} questions kept of {sum(len(v) for v in sets.values())}; "
        f"{len(paired.duplicates)} duplicate(s) removed (exact, or ratio >= {args.near:g})"
    )
    for dup in paired.duplicates[:20]:
        print(f"  removed: {dup.describe()}")
    if len(paired.duplicates) > 20:
        print(f"  … and {len(paired.duplicates) - 20} more (all listed in {provenance_path(args.output)})")
    kept = {name: [q for q in paired.questions if _set_of(q) == name] for name in sets}
    balance = balance_table(kept)
    print("balance:\n" + format_balance(balance))
    labelled = [q for q in paired.questions if q.label is not None]
    blind = blind_baseline(
        [q.question for q in labelled],
        np.array([q.label for q in labelled]),
        seed=args.seed,
        groups=[match_group(q.extra) for q in labelled],
    )
    if "error" in blind:
        print(f"blind baseline: {blind['error']}")
    else:
        auc = blind["auc"]
        null = blind["null"]
        print(
            f"blind baseline (question text only, out-of-fold): AUC {auc['value']:.2f} [{auc['ci'][0]:.2f}, {auc['ci'][1]:.2f}]; "
            f"null under swaps within matched groups ({null['groups']}): 95th percentile {null['q95']:.2f}, p = {null['p']:.3f}"
        )
        if blind["warning"]:
            print(f"warning: {blind['warning']}")
    record = {
        "pairing": {
            "inputs": {k: str(v) for k, v in inputs.items() if v is not None},
            "near": args.near,
            "duplicates": [vars(d) for d in paired.duplicates],
            "renamed_ids": paired.renamed,
            "balance": balance,
            "blind_baseline": {k: blind.get(k) for k in ("auc", "null", "confounded", "warning", "error")},
        },
        "provenance": [p for path in inputs.values() if path is not None for p in (read_provenance(path) or [])],
    }
    write_question_file(paired.questions, args.output, record)
    print(f"wrote {args.output}, {provenance_path(args.output)}")
    return 0


def _set_of(q: Any) -> str:
    return "members" if q.label == 1 else "non_members" if q.label == 0 else "clean_ref"
