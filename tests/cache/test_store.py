from __future__ import annotations

import logging

import h5py
import numpy as np
import pytest

from cache.errors import CacheError, StoreFormatError, StoreMismatchError
from cache.fingerprint import text_hash
from cache.store import ActivationStore, RowBlock, StoreWriter, parts_dir

LAYERS = ["embed", "0", "1"]


def provenance(**changes):
    base = {
        "schema_version": 1,
        "weights_fingerprint": "w" * 64,
        "tokenizer_fingerprint": "t" * 64,
        "backend": "hf",
        "backend_flags": {"hook": "forward_hook:block_output"},
        "layers": LAYERS,
        "pooling": {"kind": "mean", "span": "text"},
        "prompt": {"prompt_format": "raw"},
        "compute_dtype": "float32",
        "storage_dtype": "float32",
        "d_model": 4,
        "model": {"source": "/models/a"},
        "created_at": "2026-01-01T00:00:00+00:00",
    }
    base.update(changes)
    return base


def rows(texts, seed=0):
    rng = np.random.default_rng(seed)
    n = len(texts)
    return RowBlock(
        keys=[text_hash(t) for t in texts],
        texts=list(texts),
        activations=rng.normal(size=(n, len(LAYERS), 4)).astype(np.float32),
        n_tokens=np.arange(n, dtype=np.int32) + 5,
        n_pooled=np.arange(n, dtype=np.int32) + 4,
        truncated=np.array([i % 2 == 0 for i in range(n)]),
    )


def write(path, block, prov=None, flush_every=10**9):
    with StoreWriter(path, prov or provenance()) as writer:
        writer.add(block, flush_every=flush_every)
        return writer.consolidate()


def test_round_trip_in_requested_order(tmp_path):
    texts = ["alpha", "beta", "gamma", "δέλτα ✓"]
    block = rows(texts)
    path = tmp_path / "a.h5"
    assert write(path, block) == 4
    store = ActivationStore(path)
    assert len(store) == 4 and store.layer_labels == tuple(LAYERS) and store.d_model == 4
    got = store.get(["gamma", "alpha", "gamma", "δέλτα ✓"])
    np.testing.assert_array_equal(got, block.activations[[2, 0, 2, 3]])
    np.testing.assert_array_equal(store.get(["beta"], layers=["1", "embed"])[0], block.activations[1][[2, 0]])
    meta = store.metadata(["beta", "alpha"])
    assert meta["n_tokens"].tolist() == [6, 5] and meta["truncated"].tolist() == [False, True]
    assert "beta" in store and "zeta" not in store
    assert store.keys() == sorted(block.keys)
    assert sorted(store.texts()) == sorted(texts)
    assert store.get([]).shape == (0, 3, 4)


def test_missing_texts_and_layers_are_named(tmp_path):
    path = tmp_path / "a.h5"
    write(path, rows(["alpha"]))
    store = ActivationStore(path)
    with pytest.raises(KeyError, match="2 of 3 texts are not in"):
        store.get(["alpha", "nope", "neither"])
    with pytest.raises(KeyError, match="layer '7' is not stored"):
        store.get(["alpha"], layers=[7])


def test_append_skips_present_and_keeps_old_rows(tmp_path):
    path = tmp_path / "a.h5"
    first = rows(["a", "b"], seed=1)
    write(path, first)
    second = rows(["b", "c"], seed=2)
    with StoreWriter(path, provenance(created_at="later", device="cuda")) as writer:
        assert writer.existing_keys() == set(first.keys)
        writer.add(second, flush_every=1)
        assert writer.consolidate() == 3
    store = ActivationStore(path)
    np.testing.assert_array_equal(store.get(["a", "b"]), first.activations)  # old row of "b" kept
    np.testing.assert_array_equal(store.get(["c"]), second.activations[1:])


