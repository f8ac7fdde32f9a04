"""The layer map's permutation null (SPEC §4.5 item 5, issue 34 item 1): equal to a naive maxT loop;
family-wise error ≤ 5 % on simulated nulls — where reading the level of per-cell statistics, or a
free permutation in a matched design, fails — and a representation shift planted in members'
activations at chosen layers is found at exactly those layers, through the real geometry code."""

from __future__ import annotations

import numpy as np

from probes.evaluation.effect import cohens_d
from probes.evaluation.layer_null import cohens_d_rows, layer_null, non_member_split
from probes.evaluation.permutation import permuted_labels
from probes.lara.geometry import batch_metrics
from probes.lara.protocol import compress

N_DATASETS = 200
MC_BOUND = 0.05 + 2 * np.sqrt(0.05 * 0.95 / N_DATASETS)  # 0.081


def _correlated_metrics(rng: np.random.Generator, n: int, n_layers: int = 8, rho: float = 0.8) -> np.ndarray:
    """``[n, 3, L]`` heavy-tailed (t, 3 df) values, AR(1)-correlated along the layers."""
    noise = rng.standard_t(3, size=(n, 3, n_layers))
    out = np.empty_like(noise)
    out[:, :, 0] = noise[:, :, 0]
    for layer in range(1, n_layers):
        out[:, :, layer] = rho * out[:, :, layer - 1] + np.sqrt(1 - rho**2) * noise[:, :, layer]
    return out


def test_cohens_d_of_many_label_rows_equals_the_plain_function_row_by_row():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(30, 5)) * [1, 2, 3, 4, 5] + 100.0  # an offset: the centring must keep it exact
    labels = permuted_labels(np.r_[np.ones(12, int), np.zeros(18, int)], None, 25, seed=1)
    naive = np.array([cohens_d(values, row.astype(bool)) for row in labels])
    np.testing.assert_allclose(cohens_d_rows(values, labels), naive, rtol=1e-10)


def test_adjusted_p_values_equal_a_naive_max_t_loop():
    rng = np.random.default_rng(2)
    values = rng.normal(size=(40, 3, 4))
    values[:20, 0, 2] += 2.0  # one real effect
    y = np.r_[np.ones(20, int), np.zeros(20, int)]
    result = layer_null(values, y, n_permutations=300, seed=7)
    observed = np.array([[cohens_d(values[:, m, layer], y.astype(bool)) for layer in range(4)] for m in range(3)])
    maxima = [
        max(abs(cohens_d(values[:, m, layer], row.astype(bool))) for m in range(3) for layer in range(4))
        for row in permuted_labels(y, None, 300, seed=7)
    ]
    naive_p = np.array(
        [[(1 + sum(x >= abs(observed[m, layer]) for x in maxima)) / 301 for layer in range(4)] for m in range(3)]
    )
    np.testing.assert_allclose(result["d"], observed, rtol=1e-10)
    np.testing.assert_allclose(result["p_adjusted"], naive_p)
    np.testing.assert_allclose(result["p_layer"], naive_p.min(axis=0))
    assert result["significant_layers"] == [2]


def test_any_layer_significant_in_at_most_five_percent_of_simulated_nulls_and_the_level_reading_fails():
    """200 null datasets, 40 members vs 120 non-members (unequal: the level of per-cell statistics
    then misleads), 3 metrics × 8 correlated heavy-tailed layers. The maxT null holds its size; the
    planted fault — a cell called significant when its own unadjusted permutation p < 0.05 — does not."""
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(40, int), np.zeros(120, int)]
    any_maxt, any_per_cell = [], []
    for k in range(N_DATASETS):
        values = _correlated_metrics(rng, len(y))
        result = layer_null(values, y, n_permutations=200, seed=k)
        any_maxt.append(bool(result["significant_layers"]))
        d_perm = np.abs(cohens_d_rows(values.reshape(len(y), -1), permuted_labels(y, None, 200, seed=k)))
        p_cell = (1 + (d_perm >= np.abs(result["d"].reshape(-1))).sum(axis=0)) / 201
        any_per_cell.append(bool((p_cell < 0.05).any()))
    assert np.mean(any_maxt) <= MC_BOUND
    assert np.mean(any_per_cell) >= 0.3  # the fault is caught at this size


def test_in_a_matched_design_labels_are_permuted_within_groups():
    """Groups of unequal composition whose levels differ (member-heavy groups sit higher) and no
    member effect inside any group: a free permutation rejects most of the time, swaps within the
    groups keep the family-wise error ≤ 5 %."""
    rng = np.random.default_rng(4)
    composition = [4, 1] * 10  # members in each of 20 groups of 6
    y = np.concatenate([np.r_[np.ones(c, int), np.zeros(6 - c, int)] for c in composition])
    groups = np.repeat(np.arange(20), 6)
    within, free = [], []
    for k in range(N_DATASETS):
        level = np.where(np.array(composition) == 4, 1.0, 0.0) + rng.normal(0, 0.3, 20)
        values = _correlated_metrics(rng, len(y), n_layers=4) + level[groups][:, None, None]
        within.append(bool(layer_null(values, y, groups, n_permutations=200, seed=k)["significant_layers"]))
        free.append(bool(layer_null(values, y, None, n_permutations=200, seed=k)["significant_layers"]))
    assert np.mean(within) <= MC_BOUND and np.mean(free) >= 0.5


def _activations(rng: np.random.Generator, n: int, k1: int = 6, n_para: int = 3, n_layers: int = 6, dim: int = 32):
    """Random pooled activations: u, w ``[n, K+1, L, d]`` (w = u plus a blanking shift), phi ``[n, K+1, M, L, d]``."""
    u = rng.normal(size=(n, k1, n_layers, dim))
    w = u + rng.normal(scale=0.7, size=u.shape)
    phi = w[:, :, None] + rng.normal(scale=0.5, size=(n, k1, n_para, n_layers, dim))
    return u, w, phi


def test_a_representation_shift_planted_at_chosen_layers_is_found_there():
    """A fixed direction (norm 2.5, against blanking shifts of norm ≈ 4) is added to the members'
    original-question activations at layers 2 and 4 of 6; the metrics are computed by the real
    geometry code; the map reports exactly those layers, and none without the shift."""
    rng = np.random.default_rng(5)
    n = 120
    y = np.r_[np.ones(60, int), np.zeros(60, int)]
    u, w, phi = _activations(rng, n)
    direction = rng.normal(size=u.shape[-1])
    direction *= 2.5 / np.linalg.norm(direction)
    clean = compress(batch_metrics(u, w, phi).metrics)
    assert layer_null(clean, y, n_permutations=500, seed=0)["significant_layers"] == []
    shifted = u.copy()
    for layer in (2, 4):
        shifted[y == 1, 0, layer] += direction
    result = layer_null(compress(batch_metrics(shifted, w, phi).metrics), y, n_permutations=500, seed=0)
    assert result["significant_layers"] == [2, 4] and result["p_global"] < 0.01


def test_the_placebo_split_labels_half_of_the_non_members():
    y = np.r_[np.ones(7, int), np.zeros(11, int)]
    rows, fake = non_member_split(y, seed=3)
    assert (y[rows] == 0).all() and len(rows) == 11 and fake.sum() == 5
    assert not np.array_equal(fake, non_member_split(y, seed=4)[1])
