"""``lara_core.files``: the one temp-file-then-rename writer and the file hash every package shares."""

from __future__ import annotations

import hashlib

import pytest

from lara_core.files import atomic_path, file_sha256, write_text_atomically


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "scores.csv"
    target.write_text("old\n")
    write_text_atomically(target, "new\n")
    assert target.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]
    with atomic_path(target, durable=True) as tmp:
        assert tmp.name == "scores.csv.tmp" and target.read_text() == "new\n"  # the old file until the rename
        tmp.write_text("durable\n")
    assert target.read_text() == "durable\n" and not tmp.exists()


def test_an_error_mid_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    target = tmp_path / "sets.jsonl"
    target.write_text("kept\n")
    with pytest.raises(KeyboardInterrupt), atomic_path(target, suffix=".tmp-7") as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["sets.jsonl"]


def test_the_file_hash_is_the_sha256_of_its_bytes(tmp_path):
    path = tmp_path / "blob"
    data = bytes(range(256)) * 5000  # over one 1 MiB read block
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
