"""Per-question decisions (SPEC §8.10): residuals and conformal p-values against plain loops,
Benjamini–Hochberg against a plain step-up loop, the decisions of a verdict's deciding mode on
planted data, and the false-discovery guarantee by simulation."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import numpy as np
import pytest

from probes.report.verdict_text import describe_verdict
from probes.scorefiles import ControlTable
from probes.scores import ScoreTable
from probes.verdicts import conformal
from probes.verdicts.modes import VerdictSettings
from probes.verdicts.on_files import audit_verdict, scored_files

from .test_verdict import world

FAST = VerdictSettings(permutations=500, bootstrap=20)


def naive_residuals(original, controls):
    """(original residual, control residuals) of each question by plain loops: a question needs 3
    scored controls; its controls' residuals join the null even when its original has no score."""
    out = []
    for o, row in zip(original, controls):
        scored = [x for x in row if not math.isnan(x)]
        if len(scored) < 3:
            out.append((None, []))
            continue
        own = None if math.isnan(o) else o - statistics.median(scored)
        others = [x - statistics.median(scored[:k] + scored[k + 1 :]) for k, x in enumerate(scored)]
        out.append((own, others))
    return out


def test_residuals_and_conformal_pvalues_against_plain_loops():
    rng = np.random.default_rng(0)
    original = rng.normal(size=12)
    controls = rng.normal(size=(12, 4))
    controls[2, 1:] = np.nan  # one scored control: unusable
    controls[5, 3] = np.nan  # three scored controls: usable
    original[7] = np.nan
    naive = naive_residuals(original.tolist(), controls.tolist())
    got_original = conformal.original_residuals(original, controls)
    got_null = conformal.control_residuals(original, controls)
    null = [x for _, others in naive for x in others]
    for j, (own, others) in enumerate(naive):
        assert sorted(got_null[j][~np.isnan(got_null[j])].tolist()) == pytest.approx(sorted(others), abs=1e-12)
        assert math.isnan(got_original[j]) if own is None else got_original[j] == pytest.approx(own, abs=1e-12)
    assert math.isnan(got_original[7]) and np.isfinite(got_null[7]).all() and np.isnan(got_null[2]).all()
    spec = conformal.conformal_pvalues(got_original, got_null)
    u = np.random.default_rng(7).random(12)
    p = conformal.conformal_pvalues(got_original, got_null, u)
    for j, (own, _) in enumerate(naive):
        if own is None:
            assert math.isnan(p[j]) and math.isnan(spec[j])
            continue
        assert spec[j] == pytest.approx((1 + sum(x >= own for x in null)) / (1 + len(null)), abs=1e-12)  # SPEC §8.10
        assert p[j] == pytest.approx(
            (sum(x > own for x in null) + u[j] * (1 + sum(x == own for x in null))) / (1 + len(null)), abs=1e-12
        )
    u2 = np.random.default_rng(0).random(2)
    inf = conformal.conformal_pvalues(np.array([np.inf, -np.inf]), np.array([0.0, np.inf]), u2)
    assert inf[0] == pytest.approx(u2[0] * 2 / 3) and inf[1] == pytest.approx((2 + u2[1]) / 3) and inf[1] < 1  # never 1
    assert conformal.conformal_pvalues(np.array([np.inf, -np.inf]), np.array([0.0, np.inf])).tolist() == [2 / 3, 1.0]


def test_randomised_conformal_pvalues_are_uniform_with_heavy_ties_and_matched_residuals_are_valid():
    """Discrete scores (each text 0 or 1 at random, 3 controls): with the SPEC's residual an
    original reaches the top of the pool twice as often as the pool does, so small p-values come
    too often; the matched residual (all but one control) keeps p uniform."""
    rng = np.random.default_rng(1)
    texts = rng.integers(0, 2, size=(4000, 4)).astype(float)
    null = conformal.control_residuals(texts[:, 0], texts[:, 1:])
    for matched, valid in ((False, False), (True, True)):
        e = conformal.original_residuals(
            texts[:, 0], texts[:, 1:], np.random.default_rng(2).random(4000) if matched else None
        )
        p = conformal.conformal_pvalues(e, null, np.random.default_rng(3).random(4000))
        assert (abs((p <= 0.1).mean() - 0.1) < 0.015) == valid, (matched, (p <= 0.1).mean())
        spec = conformal.conformal_pvalues(e, null)  # the SPEC's form: conservative, never below the randomised one
        assert (spec >= p).all() and ((spec <= 0.15).mean() <= 0.15 + 0.015) == valid, (matched, (spec <= 0.15).mean())
    assert conformal.discrete(null)


