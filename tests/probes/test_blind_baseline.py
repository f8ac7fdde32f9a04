"""The blind baseline (SPEC §8.8): equal to a plain scikit-learn computation; at chance on random
labels; far above it, with the warning, on a confounded split; and, in the testbed's matched design,
read against its null under label swaps within matched groups — a planted confound warns, no
confound does not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from probes.evaluation.permutation import swap_labels
from probes.testbed.problems import make_splits
from probes.verdicts.blind import blind_baseline, blind_predictions

ROOT = Path(__file__).resolve().parents[2]


def test_out_of_fold_predictions_equal_a_plain_scikit_learn_computation():
    """TF-IDF fitted once on every text (no label seen), logistic regression cross-validated."""
    splits = make_splits(200, 40, 10, seed=1)
    texts = [p.question for p in splits.members + splits.non_members]
    y = np.r_[np.ones(40, int), np.zeros(40, int)]
    features = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True).fit_transform(texts)
    expected = cross_val_predict(
        LogisticRegression(max_iter=1000, random_state=0),
        features,
        y,
        cv=StratifiedKFold(5, shuffle=True, random_state=0),
        method="predict_proba",
    )[:, 1]
    np.testing.assert_allclose(blind_predictions(texts, y), expected, rtol=1e-12)


def test_label_swaps_stay_inside_mixed_groups_and_mix_the_rest_freely():
    y = np.array([1, 0, 1, 0, 0, 1, 1, 1, 0, 0])
    groups = np.array([0, 0, 1, 1, 1, 2, 3, 4, 5, 6])  # groups 0 and 1 hold both labels; 2–6 are single
    seen_rest = set()
    for seed in range(200):
        swapped = swap_labels(y, groups, np.random.default_rng(seed))
        for g in (0, 1):  # each mixed group keeps its own labels, in some order
            assert sorted(swapped[groups == g]) == sorted(y[groups == g])
        rest = groups >= 2
        assert sorted(swapped[rest]) == sorted(y[rest])
        seen_rest.add(tuple(swapped[rest]))
    assert len(seen_rest) == 10  # C(5, 3) arrangements of the five questions in no mixed group, all reached


@pytest.mark.slow
def test_no_warning_without_a_confound_and_a_warning_on_a_confounded_split():
    splits = make_splits(500, 150, 10, seed=0)
    pool = splits.members + splits.non_members
    texts = [p.question for p in pool]
    # labels independent of the text (members and non-members drawn alike): at chance, rarely a warning
    runs = [
        blind_baseline(
            texts,
            np.random.default_rng(s).permutation(np.r_[np.ones(150), np.zeros(150)]),
            n_bootstrap=200,
            n_permutations=60,
        )
        for s in range(12)
    ]
    assert 0.44 < np.mean([r["auc"]["value"] for r in runs]) < 0.53
    # the CI rule alone (nominal 2.5 %) and the swap null's (nominal 5 %: ≤ 2 of 12 holds with
    # probability 0.98 at that size)
    assert (
        sum(r["auc"]["ci"][0] > 0.5 for r in runs) <= 1
        and sum(r["auc"]["ci"][0] < 0.5 < r["auc"]["ci"][1] for r in runs) >= 9
    )
    assert sum(r["confounded"] for r in runs) <= 2
    # members from half of the templates, non-members from the other half
    templates = sorted({p.template for p in pool})
    first = set(templates[: len(templates) // 2])
    members = [p for p in pool if p.template in first]
    non_members = [p for p in pool if p.template not in first]
    y = np.r_[np.ones(len(members)), np.zeros(len(non_members))]
    confounded = blind_baseline([p.question for p in members + non_members], y)
    assert (
        confounded["auc"]["value"] >= 0.8
        and confounded["confounded"]
        and "visible without the model" in confounded["warning"]
    )
    assert (
        roc_auc_score(y, blind_predictions([p.question for p in members + non_members], y))
        == confounded["auc"]["value"]
    )


def test_an_exactly_matched_split_is_anti_predictable_under_cross_validation():
    """Pinned finding: the testbed pairs every member with a non-member of its own template, so each
    template is exactly balanced. Holding a member out leaves its template non-member-heavy in
    training (and vice versa), so out-of-fold predictions are anti-correlated with the labels:
    the blind AUC falls far *below* 0.5 — and so does its null under swaps within templates."""
    splits = make_splits(500, 150, 10, seed=0)
    pool = splits.members + splits.non_members
    matched = blind_baseline(
        [p.question for p in pool],
        np.r_[np.ones(150), np.zeros(150)],
        n_permutations=50,
        groups=[p.template for p in pool],
    )
    assert matched["auc"]["ci"][1] < 0.5 and not matched["confounded"] and matched["matched_design"]
    assert matched["null"]["q95"] < 0.35 and matched["null"]["groups"] == "declared pair/template"


def _testbed_rows() -> list[dict]:
    rows = [
        json.loads(line)
        for line in (ROOT / "probes/testbed/checkpoints/cpu-seed0/questions.jsonl").read_text().splitlines()
    ]
    return [r for r in rows if r.get("label") is not None]


def _planted(rows: list[dict], fraction: float, seed: int) -> tuple[list[str], np.ndarray, list[str]]:
    """A random 30 of the testbed's 40 templates (both labels of each), " Show your work." appended to
    ``fraction`` of the members only."""
    rng = np.random.default_rng(seed)
    kept = set(rng.choice(sorted({r["extra"]["template"] for r in rows}), size=30, replace=False).tolist())
    chosen = [r for r in rows if r["extra"]["template"] in kept]
    texts = [
        r["question"] + (" Show your work." if r["label"] == 1 and rng.random() < fraction else "") for r in chosen
    ]
    return texts, np.array([r["label"] for r in chosen]), [str(r["extra"]["template"]) for r in chosen]


@pytest.mark.slow
def test_a_planted_confound_in_the_matched_testbed_warns_and_no_confound_does_not():
    """Issue 34 item 2. Half of the members carry " Show your work.": the stratified CV reads ≈ 0.57
    with a CI touching 0.5 (no warning under the CI rule), far above its null (95th pct ≈ 0.25).
    Without the phrase the rule warns in ≤ 5 % of seeds (here ≤ 1 of 20; 200 seeds in
    benchmarks/bench_blind.py)."""
    rows = _testbed_rows()
    for seed in range(2):
        texts, y, groups = _planted(rows, 0.5, seed)
        confounded = blind_baseline(texts, y, seed=seed, n_bootstrap=200, n_permutations=60, groups=groups)
        assert confounded["confounded"] and confounded["auc"]["value"] > confounded["null"]["q95"] + 0.15
        assert "beyond what the design explains" in confounded["warning"] and confounded["null"]["p"] < 0.05
    # a lighter dose, where the CI never leaves 0.5 from below, warns too
    texts, y, groups = _planted(rows, 0.3, 0)
    light = blind_baseline(texts, y, n_bootstrap=200, n_permutations=60, groups=groups)
    assert light["auc"]["ci"][0] < 0.5 and light["confounded"]
    # without a declared group, clusters of near-identical texts stand in for the templates
    texts, y, _ = _planted(rows, 0.5, 0)
    clustered = blind_baseline(texts, y, n_bootstrap=100, n_permutations=60)
    assert clustered["null"]["groups"] == "clusters of near-identical texts" and clustered["confounded"]
    texts, y, _ = _planted(rows, 0.0, 0)
    assert not blind_baseline(texts, y, n_bootstrap=100, n_permutations=60)["confounded"]
    warned = [
        blind_baseline(
            *_planted(rows, 0.0, seed)[:2],
            seed=seed,
            n_bootstrap=100,
            n_permutations=40,
            groups=_planted(rows, 0.0, seed)[2],
        )["confounded"]
        for seed in range(20)
    ]
    assert sum(warned) <= 1


def test_the_same_inputs_are_computed_once_and_any_change_is_computed_again(monkeypatch):
    """Every model of a run shares its questions and labels: the report's blind baseline is fitted
    once per process, not once per model, and equals a fresh computation; a changed label, group,
    seed or count is computed anew, and a caller editing its copy does not edit the next one's."""
    import probes.verdicts.blind as blind

    monkeypatch.setattr(blind, "_memo", type(blind._memo)())
    fits = []
    original = blind.blind_classifier
    monkeypatch.setattr(blind, "blind_classifier", lambda seed=0: fits.append(seed) or original(seed))
    splits = make_splits(200, 20, 10, seed=2)
    texts = [p.question for p in splits.members + splits.non_members]
    y = np.r_[np.ones(20, int), np.zeros(20, int)]
    groups = [f"g{i % 20}" for i in range(40)]
    first = blind_baseline(texts, y, n_bootstrap=50, n_permutations=10, groups=groups)
    assert len(fits) == 5 * (1 + 10)  # the observed split and ten swaps, five folds each
    first["auc"]["value"] = -1.0
    again = blind_baseline(texts, list(y), n_bootstrap=50, n_permutations=10, groups=groups)
    assert len(fits) == 55 and again["auc"]["value"] != -1.0
    fresh = blind._computed(texts, y, 5, 0, 50, groups, 10)
    assert json.dumps(again, sort_keys=True) == json.dumps(fresh, sort_keys=True)
    fits.clear()
    changes = [
        {"labels": y[::-1].copy()},
        {"groups": [f"g{i % 10}" for i in range(40)]},
        {"seed": 1},
        {"n_permutations": 11},
        {"n_bootstrap": 51},
    ]
    for change in changes:
        args = {"labels": y, "n_bootstrap": 50, "n_permutations": 10, "groups": groups, **change}
        before = len(fits)
        blind_baseline(texts, **args)
        assert len(fits) > before, change
