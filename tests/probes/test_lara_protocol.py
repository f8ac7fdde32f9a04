"""The LaRA protocol (SPEC §4) against a naive implementation, and its guarantees: order does not
matter, medians/MADs resist outliers, and no sample is scored by a reference that contains it."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from probes import lara
from probes.errors import ConfigError, InputError
from probes.lara.protocol import Reference, ScoreOptions, fold_assignment, score_against_pool

EPS = 1e-8
MAD_FACTOR = 1.0 / statistics.NormalDist().inv_cdf(0.75)  # 1.4826…


def naive_score(metrics, reference, metric_rows=(0, 1, 2), layers=None, dc="abs", outer_abs=False, eps=EPS):
    """SPEC §4 with Python floats and loops."""
    n_layers = len(metrics[0][0])
    layers = list(range(n_layers)) if layers is None else layers

    def comp(x):
        return math.copysign(math.log1p(abs(x)), x) if x != 0 else 0.0

    scores = []
    for sample in metrics:
        total, count = 0.0, 0
        for m in metric_rows:
            for layer in layers:
                column = [comp(r[m][layer]) for r in reference]
                center = statistics.median(column)
                scale = MAD_FACTOR * statistics.median([abs(v - center) for v in column])
                z = (comp(sample[m][layer]) - center) / (scale + eps)
                z = abs(z) if (m == 1 and dc == "abs") else -z if m == 2 else z
                total += abs(z) if outer_abs else z
                count += 1
        scores.append(total / count)
    return np.array(scores)


def random_metrics(n, n_layers=5, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    m = rng.standard_t(3, size=(n, 3, n_layers)) * np.array([2.0, 0.3, 1.5])[None, :, None]
    m[:, 1] = np.tanh(m[:, 1])  # DC is a cosine
    return m + shift


def test_compress_by_hand():
    np.testing.assert_allclose(lara.compress(np.array([0.0, math.e - 1, -(math.e**2 - 1)])), [0.0, 1.0, -2.0])


def test_reference_fit_matches_median_and_normalised_mad():
    ref = random_metrics(41, seed=1)
    fitted = Reference.fit(ref)
    comp = lara.compress(ref)
    for m in range(3):
        for layer in range(5):
            column = comp[:, m, layer].tolist()
            center = statistics.median(column)
            assert fitted.center[m, layer] == pytest.approx(center, rel=1e-12)
            assert fitted.scale[m, layer] == pytest.approx(
                MAD_FACTOR * statistics.median([abs(v - center) for v in column]), rel=1e-12
            )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"dc": "signed"},
        {"outer_abs": True},
        {"metric_set": ("zRSM",)},
        {"metric_set": ("DC", "zRSI"), "layers": (1, 3)},
        {"layers": "early"},
    ],
)
def test_score_matches_naive(options):
    ref = random_metrics(30, n_layers=6, seed=2)
    samples = random_metrics(12, n_layers=6, seed=3, shift=0.5)
    got = lara.score(samples, ref, **options)
    rows = [("zRSM", "DC", "zRSI").index(m) for m in options.get("metric_set", ("zRSM", "DC", "zRSI"))]
    layers = options.get("layers")
    if layers == "early":
        layers = [0, 1]  # 6 blocks: early = [0, 2)
    expected = naive_score(
        samples.tolist(),
        ref.tolist(),
        rows,
        list(layers) if layers else None,
        options.get("dc", "abs"),
        options.get("outer_abs", False),
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_alignment_directions():
    ref = random_metrics(25, n_layers=1, seed=4)
    fitted = Reference.fit(ref)
    base = np.sign(fitted.center) * np.expm1(np.abs(fitted.center))  # raw values at the clean centre
    up = base.copy()[None]
    up[0, :, 0] += 10.0  # every metric far above the clean centre
    down = base.copy()[None]
    down[0, :, 0] -= 10.0
    z_up = lara.align(fitted.zscores(up))[0, :, 0]
    z_down = lara.align(fitted.zscores(down))[0, :, 0]
    assert z_up[0] > 0 and z_down[0] < 0  # zRSM: higher = member
    assert z_up[1] > 0 and z_down[1] > 0  # DC: |z|, either way
    assert z_up[2] < 0 and z_down[2] > 0  # zRSI: lower = member
    signed = lara.align(fitted.zscores(down), dc="signed")[0, 1, 0]
    assert signed < 0


def test_permuting_samples_changes_no_score():
    ref = random_metrics(40, seed=5)
    samples = random_metrics(15, seed=6, shift=0.3)
    perm_s = np.random.default_rng(0).permutation(15)
    perm_r = np.random.default_rng(1).permutation(40)
    base = lara.score(samples, ref)
    np.testing.assert_array_equal(lara.score(samples[perm_s], ref[perm_r]), base[perm_s])
    # cross-fitted: the evaluation set's own non-members are the pool
    both = np.concatenate([samples, ref])
    keys = [f"q{i}" for i in range(len(both))]
    pool_rows = np.arange(15, 55)
    scored = score_against_pool(both, keys, both[pool_rows], [keys[i] for i in pool_rows]).scores(
        ScoreOptions(), [str(i) for i in range(5)]
    )
    perm = np.random.default_rng(2).permutation(len(both))
    inverse = np.argsort(perm)
    pool_perm = np.random.default_rng(3).permutation(pool_rows)
    again = score_against_pool(both[perm], [keys[i] for i in perm], both[pool_perm], [keys[i] for i in pool_perm])
    np.testing.assert_array_equal(again.scores(ScoreOptions(), [str(i) for i in range(5)])[inverse], scored)


def test_outlier_moves_robust_reference_less_than_mean_std():
    ref = random_metrics(50, seed=7)
    polluted = np.concatenate([ref, np.full((1, 3, 5), 1e6)])
    clean_fit, dirty_fit = Reference.fit(ref), Reference.fit(polluted)
    comp, comp_dirty = lara.compress(ref), lara.compress(polluted)
    center_shift = np.abs(dirty_fit.center - clean_fit.center)
    scale_shift = np.abs(dirty_fit.scale - clean_fit.scale)
    mean_shift = np.abs(comp_dirty.mean(axis=0) - comp.mean(axis=0))
    std_shift = np.abs(comp_dirty.std(axis=0, ddof=1) - comp.std(axis=0, ddof=1))
    assert (center_shift < mean_shift).all()
    assert (scale_shift < std_shift).all()


def test_public_score_leaves_out_a_sample_that_is_in_the_reference():
    ref = random_metrics(20, seed=8)
    got = lara.score(ref[:4], ref)  # the first 4 reference rows scored against the whole reference
    for i in range(4):
        without = np.delete(ref, i, axis=0)
        assert got[i] == lara.score(ref[i : i + 1], Reference.fit(without))[0]
        assert got[i] != lara.score(ref[i : i + 1], Reference.fit(ref))[0]


def test_cross_fitting_never_uses_a_sample_in_its_reference():
    members = random_metrics(10, seed=9, shift=1.0)
    clean = random_metrics(30, seed=10)
    both = np.concatenate([members, clean])
    keys = [f"m{i}" for i in range(10)] + [f"c{i}" for i in range(30)]
    result = score_against_pool(both, keys, clean, keys[10:], n_folds=5, seed=0)
    assert (result.folds[:10] == -1).all() and set(result.folds[10:]) == set(range(5)) and result.n_folds == 5
    assignment = fold_assignment(keys[10:], 5, 0)
    for i in range(10, 40):
        fold = result.folds[i]
        kept = [j for j in range(30) if assignment[keys[10 + j]] != fold]
        assert i - 10 not in kept
        expected = lara.align(Reference.fit(clean[kept]).zscores(both[i : i + 1]))
        np.testing.assert_array_equal(result.zhat[i : i + 1], expected)
    np.testing.assert_array_equal(result.zhat[:10], lara.align(Reference.fit(clean).zscores(members)))


def test_zero_scale_is_reported_and_optional_to_drop():
    ref = random_metrics(9, n_layers=2, seed=11)
    ref[:6, 0, 1] = 0.25  # over half identical: MAD = 0
    fitted = Reference.fit(ref)
    assert fitted.zero_scale_cells() == ["zRSM@1"]
    samples = random_metrics(3, n_layers=2, seed=12)
    with_eps = lara.score(samples, fitted)
    assert np.isfinite(with_eps).all()  # no crash: divided by ε
    dropped = lara.score(samples, fitted, zero_scale="drop")
    z = lara.align(fitted.zscores(samples))
    mask = np.ones((3, 2), bool)
    mask[0, 1] = False
    np.testing.assert_allclose(dropped, np.array([z[i][mask].mean() for i in range(3)]), rtol=1e-12)


def test_reference_round_trips_through_json(tmp_path):
    fitted = Reference.fit(
        random_metrics(12, seed=13),
        layer_labels=["0", "1", "2", "3", "4"],
        question_hashes=[f"h{i}" for i in range(12)],
        provenance={"mode": "split"},
    )
    fitted.save(tmp_path / "ref.json")
    back = Reference.load(tmp_path / "ref.json")
    np.testing.assert_array_equal(back.center, fitted.center)
    np.testing.assert_array_equal(back.scale, fitted.scale)
    assert back.layer_labels == fitted.layer_labels and back.question_hashes == fitted.question_hashes and back.n == 12
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="not a LaRA reference"):
        Reference.load(tmp_path / "bad.json")


def test_too_small_reference_and_bad_options_are_refused():
    with pytest.raises(InputError, match="at least 3"):
        Reference.fit(random_metrics(2))
    nan_rows = random_metrics(5)
    nan_rows[:3] = np.nan
    with pytest.raises(InputError, match="2 usable sample"):
        Reference.fit(nan_rows)
    with pytest.raises(ConfigError, match="choose from"):
        lara.score(random_metrics(2), random_metrics(5), metric_set=("RSM",))
    with pytest.raises(ConfigError, match="abs or signed"):
        lara.score(random_metrics(2), random_metrics(5), dc="both")


def test_layer_windows_follow_the_seed():
    labels = [str(i) for i in range(28)]
    assert lara.select_layers("early", labels) == list(range(0, 9))
    assert lara.select_layers("mid", labels) == list(range(9, 18))
    assert lara.select_layers("late", labels) == list(range(18, 28))
    with_extra = ["embed", *labels, "final_norm"]
    assert lara.select_layers("all", with_extra) == list(range(1, 29))
    assert lara.select_layers("embed,0-2", with_extra) == [0, 1, 2, 3]
    sparse = ["0", "7", "14", "21", "27"]
    assert lara.select_layers("early", sparse, n_blocks=28) == [0, 1]
    with pytest.raises(ConfigError, match="not a layer"):
        lara.select_layers("middle", labels)
    with pytest.raises(ConfigError, match="picks no layer"):
        lara.select_layers("early", ["0", "1"])
