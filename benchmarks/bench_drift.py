"""The representation-drift map (SPEC §10) of a testbed, beside LaRA's, with their nulls.

    python benchmarks/bench_drift.py [--config configs/demo.yaml] [--permutations 1000] [--subsets 200] [--size 50]

Reads the two activation stores the run wrote (the audited model's and the reference's, the same
texts): no forward pass (``lara run`` first where it has not run). Prints:

* per layer, the drift 1 − cos(h_audited, h_reference) of the questions' pooled vectors: members'
  and non-members' means, Cohen's d, AUC, and the family-wise-adjusted p of the max-|d|
  permutation null (labels permuted within matched groups); beside it LaRA's map from the run's
  report (the smallest adjusted p of the layer's three metrics);
* the placebos: the share of random halves of the non-members with any significant layer (≈ α
  when the null holds), and the reference against itself (every drift must read 0);
* the drift as a score (each question against its own similars' drift, layer by layer, robust z
  averaged): AUC with a 95 % CI; and the within-question test of the mean drift against the
  similars' (no reference needed beyond the one the drift is taken to): within-AUC, p, and its
  rejection rate on ``--subsets`` random subsets of ``--size`` non-members (size) and members (power).

Writes ``bench/drift.json`` in the run directory.

``--stores-only`` needs no finished run (the real-model testbed's takes a working day on 2 CPU
cores): the labelled questions' perturbation sets from the config's offline generator (or the
run's ``sets.jsonl`` where it exists), then only the questions and their similars pooled by both
models with the config's extraction settings into ``bench/drift-stores/<model>.h5`` in the run
directory (resumable; 1,800 texts a model on the real-model testbed). LaRA's column then reads
from the run's report where there is one, else "–".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
from bench_ceiling import save
from bench_verdict import ensure_run

from cache.config import CacheConfig
from cache.runner import run_cache
from cache.store import ActivationStore
from generation.pipeline import make_generator
from generation.records import read_questions, read_sets
from probes.evaluation import evaluate
from probes.lara.drift import drift_map, drift_scores, pooled_drift, question_drift
from probes.pipeline import load_run_config
from probes.questions.reading import match_group
from probes.report.verdict_text import left_out_text
from probes.responders.model_settings import activation_config
from probes.verdicts.modes import within_test

ROOT = Path(__file__).resolve().parents[1]


def rejection_rate(original, controls, ids, draws, size, settings, seed) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        rows = rng.choice(ids, size=size, replace=False)
        hits += within_test(original[rows], controls[rows], settings)["p_value"] < settings.alpha
    return hits / draws


def labelled_sets(config, questions: dict) -> list:
    """The labelled questions' perturbation sets: the run's where it wrote them, else the config's generator's."""
    path = Path(config.run_dir) / "sets.jsonl"
    if path.is_file():
        return [s for s in read_sets(path) if questions[s.question.id].label in (0, 1)]
    generator = make_generator(config.generation)
    return [generator.generate(q) for q in questions.values() if q.label in (0, 1)]


def pooled_stores(config, sets: list) -> tuple[ActivationStore, ActivationStore]:
    """Both models' stores of the questions and their similars only (``--stores-only``)."""
    texts = list(dict.fromkeys(t for s in sets for t in [s.question.question, *s.similars] if t))
    out = Path(config.run_dir) / "bench" / "drift-stores"
    out.mkdir(parents=True, exist_ok=True)
    models = dict(config.models())
    stores = []
    for name in (config.name, config.reference_name()):
        run_cache(
            texts,
            out / f"{name}.h5",
            CacheConfig(model=activation_config(models[name]), extraction=config.extraction),
            progress=True,
        )
        stores.append(ActivationStore(out / f"{name}.h5"))
    return stores[0], stores[1]


