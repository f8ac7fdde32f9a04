"""The GSM-Symbolic testbed (issue 24): its filter, its shipped checkpoints, and a real gsm-smoke
build. The build and the draws need reasoning-gym (the ``gsm`` extra) and skip without it; CI
installs the extra after the default run and runs this file again (.ci/run)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from probes.testbed.build import PRESETS
from probes.testbed.gsm import learnable, to_problem
from probes.testbed.problems import parse_answer
from probes.testbed.training import _length_batches

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "probes" / "testbed" / "checkpoints" / "gsm-seed0"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _example(question: str, cot: str, **variables) -> dict:
    return {"question": question, "metadata": {"answer_cot": cot, "variables": variables}}


def test_the_filter_keeps_whole_numbers_below_1000_and_short_texts():
    question = "Mia has 12 boxes of 4 pens. How many pens?"
    assert learnable(question, "12*4=48\n#### 48")
    assert not learnable(question, "12*4=48.5\n#### 48")  # a decimal
    assert not learnable(question, "12*400=4,800\n#### 4800")  # 4,800 > 999 (commas read as digits)
    assert not learnable("Mia has 1,200 pens. How many?", "#### 1200")
    assert not learnable(question, "12*4=48")  # no final '#### n' line
    assert not learnable(question, "x" * 401 + "\n#### 48")  # solution too long
    assert not learnable("y" * 481, "#### 48")  # question too long


def test_a_draw_becomes_a_problem_keyed_by_template_and_numbers_not_names():
    a = to_problem(
        7, _example("Ann has 3 bags of 5 figs. How many figs?", "3*5=15\n#### 15", name="Ann", bags=3, figs=5, total=15)
    )
    b = to_problem(
        7, _example("Bo has 3 bags of 5 figs. How many figs?", "3*5=15\n#### 15", name="Bo", bags=3, figs=5, total=15)
    )
    assert a.answer == 15 and a.solution.endswith("#### 15") and a.question.startswith("Ann")
    assert a.key == b.key == (7, (("bags", 3), ("figs", 5), ("total", 15)))
    assert to_problem(7, _example("Ann has 3 bags of 5.5 figs.", "#### 16", bags=3)) is None


def test_parse_answer_reads_our_final_sentence_and_gsm8k_final_line():
    assert parse_answer("So he writes 960/60=16 hours a week\n#### 16") == 16
    assert parse_answer("7 * 6 = 42. The answer is 42.") == 42
    assert parse_answer("#### -3") == -3
    assert parse_answer("no final line") is None


def test_the_cli_offers_exactly_the_presets():
    from probes.commands.testbed import PRESET_NAMES

    assert set(PRESET_NAMES) == set(PRESETS)


def test_a_missing_gsm_extra_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from probes.cli import main
    from probes.testbed import gsm

    gsm.generators.cache_clear()
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import reasoning_gym now raises ImportError
    try:
        code = main(["testbed", "build", "--out", str(tmp_path / "tb"), "--preset", "gsm-smoke"])
    finally:
        gsm.generators.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ['error: the gsm testbed needs reasoning-gym: pip install -e ".[gsm]" (or pip install reasoning-gym)']
    assert not (tmp_path / "tb").exists() and not list(tmp_path.iterdir())  # nothing half-written


def test_one_length_bucket_draws_batches_exactly_as_before():
    """The cpu preset (one bucket) must rebuild its shipped checkpoints: the batches it draws are
    the old loop's (next batch_size indices of a reshuffled order)."""
    encoded = [[0] * (i % 7 + 1) for i in range(50)]
    rng_new, rng_old = random.Random(3), random.Random(3)
    order_new: list[int] = []
    order_old: list[int] = []
    for _ in range(9):
        while len(order_new) < 16:
            order_new += rng_new.sample(range(50), 50)
        batches, order_new = _length_batches(order_new, encoded, 16, 1, rng_new)
        if len(order_old) < 16:
            order_old += rng_old.sample(range(50), 50)
        old, order_old = order_old[:16], order_old[16:]
        assert batches == [old]


