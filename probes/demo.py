"""``lara demo``: the main job on the built-in default, offline.

Until the full pipeline lands, this caches the activations of a small built-in LaRA-style
question group (originals, similars, [BLANK]ed variants, paraphrases) on the built-in tiny
model and summarises the store.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DEMO_TEXTS: tuple[str, ...] = (
    "A train travels 120 km in 2 hours. What is its average speed in km/h?",
    "A train travels 150 km in 3 hours. What is its average speed in km/h?",
    "A bus travels 90 km in 2 hours. What is its average speed in km/h?",
    "A train travels [BLANK] km in 2 hours. What is its average speed in km/h?",
    "A train travels [BLANK] km in 3 hours. What is its average speed in km/h?",
    "A bus travels [BLANK] km in 2 hours. What is its average speed in km/h?",
    "In 2 hours a train covers [BLANK] km. Find its average speed in km/h.",
    "What average speed, in km/h, does a train have if it covers [BLANK] km in 2 hours?",
    "Ava has 12 apples and buys 7 more. How many apples does Ava have now?",
    "Ben has 15 apples and buys 4 more. How many apples does Ben have now?",
    "Ava has [BLANK] apples and buys 7 more. How many apples does Ava have now?",
    "Ben has [BLANK] apples and buys 4 more. How many apples does Ben have now?",
    "After buying 7 more apples, how many does Ava have if she started with [BLANK]?",
    "Solve for $x$: $3x + 5 = 20$.",
    "Solve for $x$: $4x + 2 = 18$.",
    "Solve for $x$: $[BLANK]x + 5 = 20$.",
    "Find $x$ such that $[BLANK]x + 5 = 20$.",
    "What is the area of a rectangle with sides 4 cm and 9 cm?",
    "What is the area of a rectangle with sides [BLANK] cm and 9 cm?",
    "A rectangle has sides of [BLANK] cm and 9 cm. Compute its area.",
)


def run_demo(out_dir: str | Path, backend: str = "hf", progress: bool = True) -> str:
    """Cache :data:`DEMO_TEXTS` on the built-in tiny model under ``out_dir``; return a summary."""
    from cache import ActivationStore, CacheConfig, ExtractionConfig, ModelConfig
    from cache.runner import run_cache
    from cache.toymodels import ensure_toy_model

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = ensure_toy_model()
    texts_path = out_dir / "texts.jsonl"
    texts_path.write_text("".join(json.dumps({"text": t}) + "\n" for t in DEMO_TEXTS), encoding="utf-8")
    config = CacheConfig(
        model=ModelConfig(source=str(model_dir), device="cpu"),
        extraction=ExtractionConfig(backend=backend, layers=("embed", "all", "final_norm")),
    )
    summary = run_cache(DEMO_TEXTS, out_dir / "acts.h5", config, progress=progress)
    store = ActivationStore(summary.output)
    acts = store.get(list(DEMO_TEXTS)).astype(np.float64)  # [n, L, d]
    norms = np.linalg.norm(acts, axis=-1).mean(axis=0)
    lines = [
        f"model: built-in tiny model at {model_dir}",
        f"texts: {texts_path}",
        summary.describe(),
        "mean pooled-activation L2 norm per layer:",
        "  " + "  ".join(f"{label}={norm:.3f}" for label, norm in zip(store.layer_labels, norms)),
        f"read rows back in Python: ActivationStore({str(summary.output)!r}).get(texts)  # -> [n, L, d]",
    ]
    return "\n".join(lines)
