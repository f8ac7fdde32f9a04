"""One story on clean questions (issue 56, item 7): a user audits 24 questions of their own that the
RL phase never saw (a shipped testbed's held-out problems: ours, and GSM-Symbolic's in the slow tier) with ``lara run``, the checkpoint
before RL as reference. No sentence or column of either model's report, printed verdict or
``verdict.json`` may claim contamination, and the reference's own report never asks for itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from probes.pipeline import load_run_config, run_pipeline
from probes.report.verdict_text import describe_verdict

CHECKPOINTS = Path(__file__).resolve().parents[2] / "probes" / "testbed" / "checkpoints"
# each testbed's held-out problems, with its answers' budget (GSM-Symbolic's answers run to 168 tokens)
TESTBEDS = [("cpu-seed0", 48), pytest.param(("gsm-seed0", 176), marks=pytest.mark.slow, id="gsm-seed0")]
FRACTION_HEADER = "contaminated fraction ≥"


def claims(text: str) -> list[str]:
    """Every sentence or table cell of ``text`` that says the questions (or some) are contaminated."""
    found = re.findall(r"(?<!NO )\bCONTAMINATED\b[^\n]*", text)
    found += [
        m.group(0) for m in re.finditer(r"[Aa]t least (\d+) of the \d+[^\n.]*contaminated", text) if int(m.group(1))
    ]
    for line in text.splitlines():
        flagged = re.search(r"\b(\d+) of \d+ (?:tested )?(?:questions? )?(?:tested )?flagged", line)
        if flagged and int(flagged.group(1)) and "not a finding" not in line:
            found.append(line)
    column = None
    for line in text.splitlines():  # a table whose header has the fraction column
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            column = None
        elif any(FRACTION_HEADER in c for c in cells):
            column = next(i for i, c in enumerate(cells) if FRACTION_HEADER in c)
        elif column is not None and len(cells) > column and re.match(r"0\.\d*[1-9]|[1-9]", cells[column]):
            found.append(line)
    return found


def json_claims(verdict: dict) -> list[str]:
    out = ["reject"] if verdict.get("reject") else []
    for mode, record in verdict.get("modes", {}).items():
        for name, r in record["detectors"].items():
            fraction = r["contaminated_fraction"]
            if not record["reject"] and fraction["value"] is not None:
                out.append(
                    f"{mode}/{name}: contaminated fraction {fraction['value']} reported as {fraction['reported_as']}"
                )
    for name, sub in (verdict.get("subsets") or {}).items():
        out += [f"subset {name}: reject"] if sub.get("reject") else []
    questions = verdict.get("questions") or {}
    if (questions.get("at_least") or {}).get("value"):
        out.append(f"at least {questions['at_least']['value']}")
    return out


@pytest.fixture(scope="module", params=TESTBEDS, ids=lambda p: p[0])
def clean_run(request, tmp_path_factory):
    name, budget = request.param
    testbed = CHECKPOINTS / name
    tmp = tmp_path_factory.mktemp("clean")
    rows = [json.loads(line) for line in (testbed / "questions.jsonl").read_text().splitlines()]
    own = [{k: v for k, v in r.items() if k not in ("label", "split")} for r in rows if r["split"] == "clean_ref"][:24]
    (tmp / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in own))
    config = {
        "questions": "questions.jsonl",
        "run_dir": "run",
        "name": "rl",
        "model": {"source": str(testbed / "rl"), "device": "cpu", "dtype": "float32"},
        "controls": [{"name": "before_rl", "source": str(testbed / "sft"), "reference": True}],
        "lara": False,
        "generation": {"similars": 3, "paraphrases": 1},
        "detect": {
            "names": ["ppl", "min_k", "zlib", "reward_gain"],
            "prompt_format": "raw",
            "template": "Q: {prompt}\nA:",
            "sampling_temperature": 1.0,
            "params": {n: {"max_new_tokens": budget} for n in ("ppl", "min_k", "zlib")}
            | {"reward_gain": {"n": 4, "max_new_tokens": budget}},
        },
        "fusion": [],
        "calibration": {"controls": 3, "decision_controls": 3, "detectors": ["ppl", "min_k", "zlib", "reward_gain"]},
        "verdict": {"permutations": 2000, "bootstrap": 200},
        "evaluate": {"plots": False},
    }
    path = tmp / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    run_pipeline(load_run_config(path), progress=False)
    return tmp / "run"


@pytest.mark.parametrize("model", ["rl", "before_rl"])
def test_no_sentence_or_column_claims_contamination_on_clean_questions(clean_run, model):
    verdict = json.loads((clean_run / model / "verdict.json").read_text())
    report = (clean_run / model / "report" / "report.md").read_text()
    printed = describe_verdict(verdict)
    assert verdict["mode"] is not None and verdict["n"] == 24
    assert not claims(report) and not claims(printed), claims(report) + claims(printed)
    assert not json_claims(verdict), json_claims(verdict)
    if model == "before_rl":  # the reference is audited without a reference of its own
        told = re.findall(r"give (?:a reference model|the checkpoint before rl)[^\n]*", (report + printed).lower())
        assert not told, told
        if not verdict["calibrated"]:
            assert "is the run's reference" in printed


def test_the_claim_reader_can_fail():
    """The reader itself finds each kind of claim it looks for."""
    assert claims("Verdict: CONTAMINATED at alpha = 0.05")
    assert not claims("NO CALIBRATED VERDICT (absolute: no signal); not flagged")
    assert claims("**At least 3 of the 24 tested questions are contaminated** (95% lower bound)")
    assert not claims("**At least 0 of the 24 tested questions are contaminated** — that is, none for certain.")
    assert claims("which questions: 1 of 24 tested flagged at FDR 10%")
    assert not claims("which questions: 1 of 24 tested flagged at FDR 10% (… a lead to check, not a finding.)")
    table = f"| Detector | within-AUC | p | {FRACTION_HEADER} [95% CI] | n |\n|---|---|---|---|---|\n"
    assert claims(table + "| ppl | 0.55 [0.4, 0.7] | 0.2 | 0.20 [0.00, 0.60] | 24 |")
    assert not claims(table + "| ppl | 0.55 [0.4, 0.7] | 0.2 | – (not rejected) | 24 |")
    assert not claims(table + "| ppl | 0.55 [0.4, 0.7] | 0.2 | 0.00 [0.00, 0.10] | 24 |")