def run(config, args: argparse.Namespace) -> dict:
    run_dir = Path(config.run_dir)
    questions = {q.id: q for q in read_questions(config.questions)}
    if args.stores_only:
        sets = labelled_sets(config, questions)
        audited, reference = pooled_stores(config, sets)
    else:
        ensure_run(config)
        audited = ActivationStore(run_dir / config.name / "acts.h5")
        reference = ActivationStore(run_dir / config.reference_name() / "acts.h5")
        sets = labelled_sets(config, questions)
    drift = question_drift(sets, audited, reference)
    labels = np.array([questions[i].label for i in drift.ids])
    groups = [match_group(questions[i].extra) for i in drift.ids]
    found = drift_map(drift.original, labels, drift.layer_labels, groups, args.permutations, args.seed)
    report = run_dir / config.name / "report" / "report.json"
    lara = json.loads(report.read_text()).get("layers", {}) if report.is_file() else {}
    itself = pooled_drift(reference, reference, [s.question.question for s in sets[:200]])
    found["self_reference_max"] = float(np.nanmax(np.abs(itself)))
    score = evaluate(labels, drift_scores(drift.original, drift.controls), seed=args.seed)
    found["score_auc"] = {**score["auc"], "n_nonfinite": score["n_nonfinite"]}  # NaN: fewer than 2 similars
    mean_orig, mean_ctl = drift.original.mean(axis=1), drift.controls.mean(axis=2)
    settings = dataclasses.replace(config.verdict, permutations=2000, bootstrap=200)
    whole = within_test(mean_orig, mean_ctl, settings)
    members, non_members = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    quick = dataclasses.replace(settings, bootstrap=1)
    found["within"] = {
        "within_auc": whole["within_auc"],
        "p_value": whole["p_value"],
        "left_out": whole["left_out"],
        "size": rejection_rate(mean_orig, mean_ctl, non_members, args.subsets, args.size, quick, args.seed),
        "power": rejection_rate(mean_orig, mean_ctl, members, args.subsets, args.size, quick, args.seed),
    }
    print(
        f"{config.name} against {config.reference_name()} ({Path(config.questions).parent.name}): {found['n']} questions "
        f"({sum(found['left_out'].values())} without a finite drift left out), {len(drift.layer_labels)} layers, "
        f"{args.permutations} permutations ({found['permutation']})"
    )
    null = lara.get("null") or {}
    lara_split = lara.get("placebo_split")
    lara_placebo = f"{lara_split['any_significant_rate']:.2f}" if lara_split else "–"
    print(
        f"  {'layer':<10} {'drift members':>14} {'non-members':>12} {'d':>7} {'AUC':>6} {'p (adj.)':>9}   LaRA: p (adj.)"
    )
    for j, layer in enumerate(drift.layer_labels):
        lara_p = f"{null['p_layer'][j]:.3f}" if null else "–"
        print(
            f"  {layer:<10} {found['mean_drift']['members'][j]:>14.5f} {found['mean_drift']['non_members'][j]:>12.5f} "
            f"{found['d'][j]:>7.2f} {found['auc'][j]:>6.3f} {found['p_layer'][j]:>9.3f}   {lara_p}"
        )
    print(
        f"  significant layers: drift {found['significant_layers'] or 'none'}, LaRA {(null.get('significant_layers') or 'none') if null else '– (no run report)'}; "
        f"placebo (halves of the non-members) any layer significant: drift {found['placebo']['any_significant_rate']:.2f}, "
        f"LaRA {lara_placebo}; "
        f"the reference against itself: max drift {found['self_reference_max']:.1e}"
    )
    w = found["within"]
    print(
        f"  as a score (each question against its similars, robust z over layers): AUC {found['score_auc']['value']:.3f} "
        f"[{found['score_auc']['ci'][0]:.3f}, {found['score_auc']['ci'][1]:.3f}] ({found['score_auc']['n_nonfinite']} "
        f"left out); within-question test of the mean drift: within-AUC {w['within_auc']['value']:.3f} "
        f"[{w['within_auc']['ci'][0]:.3f}, {w['within_auc']['ci'][1]:.3f}], p = {w['p_value']:.4f}, left out "
        f"{left_out_text(w)}; on {args.subsets} subsets of {args.size}: size {w['size']:.3f} (non-members), "
        f"power {w['power']:.3f} (members)"
    )
    save(config, "drift", found)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--subsets", type=int, default=200)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stores-only", action="store_true", help="pool the questions and similars only (no run)")
    args = parser.parse_args()
    run(load_run_config(args.config), args)


if __name__ == "__main__":
    main()