def naive_step_up(pvalues, q):
    """Benjamini–Hochberg by the book: the largest k with p_(k) ≤ k q / m; adjusted p-values by
    the step-up minimum over ranks from the top."""
    items = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(items)
    k_max = max((k for k in range(1, m + 1) if items[k - 1][0] <= k * q / m), default=0)
    flagged = {i for _, i in items[:k_max]}
    adjusted, running = {}, 1.0
    for k in range(m, 0, -1):
        p, i = items[k - 1]
        running = min(running, p * m / k)
        adjusted[i] = min(running, 1.0)
    return [i in flagged for i in range(len(pvalues))], [adjusted.get(i, math.nan) for i in range(len(pvalues))]


@pytest.mark.parametrize("seed", range(4))
def test_benjamini_hochberg_against_a_plain_step_up_loop(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=40), rng.uniform(0, 0.01, size=int(rng.integers(0, 15)))])
    p[3] = np.nan
    flagged, q = conformal.benjamini_hochberg(p, 0.1)
    want_flagged, want_q = naive_step_up(p.tolist(), 0.1)
    assert flagged.tolist() == want_flagged
    np.testing.assert_allclose(q, want_q, atol=1e-12)
    two_stage, _ = conformal.benjamini_hochberg(p, 0.1, "two-stage")
    assert two_stage.sum() >= flagged.sum()  # the adaptive form never flags fewer here


@pytest.mark.parametrize("seed", range(4))
def test_storey_adaptive_bh_is_bh_at_q_over_a_hand_counted_pi0(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=60), rng.uniform(0, 0.02, size=int(rng.integers(5, 40)))])
    p[7] = np.nan
    finite = [x for x in p.tolist() if not math.isnan(x)]
    above = sum(1 for x in finite if x > 0.5)  # counted by hand: π̂0 = (1 + #{p > λ}) / (m (1 − λ))
    pi0 = min(1.0, (1 + above) / (len(finite) * 0.5))
    flagged, q = conformal.benjamini_hochberg(p, 0.1, "storey", storey_lambda=0.5)
    want_flagged, want_q = naive_step_up(p.tolist(), 0.1 / pi0)  # BH at q / π̂0 …
    assert flagged.tolist() == want_flagged
    _, plain_q = naive_step_up(p.tolist(), 0.1)  # … and its q-values, BH's times π̂0
    np.testing.assert_allclose(q, np.minimum(1.0, np.array(plain_q) * pi0), atol=1e-12)
    assert flagged.sum() >= conformal.benjamini_hochberg(p, 0.1)[0].sum()
    all_null = rng.uniform(size=50)
    assert conformal.storey_pi0(all_null) == min(1.0, (1 + (all_null > 0.5).sum()) / 25)


