"""The blind baseline (SPEC §8.8) on the shipped testbed's questions: fold schemes, and the
within-group swap null against a planted confound.

    python benchmarks/bench_blind.py [--seeds 5] [--size-seeds 200] [--power-seeds 50] [--questions …/questions.jsonl]

Part 1 prints the out-of-fold AUC of the question-text classifier (char 2–4-gram TF-IDF + logistic
regression) on three labellings of the 300 labelled testbed questions — the template-matched
split (every member paired with a non-member of its own template), a confounded split (members
from the even templates, non-members from the odd ones) and random labels — under

* ``stratified``: SPEC §8.8's stratified 5-fold CV (what ``lara`` reports);
* ``grouped``: whole clusters of near-identical questions held out together;
* ``aligned``: each cluster's members and non-members dealt into the same folds.

No scheme gives ≈ 0.5 on the matched split *and* ≥ 0.8 on the confounded one without leaking on
random labels, which is why the SPEC's estimator is kept and read against its null.

Then the blind baseline of a two-model run's reports, timed as ``lara run`` computes them (the
second model's is the first's kept result: same questions, same labels).

Part 2 plants a confound: " Show your work." appended to a fraction f of the members only, on a
random 30 of the 40 templates (both labels of a template kept together) per seed (200 seeds at
f = 0, 50 at f = 0.3 and 0.5; ~25 min on 2 cores). For each f it prints how often the report warns — under the old rule (CI above 0.5) and under today's
(observed AUC above the 95th percentile of its null under label swaps within templates, or CI
above 0.5) — with the mean observed AUC and the mean null 95th percentile. f = 0 is the rule's
size (≤ 0.05 + Monte-Carlo error), f > 0 its power.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from probes.verdicts.blind import (
    blind_baseline,
    blind_classifier,
    blind_features,
    blind_predictions,
    near_duplicate_clusters,
)

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "probes" / "testbed" / "checkpoints" / "cpu-seed0" / "questions.jsonl"
N_FOLDS = 5


def grouped_folds(clusters: np.ndarray, seed: int) -> np.ndarray:
    ids = np.unique(clusters)
    fold_of = dict(zip(ids, np.random.default_rng(seed).permutation(len(ids)) % N_FOLDS))
    return np.array([fold_of[c] for c in clusters])


def aligned_folds(clusters: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    folds = np.empty(len(y), dtype=int)
    for c in np.unique(clusters):
        start = rng.integers(N_FOLDS)
        for label in (0, 1):
            idx = np.flatnonzero((clusters == c) & (y == label))
            rng.shuffle(idx)
            folds[idx] = (start + np.arange(len(idx))) % N_FOLDS
    return folds


def folds_out_of_fold(features, y: np.ndarray, folds: np.ndarray, seed: int) -> np.ndarray:
    out = np.empty(len(y))
    for k in np.unique(folds):
        train = folds != k
        out[~train] = blind_classifier(seed).fit(features[train], y[train]).predict_proba(features[~train])[:, 1]
    return out


def planted(rows: list[dict], fraction: float, seed: int) -> tuple[list[str], np.ndarray, list[str]]:
    """Texts, labels and templates of a random 30 of the 40 templates, " Show your work." appended to
    ``fraction`` of the members."""
    rng = np.random.default_rng(seed)
    templates = sorted({r["extra"]["template"] for r in rows})
    kept = set(rng.choice(templates, size=min(30, len(templates)), replace=False).tolist())
    chosen = [r for r in rows if r["extra"]["template"] in kept]
    texts = [
        r["question"] + (" Show your work." if r["label"] == 1 and rng.random() < fraction else "") for r in chosen
    ]
    return texts, np.array([int(r["label"]) for r in chosen]), [str(r["extra"]["template"]) for r in chosen]


def planted_confound(rows: list[dict], size_seeds: int, power_seeds: int, fractions: tuple[float, ...]) -> None:
    print(
        f'\nplanted confound (" Show your work." on a fraction f of members), 30 templates per seed; '
        f"{size_seeds} seeds at f = 0, {power_seeds} above"
    )
    print(f"  {'f':>4} {'seeds':>5} {'warns (CI > 0.5)':>17} {'warns (swap null)':>18} {'AUC':>6} {'null q95':>9}")
    for fraction in fractions:
        seeds = size_seeds if fraction == 0 else power_seeds
        old, new, aucs, q95 = [], [], [], []
        for seed in range(seeds):
            texts, y, groups = planted(rows, fraction, seed)
            b = blind_baseline(texts, y, seed=seed, n_bootstrap=200, groups=groups)
            old.append(b["auc"]["ci"][0] > 0.5)
            new.append(b["confounded"])
            aucs.append(b["auc"]["value"])
            q95.append(b["null"]["q95"])
        rate = np.mean(new)
        mc = 1.96 * np.sqrt(max(rate * (1 - rate), 0.05 * 0.95) / seeds)
        print(
            f"  {fraction:>4.1f} {seeds:>5} {np.mean(old):>17.3f} {rate:>11.3f} ± {mc:.3f} {np.mean(aucs):>6.2f} "
            f"{np.mean(q95):>9.2f}",
            flush=True,
        )


def two_model_reports(texts: list[str], y: np.ndarray, groups: list[str]) -> None:
    """The blind baseline of a run's two reports (RL model, SFT control: same questions and labels),
    timed as ``lara run`` computes them: the second is the first's kept result."""
    seconds = []
    for _ in ("rl", "sft_control"):
        start = time.perf_counter()
        result = blind_baseline(texts, y, groups=groups)
        seconds.append(time.perf_counter() - start)
    print(
        f"\nthe blind baseline of a two-model run's reports ({len(texts)} questions, "
        f"{result['null']['n_permutations']} swaps): first model {seconds[0]:.2f} s, second {seconds[1]:.3f} s; "
        f"the run spends {sum(seconds):.2f} s on it where computing it per model spent {2 * seconds[0]:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="fold seeds (and random labellings) averaged")
    parser.add_argument(
        "--size-seeds", type=int, default=200, help="seeds of the planted-confound part at f = 0 (0 = skip the part)"
    )
    parser.add_argument("--power-seeds", type=int, default=50, help="seeds of the planted-confound part at f > 0")
    parser.add_argument("--fractions", default="0,0.3,0.5", help="fractions f of members given the phrase")
    parser.add_argument(
        "--questions", type=Path, default=QUESTIONS, help="a testbed's questions.jsonl (default: the cpu testbed's)"
    )
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.questions.read_text().splitlines()]
    rows = [r for r in rows if r.get("label") is not None]
    texts = np.array([r["question"] for r in rows], dtype=object)
    template = np.array([r["extra"]["template"] for r in rows])
    matched = np.array([int(r["label"]) for r in rows])
    clusters = near_duplicate_clusters(list(texts))
    features = blind_features(list(texts))
    purity = sum(len(set(template[clusters == c])) == 1 for c in np.unique(clusters))
    print(
        f"{len(texts)} labelled testbed questions from {len(set(template))} templates; "
        f"{len(np.unique(clusters))} near-duplicate clusters, {purity} of them single-template"
    )
    labellings = {
        "matched split": lambda s: matched,
        "confounded split": lambda s: (template % 2 == 0).astype(int),
        "random labels": lambda s: np.random.default_rng(100 + s).permutation(matched),
    }
    t0 = time.perf_counter()
    print(f"\nout-of-fold AUC, mean [min, max] over {args.seeds} seeds")
    print(f"  {'labelling':<18} {'stratified (SPEC)':>22} {'grouped':>22} {'aligned':>22}")
    for name, labels_for in labellings.items():
        cells = {"stratified": [], "grouped": [], "aligned": []}
        for seed in range(args.seeds):
            y = labels_for(seed)
            cells["stratified"].append(roc_auc_score(y, blind_predictions(texts, y, N_FOLDS, seed)))
            cells["grouped"].append(
                roc_auc_score(y, folds_out_of_fold(features, y, grouped_folds(clusters, seed), seed))
            )
            cells["aligned"].append(
                roc_auc_score(y, folds_out_of_fold(features, y, aligned_folds(clusters, y, seed), seed))
            )
        print(f"  {name:<18} " + " ".join(f"{np.mean(v):>8.2f} [{min(v):.2f}, {max(v):.2f}]" for v in cells.values()))
    two_model_reports(list(texts), matched, [str(t) for t in template])
    if args.size_seeds:
        planted_confound(rows, args.size_seeds, args.power_seeds, tuple(float(f) for f in args.fractions.split(",")))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
