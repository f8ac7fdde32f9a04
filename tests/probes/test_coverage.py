"""What real text allowed each detector (``verdict.json``'s ``coverage``): decided questions and,
by reason, the others — from real perturbation sets and score tables built here."""

from __future__ import annotations

import numpy as np

from generation.records import Failure, Question, empty_set
from probes.detectors import get_detector
from probes.scorefiles import ControlTable, ScoredFiles
from probes.scores import ScoreTable
from probes.verdicts.coverage import coverage, coverage_lines


def _set(qid: str, answer, controls: int, answers: list, unavailable: str | None = None, failure: str | None = None):
    record = empty_set(Question(qid, f"question {qid}", answer=answer), 3, 1, {})
    record.similars = [f"{qid} similar {k}" for k in range(controls)] + [None] * (3 - controls)
    record.answers = {"similars": answers + [None] * (3 - len(answers)), "controls": []}
    if unavailable:
        record.answers["unavailable"] = unavailable
    if failure:
        record.failures = [Failure("similars", k + 1, failure, "") for k in range(controls, 3)]
    return record


def test_each_left_out_question_is_counted_under_its_reason():
    sets = [
        _set("a", 5, 3, [1, 2, 3]),  # decided by both
        _set("b", None, 3, [1, 2, 3]),  # reward gain: no known answer
        _set("c", "a=\\", 3, [1, 2, 3]),  # reward gain: an answer the verifier cannot read
        _set("d", 5, 1, [1], failure="no_numbers"),  # both: too few controls generated
        _set("e", 5, 3, [None, None, 4], unavailable="a step that does not compute (5 + 3 = 9)"),
    ]
    ids = [s.question.id for s in sets]
    nan = np.nan
    scores = ScoreTable(ids, {"ppl": np.array([1.0, 1, 1, 1, 1]), "reward_gain": np.array([0.2, nan, nan, 0.1, 0.3])})
    ctl_ids = [i for i in ids for _ in range(3)]
    ppl = np.array([1.0, 1, 1] * 3 + [1.0, nan, nan] + [1.0, 1, 1])
    gain = np.array([0.1, 0.1, 0.1] + [nan] * 6 + [0.1, nan, nan] + [nan, nan, 0.1])
    controls = ControlTable(ctl_ids, np.array([1, 2, 3] * 5), {"ppl": ppl, "reward_gain": gain})
    detectors = {"ppl": get_detector("ppl"), "reward_gain": get_detector("reward_gain")}
    found = coverage(ScoredFiles(scores, controls), sets, detectors)
    assert found["ppl"] == {"decided": 4, "of": 5, "left_out": {"fewer than 2 controls generated (no numbers)": 1}}
    assert found["reward_gain"]["decided"] == 1 and found["reward_gain"]["left_out"] == {
        "no known answer": 1,
        "a known answer the verifier cannot read": 1,
        "fewer than 2 controls generated (no numbers)": 1,
        "fewer than 2 controls with a re-solved answer (a step that does not compute)": 1,
    }
    assert sum(found["reward_gain"]["left_out"].values()) + found["reward_gain"]["decided"] == 5
    assert coverage_lines(found)[0] == "ppl: 4 of 5 decided; left out: 1 fewer than 2 controls generated (no numbers)"
