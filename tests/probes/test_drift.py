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
    assert found["placebo"]["any_significant_rate"] <= 0.2
    null = drift_map(rng.normal(size=(120, 3)), labels, LAYERS, n_permutations=500, n_placebo=5)
    assert null["significant_layers"] == [] and null["p_global"] > 0.05


def labelled_stores(tmp_path, shift: float = 1.0):
    """Two stores of 40 questions (20 members, ids m*/n*) whose members' reference vectors were
    moved at layer 2 only; plus a text only the audited store holds."""
    rng = np.random.default_rng(4)
    ids = [f"m{i}" for i in range(20)] + [f"n{i}" for i in range(20)]
    texts = {i: f"question {i}?" for i in ids}
    va = rng.normal(size=(40, 3, 5))
    vr = va + 0.3 * rng.normal(size=(40, 3, 5))
    vr[:20, 2] += shift * rng.normal(size=(20, 5))
    audited = store(tmp_path / "a.h5", [*texts.values(), "only here"], np.concatenate([va, va[:1]]), "a")
    reference = store(tmp_path / "r.h5", list(texts.values()), vr, "r")
    labels = {i: int(i.startswith("m")) for i in ids}
    return audited, reference, texts, labels, cosine_drift(va, vr)


def test_store_drift_map_reads_the_questions_by_id_and_counts_what_it_leaves_out(tmp_path):
    from probes.lara.drift import store_drift_map

    audited, reference, texts, labels, expected = labelled_stores(tmp_path)
    texts_plus = {**texts, "x": "only here", "y": "in no store"}
    labels_plus = {**labels, "x": 1, "y": 0, "z": 1, "clean": None}  # z: no text; clean: no label
    got = store_drift_map(audited, reference, texts_plus, labels_plus, n_permutations=300)
    assert (got["members"], got["non_members"], got["not_in_stores"], got["no_text"]) == (20, 20, 2, 1)
    assert got["significant_layers"] == ["2"]
    # members' mean drift per layer, by hand
    for layer in range(3):
        assert got["mean_drift"]["members"][layer] == pytest.approx(float(np.mean(expected[:20, layer])), abs=1e-6)
    again = store_drift_map(audited, reference, texts, labels, n_permutations=300)
    assert again["d"] == got["d"]  # the left-out rows change nothing
    assert "same vectors" in store_drift_map(audited, audited, texts, labels)["error"]
    few = store_drift_map(audited, reference, texts, {"m1": 1, "n1": 0, "n2": 0})
    assert "at least 2 members" in few["error"] and few["not_in_stores"] == 0


def test_lara_evaluate_shows_the_drift_map_and_the_api_gives_the_same(tmp_path, capsys):
    import json

    import probes
    from probes.cli import main

    audited, reference, texts, labels, expected = labelled_stores(tmp_path)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": i, "question": t, "label": labels[i]}) + "\n" for i, t in texts.items())
    )
    scores = tmp_path / "scores.csv"
    scores.write_text("id,s\n" + "".join(f"{i},{k % 7}\n" for k, i in enumerate(texts)))
    args = ["evaluate", str(scores), "--labels", str(questions), "--bootstrap", "20", "--no-plots"]
    stores = ["--activations", str(audited.path), "--reference-activations", str(reference.path)]
    assert main([*args, *stores, "-o", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    md = (tmp_path / "report" / "report.md").read_text()
    assert report["drift"]["significant_layers"] == ["2"] and report["drift"]["permutation"] == "free"
    section = md.split("## Representation drift (audited vs reference)")[1]
    assert "| 2 ✱ |" in section and "Layer 2 beyond the permutation null" in section and "Placebo" in section
    # the API: each question's drift by a naive cosine, and the same map
    records = [json.loads(line) for line in questions.read_text().splitlines()]  # labels from the records
    got = probes.drift(audited.path, reference.path, records)
    np.testing.assert_allclose(got.values.to_numpy(), expected, atol=1e-6)
    assert list(got.values.columns) == LAYERS
    for field in ("d", "p_layer", "auc"):
        assert got.map[field] == pytest.approx(report["drift"][field])
    assert got.map["p_global"] == report["drift"]["p_global"] and got.map["placebo"] == report["drift"]["placebo"]
    assert "layers beyond the null: 2" in repr(got)
    assert probes.drift(audited, reference, list(texts.values())).map is None  # no labels: no map
    # one store alone, or stores without labels: refused in one line
    assert main([*args, "--activations", str(audited.path), "-o", str(tmp_path / "r2")]) == 2
    assert "go together" in capsys.readouterr().err
    assert main([args[0], args[1], *stores, "-o", str(tmp_path / "r3")]) == 2
    assert "needs --labels" in capsys.readouterr().err


def test_what_the_map_leaves_out_is_counted_and_shown_and_incomparable_stores_are_named(tmp_path):
    from probes.lara.drift import store_drift_map
    from probes.report.drift_markdown import drift_markdown

    rng = np.random.default_rng(5)
    texts = {f"m{i}": f"member {i}?" for i in range(3)} | {f"n{i}": f"other {i}?" for i in range(4)}
    va, vr = rng.normal(size=(7, 3, 5)), rng.normal(size=(7, 3, 5))
    va[0] = 0.0  # a zero vector: its drift is not finite
    audited = store(tmp_path / "a.h5", list(texts.values()), va, "a")
    reference = store(tmp_path / "r.h5", list(texts.values()), vr, "r")
    labels = {i: int(i.startswith("m")) for i in texts}
    got = store_drift_map(audited, reference, texts, labels, n_permutations=100)
    assert got["left_out"] == {"members": 1, "non_members": 0} and (got["members"], got["non_members"]) == (2, 4)
    md = "\n".join(drift_markdown(got))
    assert (
        "Left out: 1 member(s) and 0 non-member(s) with a non-finite drift" in md
        and "Placebo (random halves of the 4" in md
    )
    # 3 non-members: the map without its placebo (a half would hold one), said so
    three = store_drift_map(
        audited, reference, texts, {k: v for k, v in labels.items() if k != "n3"}, n_permutations=100
    )
    assert three["placebo"] is None and "No placebo" in "\n".join(drift_markdown(three))
    # too few members left: an error record with the counts, shown as such
    few = store_drift_map(audited, reference, texts, {"m0": 1, "m1": 1, "n0": 0, "n1": 0})
    assert "finite drift" in few["error"] and few["left_out"] == {"members": 1, "non_members": 0}
    shown = "\n".join(drift_markdown(few))
    assert "No drift map: the drift map needs" in shown and "Left out: 1 member(s)" in shown
    # stores pooled differently are not compared
    chat = cache_provenance(layers=LAYERS, d_model=5, weights_fingerprint="c" * 64, prompt={"prompt_format": "chat"})
    block = RowBlock(
        [text_hash(t) for t in texts.values()],
        list(texts.values()),
        vr.astype(np.float32),
        np.full(7, 5, np.int32),
        np.full(7, 5, np.int32),
        np.zeros(7, bool),
    )
    with StoreWriter(tmp_path / "chat.h5", chat) as writer:
        writer.add(block, flush_every=10**9)
        writer.consolidate()
    other = store_drift_map(audited, ActivationStore(tmp_path / "chat.h5"), texts, labels)
    assert "different prompt settings" in other["error"]
