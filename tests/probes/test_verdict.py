"""Verdicts on synthetic scores with a planted generator bias and a planted contamination: the
reference mode cancels the bias the absolute mode falls for; the relative mode compares with a
clean set; the figures are the statistics functions' own; tables round-trip through CSV."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from probes.errors import InputError
from probes.scorefiles import ControlTable
from probes.scores import ScoreTable
from probes.verdicts import stats
from probes.verdicts.controls import control_texts
from probes.verdicts.modes import ScoredSet, VerdictSettings, compute_verdict, within_test

FAST = VerdictSettings(permutations=2000, bootstrap=200)


def tables(
    original: np.ndarray, controls: np.ndarray, name: str = "ppl", prefix: str = "q"
) -> tuple[ScoreTable, ControlTable]:
    n, c = controls.shape
    ids = [f"{prefix}{i}" for i in range(n)]
    table = ScoreTable(ids, {name: original})
    ctl = ControlTable(
        [i for i in ids for _ in range(c)], np.tile(np.arange(1, c + 1), n), {name: controls.reshape(-1)}
    )
    return table, ctl


def world(n: int = 60, bias: float = 0.8, contamination: float = 0.0, seed: int = 0):
    """Question levels vary; the generator's controls sit ``bias`` below their original for both
    models; RL raises the audited model on its trained originals by ``contamination``."""
    rng = np.random.default_rng(seed)
    level = rng.normal(size=(n, 1)) * 2.0
    base_orig = level[:, 0] + bias + rng.normal(size=n) * 0.3
    base_ctl = level + rng.normal(size=(n, 3)) * 0.3
    rl_shift = rng.normal(size=(n, 1)) * 0.1 + 0.5  # RL sharpens every question of the kind
    audited = tables(
        base_orig + rl_shift[:, 0] + contamination + rng.normal(size=n) * 0.05,
        base_ctl + rl_shift + rng.normal(size=(n, 3)) * 0.05,
    )
    reference = tables(base_orig, base_ctl)
    return audited, reference


def test_reference_mode_cancels_a_generator_bias_that_fools_the_absolute_mode():
    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=0.0)
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    assert verdict["mode"] == "reference" and verdict["calibrated"] and not verdict["reject"]
    assert verdict["modes"]["absolute"]["reject"]  # the generator's bias alone
    assert verdict["modes"]["absolute"]["detectors"]["ppl"]["within_auc"]["value"] > 0.8
    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=1.0, seed=1)
    contaminated = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    assert contaminated["reject"] and contaminated["combined"]["p_value"] < 0.01
    assert contaminated["detectors"]["ppl"]["contaminated_fraction"]["value"] > 0.5


def test_within_test_figures_are_the_statistics_functions_own():
    (a_scores, a_ctl), _ = world(seed=2)
    audited = ScoredSet(a_scores, a_ctl)
    o, c = audited.original("ppl"), audited.control_matrix("ppl")
    got = within_test(o, c, FAST)
    t, p = stats.permutation_test(o, c, 2000, 0)
    assert got["p_value"] == p and got["within_auc"]["value"] == t and got["n"] == 60
    assert got["within_auc"]["value"] == pytest.approx(np.nanmean(stats.within_ranks(o, c)))
    lo, hi = got["within_auc"]["ci"]
    assert lo < t < hi
    assert got["contaminated_fraction"]["value"] == stats.storey_pi1(stats.question_pvalues(o, c, 0))


def test_relative_mode_against_a_clean_set_and_the_absolute_warning():
    (a_scores, a_ctl), _ = world(contamination=1.0, seed=3)
    (c_scores, c_ctl), _ = world(contamination=0.0, seed=4)
    c_scores = ScoreTable([f"c{i}" for i in range(60)], c_scores.columns)
    c_ctl = ControlTable([f"c{i[1:]}" for i in c_ctl.ids], c_ctl.index, c_ctl.columns)
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), clean=ScoredSet(c_scores, c_ctl), settings=FAST)
    assert verdict["mode"] == "relative" and verdict["reject"]
    rel = verdict["detectors"]["ppl"]
    r_a = stats.within_ranks(a_scores.columns["ppl"], a_ctl.matrix("ppl", a_scores.ids))
    r_c = stats.within_ranks(c_scores.columns["ppl"], c_ctl.matrix("ppl", c_scores.ids))
    assert (rel["within_auc"]["value"], rel["p_value"]) == stats.mann_whitney_greater(r_a, r_c, 2000, 0)
    assert rel["difference"]["value"] == pytest.approx(np.nanmean(r_a) - np.nanmean(r_c))
    assert any("drawn like" in w for w in verdict["warnings"])
    alone = compute_verdict(ScoredSet(a_scores, a_ctl), settings=FAST)
    assert alone["mode"] == "absolute" and not alone["calibrated"] and "not calibrated" in alone["warnings"][0]


def test_lara_enters_the_relative_mode_with_its_scores():
    rng = np.random.default_rng(5)
    audited = ScoreTable([f"q{i}" for i in range(40)], {"lara": rng.normal(size=40) + 1.0})
    clean = ScoreTable([f"c{i}" for i in range(40)], {"lara": rng.normal(size=40)})
    verdict = compute_verdict(ScoredSet(audited, None), clean=ScoredSet(clean, None), settings=FAST)
    assert verdict["mode"] == "relative" and list(verdict["detectors"]) == ["lara"] and verdict["reject"]
    with pytest.raises(InputError, match="score the questions' controls"):
        compute_verdict(ScoredSet(audited, None), settings=FAST)


def test_combination_and_subsets_of_questions():
    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=1.0, seed=6)
    a_scores.add("cdd", a_scores.columns["ppl"] + 0.0)
    a_ctl.columns["cdd"] = a_ctl.columns["ppl"] * 1.0
    r_scores.add("cdd", r_scores.columns["ppl"] + 0.0)
    r_ctl.columns["cdd"] = r_ctl.columns["ppl"] * 1.0
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    ps = [verdict["detectors"][n]["p_value"] for n in ("ppl", "cdd")]
    assert verdict["combined"] == {
        "p_value": stats.cauchy_combination(ps),
        "method": "cauchy",
        "detectors": ["ppl", "cdd"],
    }
    half = ScoredSet(a_scores, a_ctl, a_scores.ids[:30])
    sub = compute_verdict(half, ScoredSet(r_scores, r_ctl), settings=FAST)
    assert sub["n"] == 30 and sub["detectors"]["ppl"]["n"] == 30
    one = compute_verdict(
        ScoredSet(a_scores, a_ctl),
        ScoredSet(r_scores, r_ctl),
        settings=VerdictSettings(permutations=2000, bootstrap=200, detectors=("cdd",), combine="bonferroni"),
    )
    assert list(one["detectors"]) == ["cdd"] and one["combined"]["method"] == "bonferroni"


def test_control_table_round_trip_and_control_texts(tmp_path):
    table = ControlTable(["a", "a", "b"], np.array([1, 2, 1]), {"ppl": np.array([0.5, np.nan, -1e-300])})
    table.write_csv(tmp_path / "c.csv")
    back = ControlTable.read_csv(tmp_path / "c.csv")
    assert back.ids == table.ids and back.index.tolist() == [1, 2, 1]
    np.testing.assert_array_equal(back.columns["ppl"], table.columns["ppl"])
    m = back.matrix("ppl", ["b", "a", "z"])
    assert m.shape == (3, 2) and m[0, 0] == -1e-300 and math.isnan(m[0, 1]) and m[1, 0] == 0.5 and np.isnan(m[2]).all()

    class Set:  # the two fields control_texts reads
        def __init__(self, qid, similars):
            self.question = type("Q", (), {"id": qid})()
            self.similars = similars

    assert control_texts([Set("a", ["x", None, "y", "z"]), Set("b", [None])], 2) == {"a": ["x", "y"], "b": []}


def test_verdict_report_section_figure_and_text(tmp_path):
    from probes.report.verdict_plot import plot_verdict
    from probes.report.verdict_text import describe_verdict, verdict_markdown
    from probes.scores import jsonable
    from probes.verdicts.on_files import audit_verdict, scored_files

    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=1.0, seed=7)
    labels = {qid: int(i < 30) for i, qid in enumerate(a_scores.ids)}
    verdict = jsonable(
        audit_verdict(
            scored_files(a_scores, a_ctl),
            reference=scored_files(r_scores, r_ctl),
            labels=labels,
            subsets=["members", "non_members"],
            settings=FAST,
        )[0]
    )
    assert set(verdict["subsets"]) == {"members", "non_members"} and verdict["subsets"]["members"]["n"] == 30
    plot_verdict(verdict, tmp_path / "verdict.png")
    assert (tmp_path / "verdict.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = describe_verdict(verdict)
    assert (
        text.startswith("Verdict: CONTAMINATED at alpha = 0.05 (reference mode")
        and "subset non_members (30 questions)" in text
    )
    md = "\n".join(verdict_markdown(verdict))
    assert md.startswith("## Verdict") and "| members (30) |" in md and "| ppl |" in md
    # p-values read as sentences: "p < 1e-4" or "p = 0.1234", never "p = < 1e-4"
    assert re.search(r"cauchy p = 0\.\d{4} over", text) and "p = <" not in text + md
    tiny = {**verdict, "combined": {**verdict["combined"], "p_value": 1e-6}}
    assert "cauchy p < 1e-4 over" in describe_verdict(tiny)


def test_a_mode_with_no_usable_question_never_decides():
    """Before: a reference whose differences were all NaN still 'decided' (not flagged, calibrated:
    true, over no detector) while the absolute mode rejected."""
    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=1.0, seed=8)
    r_scores.columns["ppl"][:] = np.nan
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    assert "reference" not in verdict["modes"] and verdict["mode"] == "absolute" and not verdict["calibrated"]
    assert "60 nan score" in verdict["unavailable"]["reference"]
    assert verdict["reject"] and verdict["combined"]["detectors"] == ["ppl"]


def test_no_usable_question_in_any_mode_is_no_verdict_never_not_flagged():
    from probes.report.verdict_text import describe_verdict, verdict_markdown
    from probes.scores import jsonable

    (a_scores, a_ctl), (r_scores, r_ctl) = world(seed=9)
    a_scores.columns["ppl"][:] = np.nan
    verdict = jsonable(compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST))
    assert verdict["mode"] is None and verdict["reject"] is None and verdict["calibrated"] is None
    assert set(verdict["unavailable"]) == {"reference", "absolute"}
    text = describe_verdict(verdict)
    assert text.startswith("Verdict: NO VERDICT") and "not flagged" not in text and "not a negative answer" in text
    assert "NO VERDICT" in "\n".join(verdict_markdown(verdict))


def test_rows_left_out_are_counted_per_detector_and_subset_and_inf_is_ranked():
    """Before: NaN originals vanished from the counts (16 -> 8 questions, nothing said), and an
    original scored +inf (a perfectly predicted question) was dropped instead of ranked first."""
    from probes.report.verdict_text import describe_verdict
    from probes.verdicts.on_files import audit_verdict, scored_files

    (a_scores, a_ctl), _ = world(seed=10, n=16)
    ppl = a_scores.columns["ppl"]
    ppl[:8] = np.nan
    ppl[8] = np.inf
    labels = {qid: int(i % 2 == 0) for i, qid in enumerate(a_scores.ids)}
    verdict, _ = audit_verdict(scored_files(a_scores, a_ctl), labels=labels, subsets=["members"], settings=FAST)
    record = verdict["detectors"]["ppl"]
    assert record["n"] == 8 and record["left_out"] == {"nan_score": 8, "too_few_controls": 0}
    members = verdict["subsets"]["members"]["detectors"]["ppl"]
    assert members["n"] == 4 and members["left_out"]["nan_score"] == 4
    text = describe_verdict(verdict)
    assert (
        "8 (8 nan score)" in text and "subset members (8 questions)" in text and "ppl left out 4 (4 nan score)" in text
    )
    assert stats.within_ranks(ppl, a_ctl.matrix("ppl", a_scores.ids))[8] == 1.0  # +inf above every control
    t, _ = stats.permutation_test(ppl, a_ctl.matrix("ppl", a_scores.ids), 200, 0)
    assert math.isfinite(t)


def test_a_clean_set_scored_with_other_settings_is_refused():
    from probes.errors import MismatchError

    (a_scores, a_ctl), _ = world(seed=11)
    (c_scores, c_ctl), _ = world(seed=12)
    audited = ScoredSet(a_scores, a_ctl, settings={"ppl": "digest-a"})
    clean = ScoredSet(c_scores, c_ctl, settings={"ppl": "digest-b"})
    with pytest.raises(MismatchError, match="clean set scored 'ppl' with other detector settings"):
        compute_verdict(audited, clean=clean, settings=FAST)


def test_a_detector_that_ties_everywhere_is_left_out_of_the_combination():
    """A model's drift from itself is 0 on every text: its test has no information (its p would be
    1, and a p of 1 makes the Cauchy combination 1 whatever the other detectors say)."""
    (a_scores, a_ctl), _ = world(contamination=1.0, seed=13)
    a_scores.add("policy_drift", np.zeros(60))
    a_ctl.columns["policy_drift"] = np.zeros(len(a_ctl.ids))
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), settings=FAST)
    assert verdict["combined"]["detectors"] == ["ppl"] and "policy_drift" in verdict["combined"]["left_out"]
    assert math.isnan(verdict["detectors"]["policy_drift"]["p_value"]) and verdict["reject"]
    alone = ScoreTable([f"q{i}" for i in range(20)], {"reward_gain": np.zeros(20), "lara": np.arange(20.0)})
    clean = ScoreTable([f"c{i}" for i in range(20)], {"reward_gain": np.zeros(20), "lara": np.arange(20.0) - 5})
    relative = compute_verdict(ScoredSet(alone, None), clean=ScoredSet(clean, None), settings=FAST)
    assert relative["combined"]["detectors"] == ["lara"] and "reward_gain" in relative["combined"]["left_out"]


def test_a_detector_the_reference_scores_as_one_constant_is_left_out_of_the_reference_mode():
    """Policy drift is measured against the reference, whose own drift is 0 on every text: the
    reference mode's Δ is then the audited score itself — the absolute mode's test, with its bias —
    so it may not sit in a calibrated combination. (On the clean world below, the audited model's
    drift has the generator's bias: the absolute test rejects, the reference mode must not.)"""
    from probes.report.verdict_text import describe_verdict

    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=0.0, seed=14)
    a_scores.add("policy_drift", a_scores.columns["ppl"].copy())  # biased like the absolute mode's PPL
    a_ctl.columns["policy_drift"] = a_ctl.columns["ppl"].copy()
    r_scores.add("policy_drift", np.zeros(60))
    r_ctl.columns["policy_drift"] = np.zeros(len(r_ctl.ids))
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    assert verdict["mode"] == "reference" and verdict["combined"]["detectors"] == ["ppl"] and not verdict["reject"]
    assert "policy_drift" in verdict["combined"]["not_calibrated"] and math.isnan(
        verdict["detectors"]["policy_drift"]["p_value"]
    )
    assert verdict["modes"]["absolute"]["detectors"]["policy_drift"]["p_value"] < 0.01  # what it would have added
    assert "left out, not calibrated by the reference: policy_drift" in describe_verdict(verdict)
    r_scores.columns["ppl"][:] = 1.0
    r_ctl.columns["ppl"][:] = 1.0
    alone = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    assert (
        alone["mode"] == "absolute" and "reference" in alone["unavailable"]
    )  # every detector uncalibrated: not a mode
    assert "so subtracting it calibrates nothing" in alone["unavailable"]["reference"]


