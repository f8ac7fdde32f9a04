"""Fusion (SPEC §6) against hand and naive computations."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probes.errors import ConfigError, InputError
from probes.fusion import rank_mix, robust_z_fusion, robust_z_mean, stacking
from probes.lara.protocol import fold_assignment
from probes.robust import robust_scale

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


def naive_fallback(col):
    """√(π/2) × the mean absolute deviation from the median, by a plain loop."""
    med = statistics.median(col)
    return (math.pi / 2) ** 0.5 * sum(abs(v - med) for v in col) / len(col)


def cdd_like_and_lara(n=200, seed=0):
    """A CDD-like column (0 on 80 % of rows, MAD 0 on the reference) beside a normal LaRA-like one."""
    rng = np.random.default_rng(seed)
    cdd = np.where(rng.random(n) < 0.8, 0.0, rng.random(n))
    reference = np.zeros(n, bool)
    reference[: n // 2] = True
    return np.column_stack([cdd, rng.normal(size=n)]), reference


def test_a_zero_mad_column_falls_back_instead_of_dividing_by_eps():
    scores, reference = cdd_like_and_lara()
    keys = [f"q{i}" for i in range(len(scores))]
    fused, record = robust_z_fusion(scores, reference, keys, names=["cdd", "lara"])
    assert np.abs(fused).max() < 50  # was 4.9e7 when the zero MAD was divided by ε
    assert list(record.fallback) == ["cdd"] and record.constant == []
    assert "fallback scale" in record.describe() and "cdd" in record.describe()
    folds = fold_assignment([k for k, r in zip(keys, reference) if r], 5, 0)
    for i in (0, 1, 150, 151):  # reference rows (cross-fitted) and audited rows, against a naive computation
        pool = [j for j in np.flatnonzero(reference) if not reference[i] or folds[keys[j]] != folds[keys[i]]]
        cdd_pool, lara_pool = [scores[j, 0] for j in pool], [scores[j, 1] for j in pool]
        assert naive_robust(cdd_pool)[1] == 0.0
        z_cdd = (scores[i, 0] - statistics.median(cdd_pool)) / (naive_fallback(cdd_pool) + 1e-8)
        med, scale = naive_robust(lara_pool)
        assert fused[i] == pytest.approx((z_cdd + (scores[i, 1] - med) / (scale + 1e-8)) / 2, rel=1e-12)


def test_a_constant_column_is_left_out_and_recorded():
    scores, reference = cdd_like_and_lara()
    scores[:, 0] = 0.0  # constant everywhere
    fused, record = robust_z_fusion(scores, reference, names=["cdd", "lara"], weights=np.array([1.0, 3.0]))
    alone = robust_z_mean(scores[:, 1:], reference)
    np.testing.assert_allclose(fused, alone, rtol=1e-12)  # the weights renormalise over what is left
    assert record.constant == ["cdd"] and "left out: cdd" in record.describe()
    with pytest.raises(InputError, match="every column is constant"):
        robust_z_fusion(np.zeros((10, 2)), np.ones(10, bool))


def test_robust_scale_against_a_naive_loop():
    rng = np.random.default_rng(4)
    values = rng.normal(size=(15, 4))
    values[:9, 1] = 2.0  # MAD 0, spread left: fallback
    values[:, 2] = -1.0  # constant
    values[[3, 7], 3] = np.nan  # non-finite entries are ignored
    fitted = robust_scale(values)
    for j in range(4):
        col = [v for v in values[:, j] if math.isfinite(v)]
        med, mad = naive_robust(col)
        assert fitted.center[j] == pytest.approx(med, abs=1e-15) and fitted.mad[j] == pytest.approx(mad, abs=1e-15)
    assert fitted.fallback.tolist() == [False, True, False, False]
    assert fitted.constant.tolist() == [False, False, True, False]
    assert fitted.scale[1] == pytest.approx(naive_fallback(list(values[:, 1])), rel=1e-12) and fitted.scale[2] == 0.0
    assert np.isnan(robust_scale(np.full((3, 1), np.nan)).center[0])
