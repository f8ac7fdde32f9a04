"""``compute_metrics``: sets + a real HDF5 activation store → metrics file, checked against
:func:`probes.lara.metrics` on rows read back independently."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cache.store import ActivationStore
from generation.errors import InputError as GenerationInputError
from generation.records import read_sets
from probes import lara
from probes.errors import InputError
from probes.lara.metrics_file import MetricsFile, compute_metrics

from .lara_fixtures import N_CLEAN, N_LABELLED


def _expected(record, store):
    u = store.get([record.question.question, *record.similars]).astype(np.float64)
    w = store.get(record.blanked).astype(np.float64)
    phi = np.stack([store.get(row) for row in record.paraphrases]).astype(np.float64)
    return lara.metrics(u, w, phi)


def test_metrics_file_matches_the_public_function(audit, tmp_path):
    summary = compute_metrics(audit.sets, audit.acts, tmp_path / "m.h5")
    assert summary.n_questions == N_LABELLED + N_CLEAN and summary.n_scored == summary.n_questions
    mf = MetricsFile.read(tmp_path / "m.h5")
    store = ActivationStore(audit.acts)
    records = read_sets(audit.sets)
    assert mf.ids == [r.question.id for r in records]
    assert mf.metrics.shape == (len(records), 3, 3) and mf.layer_labels == ("0", "1", "2")
    for i, record in enumerate(records):
        np.testing.assert_allclose(mf.metrics[i], _expected(record, store), rtol=1e-12, atol=1e-15)
    assert mf.labels.tolist()[:4] == [0, 1, 0, 1] and mf.splits.count("clean_ref") == N_CLEAN
    # raw S_i: the blanking shift of member i at every layer
    first = records[0]
    shift = np.linalg.norm(store.get([first.similars[0]]).astype(np.float64) - store.get([first.blanked[1]]), axis=-1)[
        0
    ]
    np.testing.assert_allclose(mf.S[0, 1], shift, rtol=1e-6)
    p = mf.provenance
    assert p["activations"]["weights_fingerprint"] == store.provenance["weights_fingerprint"]
    assert p["activations"]["n_blocks"] == 3 and p["K"] == 3 and p["M"] == 3
    assert len(p["sets"]["sha256"]) == 64 and p["sets"]["generation"]["backend"] == "offline"


def test_chunking_does_not_change_the_numbers(audit, tmp_path):
    compute_metrics(audit.sets, audit.acts, tmp_path / "big.h5", chunk_mib=512)
    compute_metrics(audit.sets, audit.acts, tmp_path / "one.h5", chunk_mib=1e-6)  # one question per chunk
    big, one = MetricsFile.read(tmp_path / "big.h5"), MetricsFile.read(tmp_path / "one.h5")
    np.testing.assert_array_equal(big.metrics, one.metrics)
    np.testing.assert_array_equal(big.R, one.R)


def test_layer_subset(audit, tmp_path):
    compute_metrics(audit.sets, audit.acts, tmp_path / "all.h5")
    compute_metrics(audit.sets, audit.acts, tmp_path / "sub.h5", layers=["2", "0"])
    full, sub = MetricsFile.read(tmp_path / "all.h5"), MetricsFile.read(tmp_path / "sub.h5")
    assert sub.layer_labels == ("2", "0")
    np.testing.assert_allclose(sub.metrics, full.metrics[:, :, [2, 0]], rtol=1e-12)
    with pytest.raises(InputError, match="layer '7' is not in"):
        compute_metrics(audit.sets, audit.acts, tmp_path / "bad.h5", layers=["7"])


def test_missing_parts_drop_members_and_too_few_give_nan(audit, tmp_path):
    lines = audit.sets.read_text().splitlines()
    rec0, rec1 = json.loads(lines[0]), json.loads(lines[1])
    rec0["similars"][1] = None  # similar 2 failed
    rec0["paraphrases"][3][0] = None  # one paraphrase of member 3 missing: R_3 uses the other two
    rec0["failures"] += [
        {"step": "similars", "member": 2, "reason": "duplicate"},
        {"step": "paraphrases", "member": 3, "reason": "copy_of_source"},
    ]
    rec1["blanked"][1] = rec1["blanked"][2] = None  # only 1 usable similar
    lines[0], lines[1] = json.dumps(rec0), json.dumps(rec1)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    summary = compute_metrics(edited, audit.acts, tmp_path / "m.h5")
    assert summary.reasons == {"too_few_similars": 1}
    mf = MetricsFile.read(tmp_path / "m.h5")
    assert np.isnan(mf.metrics[1]).all() and mf.reasons[1].startswith("too_few_similars")
    assert mf.n_similars[0] == 2 and np.isnan(mf.S[0, 2]).all()
    store = ActivationStore(audit.acts)
    record = read_sets(edited)[0]
    keep = [0, 1, 3]
    u = store.get([record.question.question, *record.similars[:1], record.similars[2]]).astype(np.float64)
    w = store.get([record.blanked[i] for i in keep]).astype(np.float64)
    deltas = u - w
    s = np.linalg.norm(deltas, axis=-1)
    zrsm = (s[0] - s[1:].mean(axis=0)) / (s[1:].std(axis=0, ddof=1) + 1e-8)
    np.testing.assert_allclose(mf.metrics[0, 0], zrsm, rtol=1e-12)
    phi3 = store.get(record.paraphrases[3][1:]).astype(np.float64)
    r3 = np.linalg.norm(phi3 - phi3.mean(axis=0), axis=-1).mean(axis=0)
    np.testing.assert_allclose(mf.R[0, 3], r3, rtol=1e-12)


def test_uncached_texts_are_refused_with_the_fix(audit, tmp_path):
    lines = audit.sets.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["paraphrases"][0][0] = "A paraphrase that was never cached, with [BLANK] in it."
    edited = tmp_path / "edited.jsonl"
    edited.write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match=r"1 of \d+ texts .* are not in .*lara cache"):
        compute_metrics(edited, audit.acts, tmp_path / "m.h5")
    assert not (tmp_path / "m.h5").exists()


def test_not_a_sets_file_is_refused(tmp_path, audit):
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "1", "question": "What is 2 + 2?"}\n')
    with pytest.raises(GenerationInputError, match="not a perturbation set"):
        compute_metrics(bad, audit.acts, tmp_path / "m.h5")
    with pytest.raises(InputError, match="not a LaRA metrics file"):
        MetricsFile.read(audit.acts)


def test_a_question_with_a_nan_metric_is_counted_from_the_values(audit, tmp_path):
    """A NaN activation row written around the cache's check makes its question's metrics NaN with no
    recorded reason: the summary counts it from the values (before: "0 NaN")."""
    import shutil

    import h5py

    acts = tmp_path / "acts.h5"
    shutil.copy(audit.acts, acts)
    original = read_sets(audit.sets)[3].question.question
    with h5py.File(acts, "r+") as f:
        texts = [t.decode() if isinstance(t, bytes) else t for t in f["texts"][:]]
        f["activations"][texts.index(original)] = np.nan
    summary = compute_metrics(audit.sets, acts, tmp_path / "m.h5")
    assert summary.reasons == {"non_finite_values": 1} and summary.n_scored == summary.n_questions - 1
    assert "1 NaN" in summary.describe() and "non_finite_values 1" in summary.describe()
    assert MetricsFile.read(tmp_path / "m.h5").reasons[3].startswith("non_finite_values")
