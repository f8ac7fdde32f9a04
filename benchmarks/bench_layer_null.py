"""LaRA's layer map against its nulls (SPEC §4.5 item 5): size on simulated nulls and on both
testbeds' SFT checkpoints, and a representation shift planted in real activations.

    python benchmarks/bench_layer_null.py [--runs runs/demo runs/demo-gsm] [--datasets 200] [--null-datasets 1000]

1. **Simulated nulls**: ``--null-datasets`` datasets per design of heavy-tailed (t, 3 df) metrics,
   3 × 8 layers AR(1)-correlated (ρ = 0.8), labels independent of the values. For each design the
   fraction of datasets in which *any* layer is called significant: by the max-|d| permutation
   null (what the report does), and by reading the level — a cell counts when its bootstrap 95 % CI
   of Cohen's d excludes 0 (what a report without a null invites).
2. **Testbeds** (``lara run`` directories holding ``rl/`` and ``sft_control/`` metrics): the full
   map of each checkpoint, and over ``--datasets`` random subsets of 30 of the 40 templates (both
   labels of a template kept) the fraction of SFT subsets with any layer significant.
3. **Planted shift**: the SFT checkpoint's own cached activations (``sft_control/acts.h5``), a
   fixed direction of norm ``s`` × the median blanking shift added to the members' original-question
   activations at layers 1 and 3; metrics recomputed by the real kernel; the layers the map reports.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from cache.store import ActivationStore
from generation.records import read_sets
from probes.evaluation.effect import cohens_d_ci
from probes.evaluation.layer_null import layer_null
from probes.lara.metrics_chunks import metrics_of_chunk, read_chunk
from probes.lara.metrics_file import MetricsFile
from probes.lara.protocol import compress
from probes.lara.sets import layout
from probes.questions.reading import match_group, read_labels
from probes.scores import align_labels

ROOT = Path(__file__).resolve().parents[1]
PERMUTATIONS = 500
PLANTED_LAYERS = (1, 3)


def simulated(rng: np.random.Generator, n: int, n_layers: int = 8, rho: float = 0.8) -> np.ndarray:
    noise = rng.standard_t(3, size=(n, 3, n_layers))
    out = np.empty_like(noise)
    out[:, :, 0] = noise[:, :, 0]
    for layer in range(1, n_layers):
        out[:, :, layer] = rho * out[:, :, layer - 1] + np.sqrt(1 - rho**2) * noise[:, :, layer]
    return out


def simulated_nulls(datasets: int) -> None:
    print(f"\n1. simulated nulls ({datasets} datasets per design; 3 metrics x 8 correlated heavy-tailed layers)")
    print(f"  {'members / non-members':<22} {'any layer, permutation null':>28} {'any cell, level (CI excl. 0)':>29}")
    rng = np.random.default_rng(0)
    for n1, n0 in ((150, 150), (40, 120), (150, 50)):
        y = np.r_[np.ones(n1, int), np.zeros(n0, int)]
        null_hits, level_hits = [], []
        for k in range(datasets):
            values = simulated(rng, len(y))
            null_hits.append(bool(layer_null(values, y, n_permutations=PERMUTATIONS, seed=k)["significant_layers"]))
            _, lo, hi = cohens_d_ci(values, y.astype(bool), n_resamples=200, seed=k)
            level_hits.append(bool(((lo > 0) | (hi < 0)).any()))
        print(f"  {f'{n1} / {n0}':<22} {_rate(null_hits):>28} {_rate(level_hits):>29}")


def _rate(hits: list[bool]) -> str:
    rate = float(np.mean(hits))
    return f"{rate:.3f} ± {1.96 * np.sqrt(max(rate * (1 - rate), 0.0475) / len(hits)):.3f}"


def testbed(run: Path, questions: Path, datasets: int) -> None:
    labels = read_labels(questions)
    groups = {i: match_group(r) for i, r in _records(questions).items()}
    print(f"\n2. {run} ({questions.parent.name})")
    for name in ("rl", "sft_control"):
        mf = MetricsFile.read(run / name / "metrics.h5")
        y, _ = align_labels(mf.ids, labels)
        keep = (y >= 0) & np.isfinite(mf.metrics).all(axis=(1, 2))
        values, yk = compress(mf.metrics[keep]), y[keep]
        ids = [i for i, k in zip(mf.ids, keep) if k]
        g = np.array([groups[i] for i in ids])
        full = layer_null(values, yk, g, PERMUTATIONS, 0)
        line = (
            f"  {name:<12} all {len(yk)} questions: significant layers {full['significant_layers'] or 'none'}, "
            f"max |d| {full['observed_max']:.2f} vs null 95th pct {full['null_max']:.2f} (p {full['p_global']:.3f})"
        )
        if name == "sft_control":
            rng = np.random.default_rng(1)
            templates = np.unique(g)
            hits = []
            for k in range(datasets):
                chosen = np.isin(g, rng.choice(templates, size=min(30, len(templates)), replace=False))
                hits.append(
                    bool(layer_null(values[chosen], yk[chosen], g[chosen], PERMUTATIONS, k)["significant_layers"])
                )
            line += f"\n  {'':<12} {datasets} subsets of 30 templates: any layer significant in {_rate(hits)}"
        print(line)


def _records(path: Path) -> dict[str, dict]:
    import json

    return {str(d["id"]): d for d in (json.loads(line) for line in path.read_text().splitlines() if line.strip())}


def planted_shift(run: Path, questions: Path) -> None:
    """Members' original-question activations shifted along one direction at PLANTED_LAYERS."""
    sets_path, acts = run / "sets.jsonl", run / "sft_control" / "acts.h5"
    records = read_sets(sets_path)
    layouts = [layout(r, 2) for r in records]
    store = ActivationStore(acts)
    labels_of = read_labels(questions)
    y = np.array([-1 if labels_of.get(r.question.id) is None else labels_of[r.question.id] for r in records])
    k1 = max(lay.k for lay in layouts) + 1
    m = max(lay.m for lay in layouts)
    rows, index = read_chunk(layouts, store, store.layer_labels, k1, m)
    delta = rows[index.u[:, 0]] - rows[index.w[:, 0]]  # [n, L, d] originals' blanking shifts
    scale = float(np.median(np.linalg.norm(delta, axis=-1)))
    direction = np.random.default_rng(7).normal(size=rows.shape[-1])
    direction /= np.linalg.norm(direction)
    # a member's original whose text appears once in the chunk (a text shared with another set
    # would be shifted for both, so those are skipped)
    own = [q for q in np.flatnonzero(y == 1) if (index.u == index.u[q, 0]).sum() == 1]
    print(
        f"\n3. planted shift in {acts} (median blanking shift {scale:.2f}; layers {PLANTED_LAYERS} of "
        f"{', '.join(store.layer_labels)} shifted in {len(own)} members)"
    )
    for strength in (0.0, 0.02, 0.05, 0.1, 0.25):
        shifted = rows.copy()
        for layer in PLANTED_LAYERS:
            shifted[index.u[own, 0], layer] += strength * scale * direction
        result = metrics_of_chunk(shifted, index, 1e-8)["metrics"]
        keep = (y >= 0) & np.isfinite(result).all(axis=(1, 2))
        found = layer_null(compress(result[keep]), y[keep], None, PERMUTATIONS, 0)
        print(
            f"  shift {strength:.2f} x median: layers found {found['significant_layers'] or 'none'} "
            f"(max |d| {found['observed_max']:.2f}, null 95th pct {found['null_max']:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs",
        nargs="*",
        type=Path,
        default=[ROOT / "runs/demo", ROOT / "runs/demo-gsm"],
        help="lara run directories of the two testbeds (made by `lara run configs/demo.yaml` and configs/demo-gsm.yaml)",
    )
    parser.add_argument("--datasets", type=int, default=200, help="testbed subsets")
    parser.add_argument("--null-datasets", type=int, default=1000, help="simulated null datasets per design")
    args = parser.parse_args()
    t0 = time.perf_counter()
    simulated_nulls(args.null_datasets)
    for run in args.runs:
        if not (run / "sft_control" / "metrics.h5").is_file():
            print(f"\n{run}: no sft_control/metrics.h5 (run `lara run` first); skipped")
            continue
        questions = Path(
            next(
                line.split(":", 1)[1].strip()
                for line in (run / "config.resolved.yaml").read_text().splitlines()
                if line.startswith("questions:")
            )
        )
        testbed(run, questions, args.datasets)
        planted_shift(run, questions)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