def test_a_verdict_carries_its_decisions_and_they_find_planted_questions(tmp_path):
    (a_scores, a_ctl), (r_scores, r_ctl) = world(n=80, contamination=0.0, seed=3)
    planted = [f"q{i}" for i in range(10)]
    a_scores.columns["ppl"][:10] += 3.0  # RL raised ten originals far above their controls
    verdict, decisions = audit_verdict(
        scored_files(a_scores, a_ctl), reference=scored_files(r_scores, r_ctl), settings=FAST
    )
    block = verdict["questions"]
    assert block["mode"] == "reference" and block["calibrated"] and block["fdr"] == 0.1 and block["method"] == "storey"
    assert set(block["flagged"]) >= set(planted[:8]) and len(set(block["flagged"]) - set(planted)) <= 2
    assert block["n_flagged"] == len(block["flagged"]) == int(decisions.flagged.sum())
    first = block["flagged_detail"][0]
    assert first["id"] in planted and len(first["detectors"]["ppl"]["controls"]) == 3
    assert "which questions:" in describe_verdict(verdict) and "flagged at FDR 10%" in describe_verdict(verdict)
    decisions.write_csv(tmp_path / "q.csv")
    header, *rows = (tmp_path / "q.csv").read_text().splitlines()
    assert header == "id,rank,mode,ppl_residual,ppl_p,learned_controls_score,learned_controls_p,p_value,q_value,flagged"
    assert len(rows) == 80 and [int(r.split(",")[1]) for r in rows] == list(range(1, 81))  # ranked by evidence
    assert sum(r.endswith(",1") for r in rows) == block["n_flagged"]
    # the absolute mode decides nothing (issue 44, item 4)
    alone, _ = audit_verdict(scored_files(a_scores, a_ctl), settings=FAST)
    assert alone["questions"]["mode"] == "absolute" and not alone["questions"]["calibrated"]
    assert alone["questions"]["at_least"] is None and alone["questions"]["flagged"] == []


def test_an_uncalibrated_mode_flags_nothing_and_bounds_nothing(tmp_path):
    """Issue 44, item 4: on a clean checkpoint with no reference and no clean set, the absolute mode
    read the generator's bias and verdict.json said "at least 24 of the 120 contaminated (95 % lower
    bound)" with flags. Now: no flag, no bound (null, with the reason); the would-be figures live in
    questions_diagnostic; the table's flagged column is empty (no decision), never 0."""
    rng = np.random.default_rng(44)
    n, c = 120, 10
    ids = [f"q{i}" for i in range(n)]
    scores = ScoreTable(ids, {"ppl": rng.normal(1.2, 1.0, n)})  # the originals above their similars: a biased generator
    controls = ControlTable(
        [i for i in ids for _ in range(c)],
        np.tile(np.arange(1, c + 1), n),
        {"ppl": rng.normal(0.0, 1.0, n * c)},
    )
    verdict, decisions = audit_verdict(scored_files(scores, controls), settings=FAST)
    assert verdict["mode"] == "absolute" and verdict["reject"] and not verdict["calibrated"]
    assert decisions.flagged.sum() > 0 and decisions.at_least > 0  # what the absolute mode would have claimed
    block = verdict["questions"]
    assert block["at_least"] is None and block["n_flagged"] is None and block["flagged"] == []
    assert "no calibrated mode" in block["undecided"]
    diagnostic = verdict["questions_diagnostic"]
    assert diagnostic["below_fdr_threshold"] == int(decisions.flagged.sum()) and not diagnostic["calibrated"]
    text = describe_verdict(verdict)
    assert "at least" not in text.split("which questions:")[1] and "which questions: none decided" in text
    decisions.write_csv(tmp_path / "q.csv")
    rows = (tmp_path / "q.csv").read_text().splitlines()[1:]
    assert all(r.endswith(",") for r in rows) and all(",absolute (uncalibrated)," in r for r in rows)


def test_in_the_relative_mode_the_null_is_the_clean_set():
    rng = np.random.default_rng(9)
    audited = ScoreTable([f"q{i}" for i in range(30)], {"lara": np.r_[rng.normal(size=25), [9.0] * 5]})
    clean = ScoreTable([f"c{i}" for i in range(40)], {"lara": rng.normal(size=40)})
    verdict, decisions = audit_verdict(
        scored_files(audited), clean=scored_files(clean), settings=dataclasses.replace(FAST, decision_pvalue="spec")
    )
    assert verdict["questions"]["mode"] == "relative"
    evidence = decisions.detectors["lara"]
    assert evidence.null_size == 40
    expected = [(1 + sum(c >= a for c in clean.columns["lara"])) / 41 for a in audited.columns["lara"]]
    np.testing.assert_allclose(evidence.p_value, expected)
    _, decisions = audit_verdict(
        scored_files(audited),
        clean=scored_files(clean),
        settings=dataclasses.replace(FAST, decision_pvalue="randomised"),
    )
    u = conformal.question_uniforms(audited.ids, FAST.seed, "ties")
    expected = [
        (sum(c > a for c in clean.columns["lara"]) + u[k] * (1 + sum(c == a for c in clean.columns["lara"]))) / 41
        for k, a in enumerate(audited.columns["lara"])
    ]
    np.testing.assert_allclose(decisions.detectors["lara"].p_value, expected)


