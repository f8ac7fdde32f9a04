"""``lara questions pair``: planted exact and near duplicates are removed and listed, ids that clash
across sets are renamed, the balance table is printed, and a planted confound is warned about."""

from __future__ import annotations

import json
import random
from pathlib import Path

from generation.records import Question, read_questions
from probes.cli import main
from probes.questions.pairing import normalise, pair_sets


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def word_problem(rng: random.Random, k: int) -> str:
    name = rng.choice(["Ava", "Ben", "Chen", "Dara", "Eli", "Farah"])
    a, b = rng.randint(2, 90), rng.randint(2, 90)
    return f"{name} has {a} apples and buys {b} more on day {k}. How many apples does {name} have now?"


def olympiad_problem(rng: random.Random, k: int) -> str:
    n, m = rng.randint(3, 40), rng.randint(2, 9)
    return (
        rf"Let $f:\mathbb{{R}}\to\mathbb{{R}}$ satisfy $f(x+{n}) = f(x)^{{{m}}} + {k}$ for all real $x$. "
        rf"Determine every such function, and prove that $\sum_{{i=1}}^{{{n}}} f(i) \geq {m * k}$ holds."
    )


def test_pair_sets_removes_exact_and_near_duplicates_with_priority():
    members = [Question("m1", "What is 2 + 2?"), Question("m2", "Compute the area of a 3 by 4 rectangle.")]
    nonmembers = [
        Question("n1", "  what is 2 +   2? "),  # exact after normalising
        Question("n2", "Compute the area of a 3 by 4 rectangles."),  # near (ratio ≈ 0.99)
        Question("m1", "A different question that reuses an id."),  # id clash, kept and renamed
        Question("n3", "What is 3 + 5?"),
    ]  # other numbers: another problem, kept
    clean = [Question("c1", "What is 2 + 2?"), Question("c2", "Name a prime above 10.")]
    paired = pair_sets({"members": members, "non_members": nonmembers, "clean_ref": clean}, near=0.9)
    dropped = {(d.dropped_set, d.dropped, d.kept) for d in paired.duplicates}
    assert dropped == {("non_members", "n1", "m1"), ("non_members", "n2", "m2"), ("clean_ref", "c1", "m1")}
    exact = {d.dropped: d.similarity for d in paired.duplicates}
    assert exact["n1"] == 1.0 and 0.9 <= exact["n2"] < 1.0
    assert [(q.id, q.label, q.split) for q in paired.questions] == [
        ("m1", 1, None),
        ("m2", 1, None),
        ("non_members/m1", 0, None),
        ("n3", 0, None),
        ("c2", None, "clean_ref"),
    ]
    assert paired.renamed == {"non_members/m1": "m1"} and normalise("A\u00a0 B ") == "a b"