def test_a_verdict_without_reference_or_clean_set_leads_with_no_calibrated_verdict(tmp_path, capsys):
    """Issue 24 item 4 and issue 34 item 5: the absolute mode's size is known only where the
    generator was validated (a third testbed's clean checkpoint was rejected at p = 0.0002), so a
    verdict that only it can give leads with "NO CALIBRATED VERDICT" and what to add, shows the
    absolute figure as a diagnostic with where its size is known — in the text, the report and the
    CLI, rejecting or not (a non-rejection is no negative answer) — while ``reject`` stays
    machine-readable beside ``calibrated: false``."""
    from probes.cli import main
    from probes.report.verdict_text import describe_verdict, verdict_markdown

    (a_scores, a_ctl), _ = world(contamination=0.0, seed=15)  # the generator's bias alone: the absolute mode rejects
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), settings=FAST)
    assert verdict["mode"] == "absolute" and verdict["reject"] is True and verdict["calibrated"] is False
    (u_scores, u_ctl), _ = world(bias=0.0, contamination=0.0, seed=16)  # no bias: the absolute mode does not reject
    quiet = compute_verdict(ScoredSet(u_scores, u_ctl), settings=FAST)
    assert quiet["mode"] == "absolute" and quiet["reject"] is False
    for v, signal in ((verdict, "signal"), (quiet, "no signal")):
        for text in (describe_verdict(v), "\n".join(verdict_markdown(v))):
            assert "CONTAMINATED" not in text.replace("NO CALIBRATED VERDICT", "") and "not flagged" not in text
            assert "NO CALIBRATED VERDICT — give the checkpoint before RL (a reference model) or a clean set" in text
            assert f"the absolute mode, a diagnostic only: {signal} at alpha = 0.05" in text
            assert "known only where the generator was validated: 0.045–0.050 on our two testbeds" in text
    a_scores.write_csv(tmp_path / "s.csv")
    a_ctl.write_csv(tmp_path / "s.controls.csv")
    assert (
        main(
            [
                "verdict",
                str(tmp_path / "s.csv"),
                "--controls",
                str(tmp_path / "s.controls.csv"),
                "--permutations",
                "200",
                "--bootstrap",
                "10",
                "-o",
                str(tmp_path / "v.json"),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert shown.startswith("Verdict: NO CALIBRATED VERDICT — give the checkpoint before RL")
    saved = json.loads((tmp_path / "v.json").read_text())
    assert saved["reject"] is True and saved["calibrated"] is False


def _clean_world(n: int, bias: float, seed: int, prefix: str = "c"):
    (scores, ctl), _ = world(n=n, bias=bias, seed=seed)
    ids = [f"{prefix}{i}" for i in range(n)]
    return ScoreTable(ids, scores.columns), ControlTable([f"{prefix}{i[1:]}" for i in ctl.ids], ctl.index, ctl.columns)


def test_a_few_dozen_known_clean_questions_measure_the_absolute_modes_size_on_questions_like_yours():
    """Issue 34 item 5. With 36 known-clean questions (split clean_ref) the verdict reports, beside
    the absolute-mode figure, the absolute test on the clean questions and its size at the audited
    count, with a range over the clean bias's CI: a biased generator (controls 0.8 below their
    originals) reads ≈ 100 %; for an unbiased or slightly biased one the range covers the true
    rejection rate of fresh clean sets of the audited size in ≥ 90 % of draws."""
    from probes.report.verdict_text import describe_verdict, verdict_markdown
    from probes.verdicts.absolute_size import absolute_size

    (a_scores, a_ctl), _ = world(n=120, contamination=0.0, seed=21)
    biased = compute_verdict(ScoredSet(a_scores, a_ctl), clean=ScoredSet(*_clean_world(36, 0.8, 22)), settings=FAST)
    measured = biased["absolute_on_clean"]
    assert (
        measured["size"]["n_clean"] == 36 and measured["size"]["n_audited"] == 120 and measured["size"]["size"] > 0.95
    )
    assert measured["test"]["reject"] and measured["size"]["within_auc"]["ppl"] > 0.7
    for text in (describe_verdict(biased), "\n".join(verdict_markdown(biased))):
        assert "the absolute mode on the 36 clean questions: rejected" in text
        assert "a clean set like them of 120 questions would be flagged in ≈ 100 % of draws" in text
    assert measured["size"]["size_range"]["ppl"][0] > 0.95
    for bias in (0.0, 0.1):  # the size range covers the true rejection rate of fresh clean sets of 120
        truth = np.mean(
            [
                compute_verdict(ScoredSet(*world(n=120, bias=bias, seed=300 + k)[0]), settings=FAST)["reject"]
                for k in range(60)
            ]
        )
        covered = []
        for seed in range(40):
            (o, c), _ = world(n=36, bias=bias, seed=100 + seed)
            lo, hi = absolute_size(
                {"ppl": o.columns["ppl"]}, {"ppl": c.matrix("ppl", o.ids)}, 120, 0.05, n_resamples=50, seed=seed
            )["size_range"]["ppl"]
            covered.append(lo - 0.05 <= truth <= hi + 0.05)  # ± the Monte-Carlo error of the 60-set truth
        assert np.mean(covered) >= 0.9, (bias, truth, np.mean(covered))


def test_the_size_line_reads_a_verdict_json_whose_ranges_are_missing():
    """A detector whose clean controls all tie has no size range (NaN, null once written as JSON):
    the line says so instead of failing (found by lara run on the smoke testbed)."""
    from probes.report.verdict_text import size_sentence
    from probes.scores import jsonable

    size = {
        "n_clean": 8,
        "n_audited": 40,
        "size": 0.0,
        "alpha": 0.05,
        "within_auc": {"ppl": 0.5, "cdd": 0.5},
        "size_range": {"ppl": [0.01, 0.2], "cdd": [float("nan"), float("nan")]},
    }
    assert "over the clean bias's 95 % CI: ppl 1–20 %)" in size_sentence(jsonable(size))
    size["size_range"]["ppl"] = [float("nan")] * 2
    assert "over the clean bias's 95 % CI: not estimable)" in size_sentence(jsonable(size))


def test_null_moments_of_within_ranks_equal_a_naive_enumeration():
    from probes.verdicts.absolute_size import null_moments

    original = np.array([1.0, 2.0, np.nan, 0.5])
    controls = np.array([[0.0, 2.0, 3.0], [2.0, 2.0, np.nan], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    r, mean, var = null_moments(original, controls)
    for j in (0, 1, 3):
        texts = [x for x in [original[j], *controls[j]] if not np.isnan(x)]
        ranks = [
            (
                sum(t < texts[k] for i, t in enumerate(texts) if i != k)
                + 0.5 * sum(t == texts[k] for i, t in enumerate(texts) if i != k)
            )
            / (len(texts) - 1)
            for k in range(len(texts))
        ]
        assert (
            r[j] == pytest.approx(ranks[0])
            and mean[j] == pytest.approx(np.mean(ranks))
            and var[j] == pytest.approx(np.var(ranks))
        )
    assert np.isnan(r[2]) and np.isnan(mean[2])


def test_a_reference_difference_detector_is_its_own_difference_in_the_reference_mode():
    """Reward gain is already audited minus reference on each text, and the reference scores 0
    against itself: before, the reference mode found its reference constant and left it out ("not
    calibrated"); now it enters with its own scores, the within-question test of them alone."""
    from probes.detectors import REGISTRY
    from probes.verdicts.modes import REFERENCE_DIFFERENCES, within_test

    assert set(REFERENCE_DIFFERENCES) == {n for n, cls in REGISTRY.items() if cls.reference_difference}
    rng = np.random.default_rng(3)
    gain_orig, gain_ctl = rng.integers(-2, 5, size=40) / 4, rng.integers(-2, 3, size=(40, 3)) / 4
    audited, audited_ctl = tables(gain_orig, gain_ctl, name="reward_gain")
    reference, reference_ctl = tables(np.zeros(40), np.zeros((40, 3)), name="reward_gain")
    s = VerdictSettings(permutations=500, bootstrap=10)
    verdict = compute_verdict(ScoredSet(audited, audited_ctl), ScoredSet(reference, reference_ctl), settings=s)
    assert verdict["mode"] == "reference" and "not_calibrated" not in verdict["detectors"]["reward_gain"]
    alone = within_test(gain_orig, gain_ctl, s)
    assert verdict["detectors"]["reward_gain"]["p_value"] == alone["p_value"]
    assert verdict["detectors"]["reward_gain"]["within_auc"]["value"] == alone["within_auc"]["value"]


def test_reward_gain_enters_the_relative_mode_by_its_scores_even_with_controls():
    """Reward gain's controls need re-solved answers, whose share differs by template: its
    within-question ranks would compare the audited and clean sets over different kinds of questions
    (on the GSM testbed, size 0.375). In the relative mode it stays a test of its scores against the
    clean set's, as LaRA's is."""
    from probes.verdicts.modes import relative_test

    rng = np.random.default_rng(5)
    a_gain, c_gain = rng.integers(0, 5, size=40) / 4, rng.integers(0, 5, size=30) / 4
    audited, audited_ctl = tables(a_gain, rng.integers(0, 5, size=(40, 3)) / 4, name="reward_gain")
    clean, clean_ctl = tables(c_gain, rng.integers(0, 5, size=(30, 3)) / 4, name="reward_gain", prefix="c")
    s = VerdictSettings(permutations=300, bootstrap=10)
    verdict = compute_verdict(ScoredSet(audited, audited_ctl), clean=ScoredSet(clean, clean_ctl), settings=s)
    got = verdict["modes"]["relative"]["detectors"]["reward_gain"]
    want = relative_test(a_gain, c_gain, s)
    assert got["p_value"] == want["p_value"] and "controls_per_question" not in got


def test_the_reference_models_own_comparisons_read_n_a_self_reference_in_the_verdict_table():
    """Issue 34, item 4: the reference model audited as a control compares itself with itself for
    ``policy_drift`` and ``reward_gain`` (every score 0); its verdict table showed "0.50 [0.50,
    0.50]" for them, as if measured. The rows read n/a (self-reference) and stay out of the test."""
    from probes.report.verdict_text import verdict_markdown
    from probes.scores import jsonable
    from probes.verdicts.on_files import audit_verdict, scored_files

    (a_scores, a_ctl), _ = world(seed=12)
    for name in ("policy_drift", "reward_gain"):
        a_scores.columns[name] = np.zeros(len(a_scores.ids))
        a_ctl.columns[name] = np.zeros(len(a_ctl.ids))
    verdict = jsonable(audit_verdict(scored_files(a_scores, a_ctl), settings=FAST)[0])
    assert (
        "policy_drift" not in verdict["combined"]["detectors"] and "reward_gain" not in verdict["combined"]["detectors"]
    )
    before = "\n".join(verdict_markdown(verdict))
    assert "| policy_drift | 0.50 [0.50, 0.50] |" in before  # what the table said
    verdict["self_reference"] = [
        "policy_drift",
        "reward_gain",
    ]  # set by lara run's verdict stage on the reference model
    md = "\n".join(verdict_markdown(verdict))
    for name in ("policy_drift", "reward_gain"):
        assert f"| {name} | n/a (self-reference) | n/a | n/a | 60 | all: no information |" in md
    assert "| ppl | 0." in md
    from probes.report.verdict_plot import plot_verdict

    drawn = {}
    for key, record in (("before", {k: v for k, v in verdict.items() if k != "self_reference"}), ("after", verdict)):
        fig = plot_verdict(record)
        texts = [t.get_text() for t in fig.axes[0].texts]
        rows = {round(float(y)) for line in fig.axes[0].lines if line.get_marker() == "o" for y in line.get_ydata()}
        drawn[key] = (texts, rows)
    names = list(verdict["modes"]["absolute"]["detectors"])
    self_rows = {names.index("policy_drift"), names.index("reward_gain")}
    assert self_rows <= drawn["before"][1]  # drawn at 0.5 as if measured
    assert not self_rows & drawn["after"][1] and drawn["after"][0].count("n/a (self-reference)") == 2


def test_a_mode_that_does_not_reject_withholds_every_contaminated_fraction():
    """Issue 56, item 7: Storey's bound reads above 0 by chance on clean questions (0.20 [0.00, 0.60]
    on 20 clean ones); printed as "contaminated fraction ≥" it claims what the verdict did not find."""
    from probes.report.verdict_text import describe_verdict, verdict_markdown

    (a_scores, a_ctl), (r_scores, r_ctl) = world(contamination=0.0)
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), settings=FAST)
    assert not verdict["reject"]
    for mode in verdict["modes"].values():
        for record in mode["detectors"].values():
            fraction = record["contaminated_fraction"]
            if mode["reject"]:  # the absolute mode, fooled by the generator's bias, still shows its bound
                assert fraction["reported_as"] == "at least" and fraction["value"] is not None
            else:
                assert fraction["value"] is None and fraction["reported_as"].startswith("not reported")
                assert 0 <= fraction["estimate"] <= 1 and len(fraction["ci"]) == 2  # kept for diagnosis
    rows = [line for line in verdict_markdown(verdict) if line.startswith("| ppl |")]
    assert rows and all(row.split("|")[4].strip() == "– (not rejected)" for row in rows)
    assert "– (not rejected)" in describe_verdict(verdict)
    json.dumps(verdict)  # None, not NaN: the file reads "value": null


def test_the_reference_checkpoint_is_never_told_to_give_itself():
    from probes.report.verdict_text import NO_CALIBRATED_VERDICT, describe_verdict

    (a_scores, a_ctl), _ = world(contamination=0.0)
    verdict = compute_verdict(ScoredSet(a_scores, a_ctl), settings=FAST)  # no reference, no clean set: absolute
    assert NO_CALIBRATED_VERDICT in describe_verdict(verdict)
    text = describe_verdict({**verdict, "is_reference": True})
    assert "give the checkpoint before RL" not in text and "is the run's reference" in text


def test_a_question_flagged_while_the_verdict_does_not_reject_is_explained_in_one_line():
    from probes.report.flagged import flagged_markdown
    from probes.report.verdict_text import describe_questions

    block = {
        "calibrated": True, "mode": "reference", "method": "storey", "fdr": 0.1, "n": 20, "n_tested": 20,
        "n_flagged": 1, "flagged": ["q7"], "flagged_detail": [], "at_least": {"value": 0, "of": 20, "level": 0.95, "method": "closed test"},
    }  # fmt: skip
    line = describe_questions(block, rejected=False)
    assert "1 of 20 tested flagged" in line and "a lead to check, not a finding" in line and "\n" not in line
    assert "not a finding" not in describe_questions(block, rejected=True)
    assert any("not a finding" in x for x in flagged_markdown(block, rejected=False))
    assert not any(
        "not a finding" in x for x in flagged_markdown({**block, "n_flagged": 0, "flagged": []}, rejected=False)
    )