def test_no_flag_under_the_global_null_at_most_q_of_the_time():
    """Clean audited sets (reference mode, a generator bias both models share): BH at q = 0.10
    flags any question in at most q + Monte-Carlo error of them."""
    any_flag = 0
    reps = 300
    for seed in range(reps):
        (a_scores, a_ctl), (r_scores, r_ctl) = world(n=40, contamination=0.0, seed=1000 + seed)
        verdict, _ = audit_verdict(
            scored_files(a_scores, a_ctl),
            reference=scored_files(r_scores, r_ctl),
            settings=VerdictSettings(permutations=50, bootstrap=2),
        )
        any_flag += verdict["questions"]["n_flagged"] > 0
    assert any_flag / reps <= 0.10 + 2 * math.sqrt(0.1 * 0.9 / reps)


@pytest.mark.parametrize("share", [0.1, 0.5])
def test_realised_fdr_is_at_most_q_with_power_on_planted_contamination(share):
    """Worlds of 60 questions (3 controls each, a generator bias both models share) where RL raised a
    share of the originals by 3 units: BH at q = 0.10 over the reference mode's conformal p-values
    keeps the realised false-discovery proportion at q on average, and finds most planted ones."""
    from probes.verdicts.decisions import decide_questions
    from probes.verdicts.modes import ScoredSet

    reps, fdp, power = 200, [], []
    for seed in range(reps):
        (a_scores, a_ctl), (r_scores, r_ctl) = world(n=60, contamination=0.0, seed=5000 + seed)
        planted = int(60 * share)
        a_scores.columns["ppl"][:planted] += 3.0
        verdict = {"mode": "reference", "combined": {"detectors": ["ppl"]}}
        decisions = decide_questions(
            verdict, ScoredSet(a_scores, a_ctl), ScoredSet(r_scores, r_ctl), None, VerdictSettings()
        )
        flagged = np.flatnonzero(decisions.flagged)
        fdp.append(float((flagged >= planted).sum() / len(flagged)) if len(flagged) else 0.0)
        power.append(float((flagged < planted).sum() / planted))
    assert np.mean(fdp) <= 0.10 + 2 * np.std(fdp) / math.sqrt(reps)
    assert np.mean(power) > 0.5


def test_relative_mode_residuals_against_the_clean_sets_by_a_plain_loop():
    """Detectors with controls in the relative mode: each audited original's residual against the
    clean originals' residuals (the same number of controls on both sides)."""
    from probes.verdicts.decisions import decide_questions
    from probes.verdicts.modes import ScoredSet

    (a_scores, a_ctl), _ = world(n=20, seed=21)
    (c_scores, c_ctl), _ = world(n=25, seed=22)
    c_scores = ScoreTable([f"c{i}" for i in range(25)], c_scores.columns)
    from probes.scorefiles import ControlTable

    c_ctl = ControlTable([f"c{i[1:]}" for i in c_ctl.ids], c_ctl.index, c_ctl.columns)
    audited, clean = ScoredSet(a_scores, a_ctl), ScoredSet(c_scores, c_ctl)
    decisions = decide_questions(
        {"mode": "relative", "combined": {"detectors": ["ppl"]}},
        audited,
        None,
        clean,
        dataclasses.replace(FAST, decision_residual="spec", decision_pvalue="spec"),
    )

    def residuals(scored):
        o, m = scored.original("ppl"), scored.control_matrix("ppl")
        return [x - statistics.median(row) for x, row in zip(o.tolist(), m.tolist())]

    null, own = residuals(clean), residuals(audited)
    expected = [(1 + sum(x >= e for x in null)) / (1 + len(null)) for e in own]
    np.testing.assert_allclose(decisions.detectors["ppl"].p_value, expected, atol=1e-12)
    assert decisions.detectors["ppl"].null == "the clean set's residuals" and decisions.detectors["ppl"].null_size == 25


