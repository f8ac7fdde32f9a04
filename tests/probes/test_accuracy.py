"""The accuracy table (issue 44, item 2) against a naive recount and published interval values."""

from __future__ import annotations

import math

import pytest

from probes.accuracy.table import accuracy_markdown, accuracy_sentence, accuracy_table, subsets, wilson_interval


def naive_wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95 % interval written out from its textbook form (z = 1.959964)."""
    z = 1.959964
    p = k / n
    root = math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return ((p + z**2 / (2 * n)) - z * root) / (1 + z**2 / n), ((p + z**2 / (2 * n)) + z * root) / (1 + z**2 / n)


def test_wilson_matches_the_textbook_form_and_a_published_value():
    # Newcombe (1998), table I: 81 of 263 → 0.2553 to 0.3662; 15 of 148 → 0.0624 to 0.1605
    assert wilson_interval(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert wilson_interval(15, 148) == pytest.approx((0.0624, 0.1605), abs=1e-4)
    for k, n in ((0, 10), (10, 10), (3, 7), (50, 120)):
        assert wilson_interval(k, n) == pytest.approx(naive_wilson(k, n), abs=1e-6)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_the_table_is_a_plain_recount_of_each_subset():
    ranked = [f"q{i}" for i in range(12)]  # most suspect first
    flagged = ["q0", "q1", "q3"]
    correct = {q: i % 3 != 0 for i, q in enumerate(ranked)} | {"q5": None, "q7": None}  # two not judged
    reference = {q: i % 2 == 0 for i, q in enumerate(ranked)} | {"q0": None}
    block = accuracy_table(subsets(ranked, flagged, at_least=2), correct, reference)
    expected_ids = {
        "all": ranked,
        "flagged": flagged,
        "not_flagged": [q for q in ranked if q not in flagged],
        "without_most_suspect": ranked[2:],
    }
    assert [r["subset"] for r in block["rows"]] == list(expected_ids)
    for row in block["rows"]:
        ids = expected_ids[row["subset"]]
        right = wrong = skipped = 0
        for q in ids:  # the naive loop
            if correct[q] is None:
                skipped += 1
            elif correct[q]:
                right += 1
            else:
                wrong += 1
        audited = row["audited"]
        assert (audited["n"], audited["correct"], audited["not_judged"]) == (right + wrong, right, skipped)
        assert audited["accuracy"] == pytest.approx(right / (right + wrong))
        assert audited["ci"] == pytest.approx(list(naive_wilson(right, right + wrong)), abs=1e-6)
        both = [q for q in ids if correct[q] is not None and reference.get(q) is not None]
        gain = sum(int(correct[q]) - int(reference[q]) for q in both) / len(both)
        assert row["gain"] == {"n": len(both), "value": pytest.approx(gain)}
        ref_judged = [q for q in ids if reference.get(q) is not None]
        assert row["reference"]["correct"] == sum(reference[q] for q in ref_judged)


def test_without_calibrated_decisions_only_the_whole_benchmark_is_shown():
    rows = subsets(["a", "b", "c"], None, None)
    block = accuracy_table(rows, {"a": True, "b": False, "c": None})
    assert [r["subset"] for r in block["rows"]] == ["all"] and "reference" not in block["rows"][0]
    line = accuracy_sentence(block)
    assert line.startswith("accuracy 50 % [") and "1 question(s) not judged" in line
    table = accuracy_markdown(block)
    assert table[2] == "| Questions | n | accuracy [95% CI] |" and "| every audited question | 2 | 50.0 % [" in table[4]


def test_a_subset_with_nothing_judged_says_so_rather_than_zero():
    block = accuracy_table(subsets(["a", "b"], ["a"], 1), {"a": None, "b": True})
    flagged = block["rows"][1]
    assert flagged["audited"] == {"n": 0, "correct": 0, "accuracy": None, "ci": None, "not_judged": 1}
    line = accuracy_sentence(block)
    assert "no judged answer among the questions flagged (1)" in line and "0 flagged" not in line
    assert any("no judged answer" in line for line in accuracy_markdown(block))


def test_the_line_leaves_out_an_empty_row_and_setting_none_aside():
    block = accuracy_table(subsets(["a", "b"], [], 0), {"a": True, "b": False})
    assert accuracy_sentence(block) == "accuracy 50 % [9, 91] on all 2 judged; 50 % [9, 91] on the 2 not flagged"
