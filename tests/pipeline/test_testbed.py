"""A real smoke-preset testbed build: splits, training set, checkpoints, labels."""

from __future__ import annotations

import json

import pytest

from probes.testbed.problems import TEMPLATES


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_smoke_build_writes_everything(smoke_testbed):
    out, manifest = smoke_testbed
    for name in (
        "sft/model.safetensors",
        "rl/model.safetensors",
        "sft/tokenizer.json",
        "questions.jsonl",
        "sft_pool.jsonl",
        "train_log.jsonl",
        "testbed.json",
    ):
        assert (out / name).is_file(), name
    assert json.loads((out / "testbed.json").read_text()) == manifest
    assert manifest["preset"] == "smoke" and manifest["seed"] == 0
    assert "lara testbed build" in manifest["command"] and "--seed 0" in manifest["command"]
    for stage in ("sft", "rl"):
        for split in ("members", "non_members", "test"):
            assert 0.0 <= manifest["accuracy"][stage][split] <= 1.0
    log = _rows(out / "train_log.jsonl")
    assert {r["stage"] for r in log} == {"sft", "grpo"}
    assert max(r["step"] for r in log if r["stage"] == "sft") == manifest["settings"]["sft"]["steps"]
    assert max(r["epoch"] for r in log if r["stage"] == "grpo") == manifest["settings"]["grpo"]["epochs"]


def test_splits_are_disjoint_and_labels_match(smoke_testbed):
    out, manifest = smoke_testbed
    questions = _rows(out / "questions.jsonl")
    pool = _rows(out / "sft_pool.jsonl")

    def key(row):
        return (row["template"], tuple(sorted(row["numbers"].items())))

    by_split: dict[str, set] = {}
    for q in questions:
        by_split.setdefault(q["split"], set()).add(key(q["extra"]))
        assert q["label"] == {"member": 1, "non_member": 0, "clean_ref": None}[q["split"]]
    by_split["sft"] = {key(r) for r in pool}
    names = list(by_split)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not by_split[a] & by_split[b], f"{a} and {b} overlap"
    sizes = manifest["splits"]
    assert len(by_split["member"]) == sizes["members"] and len(by_split["non_member"]) == sizes["non_members"]
    assert len(by_split["clean_ref"]) == sizes["test"] and len(by_split["sft"]) == sizes["sft"]
    assert len({q["id"] for q in questions} | {r["id"] for r in pool}) == len(questions) + len(pool)
    # every member's non-member twin shares its template
    members = sorted(q["extra"]["template"] for q in questions if q["split"] == "member")
    assert members == sorted(q["extra"]["template"] for q in questions if q["split"] == "non_member")
    # the question text is the template filled in, and the answer solves it
    for q in questions:
        assert q["question"].split()[-1] == TEMPLATES[q["extra"]["template"]].text.split()[-1]
        assert q["extra"]["solution"].endswith(f"The answer is {q['answer']}.")


def test_grpo_trained_on_the_members_and_nothing_else(smoke_testbed):
    out, manifest = smoke_testbed
    questions = _rows(out / "questions.jsonl")
    members = {q["id"] for q in questions if q["label"] == 1}
    assert set(manifest["rl_trained_on"]) == members
    assert not set(manifest["rl_trained_on"]) & {r["id"] for r in _rows(out / "sft_pool.jsonl")}


def test_checkpoints_reload_and_rl_moved_the_weights(smoke_testbed):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cache.config import ModelConfig
    from cache.loading import load_model

    out, manifest = smoke_testbed
    sft = AutoModelForCausalLM.from_pretrained(out / "sft")
    rl = AutoModelForCausalLM.from_pretrained(out / "rl")
    moved = [n for (n, a), (_, b) in zip(sft.named_parameters(), rl.named_parameters()) if not torch.equal(a, b)]
    assert len(moved) > len(list(sft.parameters())) // 2
    loaded = load_model(ModelConfig(source=str(out / "rl"), device="cpu"))
    assert loaded.layout.n_blocks == manifest["settings"]["n_layer"]
    tokenizer = AutoTokenizer.from_pretrained(out / "rl")
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("12 + 305 = 317.")["input_ids"])
    digits = [t for t in tokens if any(c.isdigit() for c in t)]
    assert digits == list("12305317"), tokens  # one digit per token


def test_existing_directory_is_refused(tmp_path):
    from probes.errors import InputError
    from probes.testbed import build_testbed

    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="--overwrite"):
        build_testbed(tmp_path / "x", "smoke")
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


def test_problem_ids_do_not_reveal_the_split(smoke_testbed):
    out, _ = smoke_testbed
    ids = [q["id"] for q in _rows(out / "questions.jsonl")]
    assert all(i.startswith("tb") and len(i) == 14 for i in ids)
    assert len(set(ids)) == len(ids)
