"""``lara info``: what an activation store holds and how it was made."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import command_parser


def register(sub: Any) -> None:
    info = command_parser(
        sub,
        "info",
        "show what an activation store holds and how it was made",
        "examples:\n  lara info acts.h5\n  lara info runs/demo/rl/acts.h5\n",
    )
    info.add_argument("store", type=Path)
    info.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cache.store import ActivationStore  # lazy: pulls h5py

    store = ActivationStore(args.store)
    p = store.provenance
    model = p.get("model", {})
    rows = [
        ("rows", f"{len(store)} texts x {len(store.layer_labels)} layers x d={store.d_model} ({store.storage_dtype})"),
        ("layers", ", ".join(store.layer_labels)),
        ("model", f"{model.get('source')} ({model.get('class')}, {model.get('n_blocks')} blocks)"),
        ("weights", f"{p.get('weights_fingerprint')} ({p.get('fingerprint_method')})"),
        ("tokenizer", p.get("tokenizer_fingerprint")),
        ("backend", f"{p.get('backend')} {p.get('backend_flags')}"),
        ("pooling", f"{p.get('pooling')}; prompt {p.get('prompt')}"),
        ("dtype", f"compute {p.get('compute_dtype')}, storage {p.get('storage_dtype')}"),
        (
            "written",
            f"{p.get('created_at')} by lara-probes {p.get('toolkit_version')} (schema {p.get('schema_version')})",
        ),
    ]
    made = p.get("distributed")
    if made:
        rows.append(
            (
                "made by",
                f"{made['world_size']} processes (torch.distributed): rows per rank "
                f"{', '.join(map(str, made['rows_per_rank']))}; devices {', '.join(made['devices'])}",
            )
        )
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