def test_the_reference_mode_decisions_weigh_what_its_verdict_weighs():
    """Reward gain and LaRA have no controls: the reference mode's verdict leaves them out (and says
    so, pointing to the relative mode), and so do its decisions — they would lean on the clean
    set's exchangeability, the relative mode's assumption, not the reference mode's."""
    from probes.verdicts.on_files import audit_verdict

    (a_scores, a_ctl), (r_scores, r_ctl) = world(n=40, seed=31)
    rng = np.random.default_rng(0)
    gains = np.r_[np.full(8, 1.0), rng.uniform(-0.2, 0.3, size=32)]
    a_scores.add("reward_gain", gains)
    splits = {qid: ("clean_ref" if i >= 30 else None) for i, qid in enumerate(a_scores.ids)}
    verdict, decisions = audit_verdict(
        scored_files(a_scores, a_ctl), reference=scored_files(r_scores, r_ctl), splits=splits, settings=FAST
    )
    assert verdict["mode"] == "reference" and "reward_gain" not in verdict["combined"]["detectors"]
    assert any(
        n.startswith("reward_gain: no controls, so not in the reference mode's combination") for n in verdict["notes"]
    )
    assert (
        set(decisions.detectors) == {"ppl"}
        and [s.name for s in decisions.streams] == ["controls"]
        and len(decisions.ids) == 30
    )
    assert "reward_gain" in verdict["modes"]["relative"]["detectors"]  # where it is tested


def test_lara_verdict_fdr_decides_questions_through_the_cli(tmp_path, capsys):
    from probes.cli import main

    (a_scores, a_ctl), _ = world(n=60, seed=41)
    a_scores.columns["ppl"][:12] += 3.0
    a_scores.write_csv(tmp_path / "s.csv")
    a_ctl.write_csv(tmp_path / "s.controls.csv")
    assert (
        main(
            [
                "verdict",
                str(tmp_path / "s.csv"),
                "--controls",
                str(tmp_path / "s.controls.csv"),
                "--fdr",
                "0.1",
                "--permutations",
                "200",
                "--bootstrap",
                "20",
                "-o",
                str(tmp_path / "v.json"),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    written = json.loads((tmp_path / "v.json").read_text())
    block = written["questions"]
    assert block["mode"] == "absolute" and not block["calibrated"] and block["n_tested"] == 60
    assert block["n_flagged"] is None and block["at_least"] is None  # an uncalibrated mode decides nothing
    assert written["questions_diagnostic"]["below_fdr_threshold"] >= 8
    assert "which questions: none decided — no calibrated mode" in shown
    rows = (tmp_path / "v.questions.csv").read_text().splitlines()
    assert rows[1].split(",")[2] == "absolute (uncalibrated)" and all(r.endswith(",") for r in rows[1:])


def test_the_reference_modes_decisions_read_a_reference_difference_detector_as_it_is():
    """Reward gain's scores are audited minus reference already: its residuals in the reference mode
    are taken on its own scores, not against the reference's (all 0, or absent)."""
    from probes.scorefiles import ControlTable
    from probes.scores import ScoreTable
    from probes.verdicts.decisions import decide_questions
    from probes.verdicts.modes import ScoredSet, VerdictSettings

    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(30)]
    gain, controls = rng.normal(size=30), rng.normal(size=(30, 4))
    audited = ScoredSet(
        ScoreTable(ids, {"reward_gain": gain}),
        ControlTable(
            [i for i in ids for _ in range(4)], np.tile(np.arange(1, 5), 30), {"reward_gain": controls.ravel()}
        ),
    )
    reference = ScoredSet(ScoreTable(ids, {"ppl": np.zeros(30)}), None)  # the reference never scored reward gain
    d = decide_questions(
        {"mode": "reference", "combined": {"detectors": ["reward_gain"]}}, audited, reference, None, VerdictSettings()
    )
    np.testing.assert_array_equal(d.detectors["reward_gain"].original, gain)
    np.testing.assert_array_equal(d.detectors["reward_gain"].controls, controls)