def test_length_buckets_cut_by_length_and_keep_every_problem_once():
    encoded = [[0] * ((i * 37) % 23 + 1) for i in range(64)]
    order = random.Random(0).sample(range(64), 64)
    batches, rest = _length_batches(order, encoded, 8, 8, random.Random(1))
    assert rest == [] and sorted(i for b in batches for i in b) == list(range(64)) and all(len(b) == 8 for b in batches)
    spans = sorted((min(len(encoded[i]) for i in b), max(len(encoded[i]) for i in b)) for b in batches)
    assert all(hi <= lo_next for (_, hi), (lo_next, _) in zip(spans, spans[1:]))  # batches do not interleave by length


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="the GSM testbed is not built here")
def test_the_shipped_gsm_testbed_is_disjoint_template_matched_and_recorded():
    manifest = json.loads((SHIPPED / "testbed.json").read_text())
    questions, pool = _rows(SHIPPED / "questions.jsonl"), _rows(SHIPPED / "sft_pool.jsonl")
    assert manifest["preset"] == "gsm" and manifest["command"].startswith("lara testbed build")
    assert set(manifest["versions"]) == {"reasoning-gym", "transformers", "tokenizers", "torch"}
    for stage in ("sft", "rl"):
        assert set(manifest["accuracy"][stage]) == {"members", "non_members", "test"}

    def key(row: dict) -> tuple:
        return (row["template"], tuple(sorted(row["numbers"].items())))

    keys = {
        split: {key(q["extra"]) for q in questions if q["split"] == split}
        for split in ("member", "non_member", "clean_ref")
    }
    keys["sft"] = {key(r) for r in pool}
    assert [len(keys[s]) for s in ("member", "non_member", "clean_ref", "sft")] == [150, 150, 100, 12000]
    names = list(keys)
    assert all(not keys[a] & keys[b] for i, a in enumerate(names) for b in names[i + 1 :])
    assert sorted(q["extra"]["template"] for q in questions if q["split"] == "member") == sorted(
        q["extra"]["template"] for q in questions if q["split"] == "non_member"
    )
    for q in questions:
        assert q["source"] == "gsm-symbolic" and q["extra"]["template"] in manifest["problems"]["templates"]
        assert learnable(q["question"], q["extra"]["solution"]) and parse_answer(q["extra"]["solution"]) == q["answer"]
    assert set(manifest["rl_trained_on"]) == {q["id"] for q in questions if q["split"] == "member"}
    size = sum(f.stat().st_size for f in SHIPPED.rglob("*.safetensors"))
    assert size <= 15e6, f"checkpoints {size / 1e6:.1f} MB"


def test_a_gsm_smoke_build_runs_end_to_end(tmp_path):
    pytest.importorskip("reasoning_gym")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from probes.cli import main

    out = tmp_path / "gsm"
    assert main(["testbed", "build", "--out", str(out), "--preset", "gsm-smoke", "--seed", "1"]) == 0
    manifest = json.loads((out / "testbed.json").read_text())
    assert manifest["command"] == f"lara testbed build --out {out} --preset gsm-smoke --seed 1"
    assert manifest["versions"]["reasoning-gym"] and manifest["problems"]["n_templates"] >= 30
    questions = _rows(out / "questions.jsonl")
    assert {q["split"] for q in questions} == {"member", "non_member", "clean_ref"}
    assert all(learnable(q["question"], q["extra"]["solution"]) for q in questions)
    assert set(manifest["rl_trained_on"]) == {q["id"] for q in questions if q["label"] == 1}
    pool_keys = {(r["template"], tuple(sorted(r["numbers"].items()))) for r in _rows(out / "sft_pool.jsonl")}
    assert not pool_keys & {(q["extra"]["template"], tuple(sorted(q["extra"]["numbers"].items()))) for q in questions}
    model = AutoModelForCausalLM.from_pretrained(out / "rl")
    tokenizer = AutoTokenizer.from_pretrained(out / "rl")
    ids = tokenizer(f"Q: {questions[0]['question']}\nA: {questions[0]['extra']['solution']}")["input_ids"]
    assert len(ids) < model.config.n_positions


def test_gsm_splits_are_reproducible_from_the_seed():
    pytest.importorskip("reasoning_gym")
    from probes.testbed.gsm import draw_gsm, usable_templates
    from probes.testbed.problems import make_splits

    templates = usable_templates(0)
    a = make_splits(300, 20, 10, 4, draw=draw_gsm, templates=templates)
    b = make_splits(300, 20, 10, 4, draw=draw_gsm, templates=templates)
    c = make_splits(300, 20, 10, 5, draw=draw_gsm, templates=templates)
    assert a == b and a.members != c.members


def test_sft_without_prompt_loss_trains_on_the_solution_and_eos_only():
    """The logged first-step loss is the mean cross-entropy of the solution tokens and EOS alone,
    computed here one problem and one token at a time on a copy of the initial weights."""
    import copy
    import math

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from cache.toymodels import train_tokenizer
    from probes.testbed.problems import make_splits
    from probes.testbed.training import SFTSettings, supervised_finetune

    problems = make_splits(60, 3, 2, seed=1).sft[:6]
    tokenizer = train_tokenizer(300, texts=[p.text() for p in problems] * 5, split_digits=True)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=128,
        n_embd=32,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)  # no dropout: the logged loss is then a function of the weights
    initial = copy.deepcopy(model).eval()
    logged: list[dict] = []
    settings = SFTSettings(steps=1, batch_size=len(problems), lr=1e-3, warmup=1, prompt_loss=False)
    supervised_finetune(model, tokenizer, problems, settings, seed=0, log=logged.append, log_every=1)

    total, count = 0.0, 0
    with torch.no_grad():
        for p in problems:
            prompt = tokenizer(p.prompt())["input_ids"]
            ids = tokenizer(p.text())["input_ids"] + [tokenizer.eos_token_id]
            assert ids[: len(prompt)] == prompt
            logits = initial(input_ids=torch.tensor([ids])).logits[0]
            for t in range(len(prompt), len(ids)):  # token t predicted from position t - 1
                total -= float(torch.log_softmax(logits[t - 1].double(), -1)[ids[t]])
                count += 1
    assert math.isclose(logged[0]["loss"], total / count, rel_tol=1e-4)
