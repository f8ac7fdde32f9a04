"""The report's "Flagged questions" section: each flagged question with its own and its controls'
scores per detector, and a detector that left the question out shown as such (not as a p-value)."""

from __future__ import annotations

from probes.report.flagged import flagged_markdown


def block(detectors: dict) -> dict:
    return {
        "fdr": 0.1,
        "method": "bh",
        "mode": "reference",
        "calibrated": True,
        "n": 40,
        "n_tested": 40,
        "n_flagged": 1,
        "flagged": ["q7"],
        "flagged_detail": [{"id": "q7", "p_value": 0.0004, "q_value": 0.016, "detectors": detectors}],
    }


def test_a_flagged_question_shows_its_scores_controls_and_p_values_and_a_detector_that_left_it_out():
    lines = flagged_markdown(
        block(
            {
                "ppl": {"score": 2.5, "residual": 3.1, "p_value": 0.0123, "controls": [0.1, -0.2, 0.3]},
                "min_k": {
                    "score": -2.99,
                    "residual": None,
                    "p_value": None,
                    "controls": [-2.998, -2.997],
                },  # 2 controls: left out
            }
        ),
        {"q7": "What is | 6 times 7?"},
    )
    row = next(line for line in lines if line.startswith("| `q7`"))
    assert (
        row == "| `q7` What is \\| 6 times 7? | 0.016 | 2.5 (0.1, -0.2, 0.3) → 0.012 | -2.99 (-3, -3) → – (left out) |"
    )
    assert any("at most the FDR." in line for line in lines)


def test_each_fdr_procedure_is_named_as_it_is_in_the_report_and_the_printed_line():
    """Before: every procedure but BH was called "two-stage" (so Storey's, the default, was misnamed)."""
    from probes.report.verdict_text import describe_questions

    named = {"bh": "Benjamini–Hochberg", "two-stage": "two-stage adaptive", "storey": "Storey's adaptive"}
    short = {"bh": ", BH)", "two-stage": ", two-stage BH)", "storey": ", Storey's adaptive BH)"}
    for method, words in named.items():
        decided = {
            **block({"ppl": {"score": 1.0, "residual": 1.0, "p_value": 0.01, "controls": [0.0] * 3}}),
            "method": method,
        }
        head = next(line for line in flagged_markdown(decided) if "questions flagged" in line)
        assert words in head and (method == "two-stage") == ("two-stage" in head), (method, head)
        assert short[method] in describe_questions(decided), (method, describe_questions(decided))