def test_pair_cli_lists_duplicates_prints_balance_and_writes_a_labelled_file(tmp_path, capsys):
    rng = random.Random(0)
    members = write(
        tmp_path / "m.jsonl", [{"id": f"m{k}", "question": word_problem(rng, k), "source": "gsm"} for k in range(40)]
    )
    rows = [{"id": f"n{k}", "question": word_problem(rng, k + 100), "source": "gsm"} for k in range(40)]
    first = json.loads(members.read_text().splitlines()[0])["question"]
    rows += [
        {"id": "dup-exact", "question": first.upper()},
        {"id": "dup-near", "question": first.replace("apples", "apple")},
    ]
    nonmembers = write(tmp_path / "n.jsonl", rows)
    out = tmp_path / "pairs.jsonl"
    assert (
        main(["-q", "questions", "pair", "--members", str(members), "--nonmembers", str(nonmembers), "-o", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "80 questions kept of 82; 2 duplicate(s) removed" in text
    assert (
        "non_members dup-exact duplicates members m0 (exact)" in text
        and "non_members dup-near duplicates members m0 (near" in text
    )
    assert "balance:" in text and "quantities" in text and "warning:" not in text
    qs = read_questions(out)
    assert sum(q.label == 1 for q in qs) == 40 and sum(q.label == 0 for q in qs) == 40
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert {d["dropped"] for d in meta["pairing"]["duplicates"]} == {"dup-exact", "dup-near"}
    assert meta["pairing"]["blind_baseline"]["confounded"] is False


def test_pair_cli_warns_on_a_planted_confound(tmp_path, capsys):
    rng = random.Random(1)
    members = write(
        tmp_path / "m.jsonl",
        [{"id": f"m{k}", "question": olympiad_problem(rng, k), "source": "olympiad"} for k in range(40)],
    )
    nonmembers = write(
        tmp_path / "n.jsonl", [{"id": f"n{k}", "question": word_problem(rng, k), "source": "gsm"} for k in range(40)]
    )
    out = tmp_path / "pairs.jsonl"
    assert (
        main(["-q", "questions", "pair", "--members", str(members), "--nonmembers", str(nonmembers), "-o", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "warning: the blind baseline" in text and "olympiad (40)" in text and "gsm (40)" in text
    assert json.loads(out.with_suffix(".meta.json").read_text())["pairing"]["blind_baseline"]["confounded"] is True


def test_the_same_problem_from_two_sources_is_a_duplicate_and_other_numbers_are_not():
    """Before, only texts with identical number sequences were compared, so these passed as distinct
    (rapidfuzz ratios of 0.875-0.993 after normalising case and spaces)."""
    from probes.questions.canonical import canonical

    pairs = [
        ("Find the number of positive divisors of 1000.", "Problem 5. Find the number of positive divisors of 1,000."),
        (
            "Find the remainder when 7^100 is divided by 13.",
            "(2024 AIME I) Find the remainder when $7^{100}$ is divided by 13.",
        ),
        (r"Compute $\frac12 + \frac{1}{3}$.", r"Compute \(\dfrac{1}{2}+\frac13\)."),
        (
            "How many ways can 6 people sit at a round table? [HMMT 2019]",
            "12. How many ways can 6 people sit at a round table?",
        ),
    ]
    for member, nonmember in pairs:
        assert canonical(member) == canonical(nonmember), (member, nonmember)
        paired = pair_sets({"members": [Question("m", member)], "non_members": [Question("n", nonmember)]})
        assert [d.dropped for d in paired.duplicates] == ["n"], (member, nonmember)
    templated = [
        Question("m", "Ava has 1,000 apples and gives 3 to Ben. How many are left?"),
        Question("n", "Ava has 1,200 apples and gives 3 to Ben. How many are left?"),
        Question("k", r"Compute $\frac12 + \frac{1}{5}$."),
    ]
    kept = pair_sets(
        {"members": templated[:1], "non_members": templated[1:] + [Question("z", r"Compute $\frac12 + \frac{1}{3}$.")]}
    )
    assert not kept.duplicates  # other numbers: other problems
    # brackets and leading numbers that are mathematics, not numbering or source tags
    distinct = [
        ("Find the least x with 3^x = 1 (mod 2023).", "Find the least x with 3^x = 1 (mod 2021)."),
        ("Let f(x) = x^2 + 1. Compute f(2024)", "Let f(x) = x^2 + 1. Compute f(2019)"),
        ("How many primes lie in [1, 2000]", "How many primes lie in [1, 2024]"),
        (
            "Exercise 30 minutes a day for 7 days: how many minutes?",
            "Exercise 45 minutes a day for 7 days: how many minutes?",
        ),
    ]
    for a, b in distinct:
        assert canonical(a) != canonical(b), (a, b)
        assert not pair_sets({"members": [Question("m", a)], "non_members": [Question("n", b)]}).duplicates, (a, b)


def test_pairing_is_an_operation_the_command_prints(tmp_path, capsys):
    """Issue 57: ``lara questions pair`` was a whole operation inside a command; it is
    ``probes.operations.pair_questions`` now, whose outcome the command only prints."""
    import pytest

    from probes.errors import InputError
    from probes.operations.pair_questions import PairSettings, pair_questions

    rng = random.Random(3)
    members = write(tmp_path / "m.jsonl", [{"id": f"m{k}", "question": word_problem(rng, k)} for k in range(12)])
    nonmembers = write(
        tmp_path / "n.jsonl", [{"id": f"n{k}", "question": word_problem(rng, 100 + k)} for k in range(12)]
    )
    done = pair_questions({"members": members, "non_members": nonmembers}, tmp_path / "api.jsonl", PairSettings())
    assert done.read == 24 and done.written == [tmp_path / "api.jsonl", tmp_path / "api.meta.json"]
    argv = [
        "questions",
        "pair",
        "--members",
        str(members),
        "--nonmembers",
        str(nonmembers),
        "-o",
        str(tmp_path / "cli.jsonl"),
    ]
    assert main(argv) == 0
    assert (tmp_path / "cli.jsonl").read_text() == (tmp_path / "api.jsonl").read_text()
    assert f"{len(done.paired.questions)} questions kept of 24" in capsys.readouterr().out
    with pytest.raises(InputError, match=r"--near 0: give a ratio in \(0, 1\]"):
        PairSettings(near=0)