@pytest.mark.parametrize(
    "change,named",
    [
        ({"weights_fingerprint": "x" * 64}, "weights_fingerprint"),
        ({"backend": "nnsight"}, 'backend: file has "hf", this run has "nnsight"'),
        ({"layers": ["0", "1"]}, "layers"),
        ({"pooling": {"kind": "mean", "span": "all"}}, "pooling"),
        ({"storage_dtype": "float16"}, "storage_dtype"),
    ],
)
def test_mismatch_is_refused_naming_the_difference(tmp_path, change, named):
    path = tmp_path / "a.h5"
    write(path, rows(["a"]))
    with pytest.raises(StoreMismatchError) as err:
        with StoreWriter(path, provenance(**change, model={"source": "/models/b"})):
            pass
    message = str(err.value)
    assert named in message and "file model: /models/a; this run: /models/b" in message
    with pytest.raises(StoreMismatchError):
        ActivationStore(path).check_matches(provenance(**change))
    ActivationStore(path).check_matches(provenance(created_at="other", device="mps"))


def test_float16_storage(tmp_path):
    path = tmp_path / "a.h5"
    block = rows(["a", "b"])
    write(path, block, provenance(storage_dtype="float16"))
    store = ActivationStore(path)
    assert store.storage_dtype == "float16"
    got = store.get(["a", "b"])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, block.activations.astype(np.float16).astype(np.float32))


def test_shards_of_an_interrupted_run_are_picked_up(tmp_path, caplog):
    path = tmp_path / "a.h5"
    write(path, rows(["a"]))
    writer = StoreWriter(path, provenance())
    writer.__enter__()
    writer.add(rows(["b", "c"], seed=3), flush_every=1)  # committed shard
    for handle in writer._lock_files:  # simulate the process dying here: no consolidation
        handle.close()
    writer._lock_files = []
    (path.parent / f"{path.name}.tmp-999").write_bytes(b"half a file")  # an interrupted merge
    (parts_dir(path) / "part-000009.h5.tmp").write_bytes(b"half a shard")
    with caplog.at_level(logging.WARNING, logger="cache.store"):
        assert len(ActivationStore(path)) == 1
    assert "interrupted run" in caplog.text
    with StoreWriter(path, provenance()) as again:
        assert again.existing_keys() == {text_hash(t) for t in "abc"}
        assert again.consolidate() == 3
    assert not parts_dir(path).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.h5"]
    np.testing.assert_array_equal(ActivationStore(path).get(["b", "c"]), rows(["b", "c"], seed=3).activations)


def test_concurrent_writer_is_refused(tmp_path):
    path = tmp_path / "a.h5"
    with StoreWriter(path, provenance()):
        with pytest.raises(CacheError, match="another `lara cache` run is writing"):
            with StoreWriter(path, provenance()):
                pass


def test_unreadable_files(tmp_path):
    with pytest.raises(StoreFormatError, match="no activation file"):
        ActivationStore(tmp_path / "none.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(StoreFormatError, match="not a readable HDF5 file"):
        ActivationStore(tmp_path / "text.h5")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = [1, 2]
    with pytest.raises(StoreFormatError, match="not a LaRA activation store"):
        ActivationStore(tmp_path / "other.h5")
    path = tmp_path / "future.h5"
    write(path, rows(["a"]))
    with h5py.File(path, "r+") as f:
        f.attrs["schema_version"] = 99
    with pytest.raises(StoreFormatError, match="schema version 99"):
        ActivationStore(path)


def test_provenance_is_stored_as_attributes(tmp_path):
    path = tmp_path / "a.h5"
    write(path, rows(["a"]))
    with h5py.File(path, "r") as f:
        assert f.attrs["backend"] == "hf"
        assert f.attrs["weights_fingerprint"] == "w" * 64
        assert [x.decode() if isinstance(x, bytes) else x for x in f.attrs["layer_labels"]] == LAYERS
    assert ActivationStore(path).provenance["model"] == {"source": "/models/a"}
