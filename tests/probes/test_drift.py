"""Representation drift (SPEC §10) against naive loops, through real HDF5 activation stores; its
layer map finds a planted layer and its placebo stays quiet."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from cache.fingerprint import text_hash
from cache.store import ActivationStore, RowBlock, StoreWriter
from generation.records import PerturbationSet, Question
from probes.lara.drift import cosine_drift, drift_map, drift_scores, pooled_drift, question_drift
from tests.cache.test_store import provenance as cache_provenance

LAYERS = ["0", "1", "2"]


def provenance(source: str) -> dict:
    """A store's provenance (the cache tests' own), for ``source``'s weights."""
    return cache_provenance(
        layers=LAYERS, d_model=5, weights_fingerprint=source * 64, model={"source": f"/models/{source}"}
    )


def store(path, texts, vectors, source) -> ActivationStore:
    n = len(texts)
    block = RowBlock(
        [text_hash(t) for t in texts],
        list(texts),
        np.asarray(vectors, dtype=np.float32),
        np.full(n, 5, np.int32),
        np.full(n, 5, np.int32),
        np.zeros(n, bool),
    )
    with StoreWriter(path, provenance(source)) as writer:
        writer.add(block, flush_every=10**9)
        writer.consolidate()
    return ActivationStore(path)


def test_cosine_drift_against_a_naive_loop_and_zero_against_itself():
    rng = np.random.default_rng(0)
    a, r = rng.normal(size=(4, 3, 5)), rng.normal(size=(4, 3, 5))
    got = cosine_drift(a, r)
    for i in range(4):
        for layer in range(3):
            dot = sum(x * y for x, y in zip(a[i, layer], r[i, layer]))
            norm = math.sqrt(sum(x * x for x in a[i, layer])) * math.sqrt(sum(y * y for y in r[i, layer]))
            assert got[i, layer] == pytest.approx(1 - dot / norm, abs=1e-12)
    assert np.abs(cosine_drift(a, a)).max() < 1e-12
    assert np.isnan(cosine_drift(np.zeros((1, 1, 5)), r[:1, :1]))[0, 0]


def test_question_drift_reads_both_stores_and_the_controls_by_text(tmp_path):
    rng = np.random.default_rng(1)
    texts = ["q1", "q1 s1", "q1 s2", "q2", "q2 s1"]
    va, vr = rng.normal(size=(5, 3, 5)), rng.normal(size=(5, 3, 5))
    audited = store(tmp_path / "a.h5", texts, va, "a")
    reference = store(tmp_path / "r.h5", texts[::-1], vr[::-1], "r")  # another order: rows found by text
    sets = [
        PerturbationSet(Question("a", "q1"), ["q1 s1", "q1 s2"], None, [], [], [], {}),
        PerturbationSet(Question("b", "q2"), ["q2 s1", None], None, [], [], [], {}),
    ]
    drift = question_drift(sets, audited, reference)
    expected = cosine_drift(va, vr)
    np.testing.assert_allclose(drift.original, expected[[0, 3]], atol=1e-6)
    np.testing.assert_allclose(drift.controls[0], expected[[1, 2]], atol=1e-6)
    np.testing.assert_allclose(drift.controls[1, 0], expected[4], atol=1e-6)
    assert np.isnan(drift.controls[1, 1]).all()
    assert np.isnan(pooled_drift(audited, reference, ["not stored"])).all()


def test_drift_scores_against_a_naive_median_and_mad():
    rng = np.random.default_rng(2)
    original, controls = rng.normal(size=(6, 3)), rng.normal(size=(6, 5, 3))
    controls[5, 1:] = np.nan  # one control: no score
    got = drift_scores(original, controls)
    for i in range(5):
        z = []
        for layer in range(3):
            c = list(controls[i, :, layer])
            median = statistics.median(c)
            mad = 1.4826 * statistics.median([abs(x - median) for x in c])
            z.append((original[i, layer] - median) / (mad + 1e-12))
        assert got[i] == pytest.approx(sum(z) / 3, rel=1e-3)
    assert np.isnan(got[5])


def test_the_map_finds_a_planted_layer_and_its_placebo_stays_quiet():
    rng = np.random.default_rng(3)
    labels = np.repeat([1, 0], 60)
    drift = rng.normal(size=(120, 3))
    drift[labels == 1, 2] += 1.0  # RL moved the members at the last layer only
    found = drift_map(drift, labels, LAYERS, n_permutations=500, n_placebo=10)
    assert found["significant_layers"] == ["2"] and found["auc"][2] > 0.7 and abs(found["auc"][0] - 0.5) < 0.15
    assert found["placebo_any_significant_rate"] <= 0.2
    null = drift_map(rng.normal(size=(120, 3)), labels, LAYERS, n_permutations=500, n_placebo=5)
    assert null["significant_layers"] == [] and null["p_global"] > 0.05
