"""Fusion (SPEC §6) against hand and naive computations."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probes.errors import ConfigError, InputError
from probes.fusion import rank_mix, robust_z_mean, stacking
from probes.lara.protocol import fold_assignment

MAD = 1.0 / statistics.NormalDist().inv_cdf(0.75)


def naive_robust(col):
    med = statistics.median(col)
    return med, MAD * statistics.median([abs(v - med) for v in col])


def test_robust_z_mean_matches_naive_with_cross_fitting():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(30, 2)) * [1.0, 5.0] + [0.0, 3.0]
    reference = np.zeros(30, bool)
    reference[10:] = True
    keys = [f"q{i}" for i in range(30)]
    got = robust_z_mean(scores, reference, keys, weights=np.array([3.0, 1.0]), n_folds=4)
    folds = fold_assignment(keys[10:], 4, 0)
    for i in range(30):
        pool = [j for j in range(10, 30) if not reference[i] or folds[keys[j]] != folds[keys[i]]]
        z = []
        for c in range(2):
            med, scale = naive_robust([scores[j, c] for j in pool])
            z.append((scores[i, c] - med) / (scale + 1e-8))
        assert got[i] == pytest.approx(0.75 * z[0] + 0.25 * z[1], rel=1e-12)


def test_rank_mix_by_hand():
    a = np.array([0.1, 0.9, 0.5, 0.5])
    b = np.array([4.0, 1.0, 2.0, 3.0])
    # pct-ranks: a -> [1, 4, 2.5, 2.5]/4, b -> [4, 1, 2, 3]/4
    expected = 0.65 * np.array([1, 4, 2.5, 2.5]) / 4 + 0.35 * np.array([4, 1, 2, 3]) / 4
    np.testing.assert_allclose(rank_mix(np.column_stack([a, b]), np.array([0.65, 0.35])), expected)
    with_nan = rank_mix(np.column_stack([np.r_[a, np.nan], np.r_[b, 5.0]]), np.array([0.65, 0.35]))
    assert np.isnan(with_nan[-1]) and np.allclose(with_nan[:4], expected)
    with pytest.raises(ConfigError, match="non-negative"):
        rank_mix(np.column_stack([a, b]), np.array([1.0, -1.0]))


def test_stacking_is_out_of_fold():
    rng = np.random.default_rng(1)
    y = np.r_[np.ones(40, int), np.zeros(40, int)]
    scores = np.column_stack([rng.normal(size=80) + 1.5 * y, rng.normal(size=80) + 0.5 * y])
    got = stacking(scores, y, n_folds=5, seed=2)
    expected = np.empty(80)
    for train, test in StratifiedKFold(5, shuffle=True, random_state=2).split(scores, y):
        model = make_pipeline(StandardScaler(), LogisticRegression()).fit(scores[train], y[train])
        expected[test] = model.predict_proba(scores[test])[:, 1]
    np.testing.assert_allclose(got, expected)
    assert roc_auc_score(y, got) > 0.8
    unlabelled = np.r_[y[:-1], -1]
    assert np.isfinite(stacking(scores, unlabelled)[-1])
    with pytest.raises(InputError, match="at least 5 members"):
        stacking(scores[:8], y[:8])


def test_robust_z_needs_a_reference():
    with pytest.raises(InputError, match="at least 3 clean"):
        robust_z_mean(np.zeros((5, 2)), np.array([True, True, False, False, False]))
