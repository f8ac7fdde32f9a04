"""A MATH-500-shaped benchmark built with ``datasets``, imported and paired by the CLI, audited by
``lara run`` end to end on the smoke testbed's tiny model; the questions' provenance reaches the
run directory and the report."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from probes.cli import main

datasets = pytest.importorskip("datasets")

SUBJECTS = ["Algebra", "Number Theory", "Geometry", "Prealgebra"]


def math500_rows(rng: random.Random, prefix: str, n: int) -> list[dict]:
    rows = []
    for k in range(n):
        a, b, c = rng.randint(2, 40), rng.randint(2, 12), rng.randint(1, 30)
        problem = rng.choice(
            [
                rf"If $f(x) = {a}x + {b}$, what is $f({c})$?",
                rf"What is the remainder when ${a}^{{{b}}}$ is divided by ${c + 1}$?",
                rf"A rectangle has sides ${a}$ and ${b}$. What is its area, in square units?",
                rf"Compute $\frac{{{a * b}}}{{{b}}} + {c}$.",
            ]
        )
        rows.append(
            {
                "problem": problem,
                "solution": r"We compute directly. $\boxed{1}$",
                "answer": "1",
                "subject": rng.choice(SUBJECTS),
                "level": rng.randint(1, 5),
                "unique_id": f"{prefix}/{k}.json",
            }
        )
    return rows


@pytest.mark.slow
def test_an_imported_math500_set_runs_end_to_end(smoke_testbed, tmp_path, capsys):
    testbed, _ = smoke_testbed
    rng = random.Random(0)
    files = {}
    for name, n, flags in (
        ("members", 10, ["--label", "1"]),
        ("nonmembers", 10, ["--label", "0"]),
        ("clean", 8, ["--split-name", "clean_ref"]),
    ):
        datasets.Dataset.from_list(math500_rows(rng, name, n)).save_to_disk(str(tmp_path / name))
        files[name] = tmp_path / f"{name}.jsonl"
        assert (
            main(
                [
                    "-q",
                    "questions",
                    "import",
                    str(tmp_path / name),
                    "--preset",
                    "math500",
                    *flags,
                    "-o",
                    str(files[name]),
                ]
            )
            == 0
        )
    questions = tmp_path / "questions.jsonl"
    assert (
        main(
            [
                "-q",
                "questions",
                "pair",
                "--members",
                str(files["members"]),
                "--nonmembers",
                str(files["nonmembers"]),
                "--clean-ref",
                str(files["clean"]),
                "-o",
                str(questions),
            ]
        )
        == 0
    )
    config = {
        "questions": str(questions),
        "run_dir": "run",
        "name": "rl",
        "model": {"source": str(testbed / "rl"), "device": "cpu", "dtype": "float32"},
        "generation": {"similars": 2, "paraphrases": 2},
        "extraction": {"layers": "all", "batch_size": 32},
        "score": {"clean_ref": "split"},
        "detect": {
            "names": ["ppl", "zlib"],
            "prompt_format": "raw",
            "template": "Problem: {prompt}\nAnswer:",
            "params": {"ppl": {"max_new_tokens": 16}, "zlib": {"max_new_tokens": 16}},
        },
        "fusion": [],
        "calibration": {"controls": 2},
        "verdict": {"permutations": 200, "bootstrap": 50},
        "evaluate": {"bootstrap": 50, "plots": False},
    }
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert main(["-q", "run", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Verdict on rl" in out
    run = tmp_path / "run"
    scores = (run / "rl" / "scores.csv").read_text().splitlines()
    assert scores[0].startswith("id,") and "ppl" in scores[0] and "lara" in scores[0] and len(scores) == 1 + 28
    report = json.loads((run / "rl" / "report" / "report.json").read_text())
    provenance = report["inputs"]["questions_provenance"]
    assert provenance[0]["pairing"]["duplicates_removed"] == 0
    assert [p["preset"] for p in provenance[1:]] == ["math500"] * 3 and all(
        p["kind"] == "saved dataset" for p in provenance[1:]
    )
    assert json.loads((run / "questions.meta.json").read_text())["pairing"]["inputs"]["members"] == str(
        files["members"]
    )
