"""LaRA metrics against a deliberately naive implementation (Python floats, loops over i, m, ℓ)
and on hand-built cases whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from probes import lara
from probes.lara.geometry import batch_metrics

EPS = 1e-8


def naive_metrics(u, w, phi, eps=EPS):
    """zRSM, DC, zRSI per layer with Python floats and explicit loops (SPEC §3, read literally)."""
    k1, n_layers, d = len(u), len(u[0]), len(u[0][0])
    m_count = len(phi[0])
    out = [[0.0] * n_layers for _ in range(3)]
    for layer in range(n_layers):
        deltas, shifts, spreads = [], [], []
        for i in range(k1):
            delta = [float(u[i][layer][j]) - float(w[i][layer][j]) for j in range(d)]
            deltas.append(delta)
            shifts.append(math.sqrt(sum(x * x for x in delta)))
            mean_phi = [sum(float(phi[i][m][layer][j]) for m in range(m_count)) / m_count for j in range(d)]
            total = 0.0
            for m in range(m_count):
                total += math.sqrt(sum((float(phi[i][m][layer][j]) - mean_phi[j]) ** 2 for j in range(d)))
            spreads.append(total / m_count)

        def z(values):
            sims = values[1:]
            mean = sum(sims) / len(sims)
            std = math.sqrt(sum((v - mean) ** 2 for v in sims) / (len(sims) - 1))
            return (values[0] - mean) / (std + eps)

        s_bar = [sum(deltas[i][j] for i in range(1, k1)) / (k1 - 1) for j in range(d)]
        dot = sum(deltas[0][j] * s_bar[j] for j in range(d))
        norm_bar = math.sqrt(sum(x * x for x in s_bar))
        out[0][layer] = z(shifts)
        out[1][layer] = dot / ((shifts[0] + eps) * (norm_bar + eps))
        out[2][layer] = z(spreads)
    return np.array(out)


@pytest.mark.parametrize("k", [2, 5, 8])
@pytest.mark.parametrize("m", [2, 5])
@pytest.mark.parametrize("n_layers", [1, 7])
@pytest.mark.parametrize("d", [4, 64])
def test_metrics_match_naive_loops(k, m, n_layers, d):
    rng = np.random.default_rng(1000 * k + 100 * m + 10 * n_layers + d)
    u = rng.normal(size=(k + 1, n_layers, d)).astype(np.float32)
    w = (u + rng.normal(scale=0.5, size=u.shape)).astype(np.float32)
    phi = (w[:, None] + rng.normal(scale=0.3, size=(k + 1, m, n_layers, d))).astype(np.float32)
    got = lara.metrics(u, w, phi)
    assert got.shape == (3, n_layers) and got.dtype == np.float64
    np.testing.assert_allclose(got, naive_metrics(u.tolist(), w.tolist(), phi.tolist()), rtol=1e-9, atol=0)


def test_metrics_do_not_modify_inputs():
    rng = np.random.default_rng(0)
    u, w = rng.normal(size=(2, 4, 3, 8))
    phi = rng.normal(size=(4, 3, 3, 8))
    copies = [x.copy() for x in (u, w, phi)]
    lara.metrics(u, w, phi)
    for original, copy in zip((u, w, phi), copies):
        np.testing.assert_array_equal(original, copy)


def _group(shifts_dirs, d=16, n_layers=2, m=3, seed=0):
    """u, w, phi where Δ_i = u_i − w_i is given per member."""
    rng = np.random.default_rng(seed)
    k1 = len(shifts_dirs)
    w = rng.normal(size=(k1, n_layers, d))
    u = w + np.stack([np.broadcast_to(s, (n_layers, d)) for s in shifts_dirs])
    phi = w[:, None] + rng.normal(size=(k1, m, n_layers, d))
    return u, w, phi


def test_parallel_shifts_give_dc_one():
    v = np.random.default_rng(3).normal(size=16)
    u, w, phi = _group([2.0 * v, 0.5 * v, 1.0 * v, 3.0 * v, 1.5 * v])
    dc = lara.metrics(u, w, phi)[1]
    np.testing.assert_allclose(dc, 1.0, atol=1e-7)
    u, w, phi = _group([-2.0 * v, 0.5 * v, 1.0 * v, 3.0 * v])  # the original against the group
    np.testing.assert_allclose(lara.metrics(u, w, phi)[1], -1.0, atol=1e-7)


def test_original_twice_the_identical_similars_shift():
    v = np.random.default_rng(4).normal(size=16)
    s = float(np.linalg.norm(v))
    u, w, phi = _group([2.0 * v, v, v, v])
    # the similars' shifts are identical, so their std is exactly 0 and zRSM = (2s − s) / (0 + ε)
    np.testing.assert_allclose(lara.metrics(u, w, phi)[0], s / EPS, rtol=1e-9)


def test_zrsm_on_hand_numbers():
    e = np.zeros(16)
    e[0] = 1.0
    u, w, phi = _group([4.0 * e, 1.0 * e, 2.0 * e, 3.0 * e])  # S = 4; similars 1, 2, 3: mean 2, std 1
    np.testing.assert_allclose(lara.metrics(u, w, phi)[0], 2.0 / (1.0 + EPS), rtol=1e-12)


def test_identical_paraphrases_have_zero_spread():
    rng = np.random.default_rng(5)
    u, w = rng.normal(size=(2, 4, 2, 8))
    phi = np.repeat(rng.normal(size=(4, 1, 2, 8)), 3, axis=1)  # M = 3 identical paraphrases per member
    result = batch_metrics(u[None], w[None], phi[None])
    np.testing.assert_array_equal(result.R, 0.0)
    np.testing.assert_array_equal(result.metrics[0, 2], 0.0)  # zRSI = (0 − 0) / (0 + ε)


def test_zrsi_on_hand_numbers():
    # paraphrases at ±r e around their mean: R_i = r exactly
    e = np.zeros(8)
    e[1] = 1.0
    radii = [5.0, 1.0, 2.0, 3.0]
    w = np.zeros((4, 1, 8))
    u = w + 1.0
    phi = np.stack([np.stack([r * e, -r * e])[:, None, :] for r in radii])  # [4, 2, 1, 8]
    result = batch_metrics(u[None], w[None], phi[None])
    np.testing.assert_allclose(result.R[0, :, 0], radii, rtol=1e-12)
    np.testing.assert_allclose(result.metrics[0, 2, 0], (5.0 - 2.0) / (1.0 + EPS), rtol=1e-12)


def test_masked_members_equal_dropping_them():
    rng = np.random.default_rng(6)
    k, m, n_layers, d = 5, 4, 3, 8
    u, w = rng.normal(size=(2, k + 1, n_layers, d))
    phi = rng.normal(size=(k + 1, m, n_layers, d))
    member_ok = np.array([True, True, False, True, True, False])
    paraphrase_ok = np.ones((k + 1, m), dtype=bool)
    paraphrase_ok[3, 1] = False
    masked_u, masked_w, masked_phi = u.copy(), w.copy(), phi.copy()
    masked_u[~member_ok] = 0.0
    masked_phi[3, 1] = 123.0  # garbage in a masked paraphrase slot must not matter
    got = batch_metrics(masked_u[None], masked_w[None], masked_phi[None], member_ok[None], paraphrase_ok[None])
    keep = np.flatnonzero(member_ok)
    expected = naive_metrics(u[keep].tolist(), w[keep].tolist(), phi[keep].tolist())
    # member 3 (kept index 2) uses only its 3 valid paraphrases
    sub_phi = [phi[i].tolist() if i != 3 else phi[i][[0, 2, 3]].tolist() for i in keep]
    spreads_naive = naive_with_ragged_paraphrases(u[keep], w[keep], sub_phi)
    np.testing.assert_allclose(got.metrics[0, :2], expected[:2], rtol=1e-9)
    np.testing.assert_allclose(got.metrics[0, 2], spreads_naive, rtol=1e-9)
    assert np.isnan(got.S[0, 2]).all() and np.isnan(got.R[0, 5]).all()
    assert got.n_similars[0] == 3


def naive_with_ragged_paraphrases(u, w, phi_lists, eps=EPS):
    """zRSI with a different number of paraphrases per member."""
    out = []
    for layer in range(u.shape[1]):
        spreads = []
        for rows in phi_lists:
            vecs = [np.array(r[layer], dtype=float) for r in rows]
            mean = sum(vecs) / len(vecs)
            spreads.append(sum(float(np.sqrt(((v - mean) ** 2).sum())) for v in vecs) / len(vecs))
        sims = spreads[1:]
        mu = sum(sims) / len(sims)
        sd = math.sqrt(sum((s - mu) ** 2 for s in sims) / (len(sims) - 1))
        out.append((spreads[0] - mu) / (sd + eps))
    return np.array(out)


def test_unscorable_questions_are_nan():
    rng = np.random.default_rng(7)
    u, w = rng.normal(size=(2, 3, 4, 2, 8))  # N=3, K+1=4
    phi = rng.normal(size=(3, 4, 2, 2, 8))
    member_ok = np.array([[True] * 4, [False, True, True, True], [True, True, False, False]])
    result = batch_metrics(u, w, phi, member_ok)
    assert np.isfinite(result.metrics[0]).all()
    assert np.isnan(result.metrics[1]).all()  # the original is unusable
    assert np.isnan(result.metrics[2]).all()  # one usable similar
    assert result.n_similars.tolist() == [3, 3, 1]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="K >= 2"):
        lara.metrics(np.zeros((2, 1, 4)), np.zeros((2, 1, 4)), np.zeros((2, 2, 1, 4)))
    with pytest.raises(ValueError, match=r"phi must be \[K\+1, M, L, d\]"):
        lara.metrics(np.zeros((3, 1, 4)), np.zeros((3, 1, 4)), np.zeros((3, 2, 2, 4)))
