"""The per-question decisions at their level (SPEC §8.10, issue 32): size by simulation through the
shipped functions, no detector can veto a question, the learned combination keeps its level, the
"at least" bound against a brute-force closed testing and its coverage, and figures that fail on a
planted broken null."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from probes.scores import ScoreTable
from probes.verdicts import conformal
from probes.verdicts.decisions import decide_questions
from probes.verdicts.modes import VerdictSettings
from probes.verdicts.on_files import audit_verdict, scored_files
from probes.verdicts.simulation import world

from .test_verdict import tables

BEFORE = VerdictSettings(
    decision_residual="spec", decision_pvalue="spec", decision_combine="cauchy"
)  # the defaults before issue 32


def any_flag_rate(reps: int, settings: VerdictSettings, **kw) -> float:
    hits = 0
    for r in range(reps):
        w = world(seed=10_000 + r, **kw)
        d = decide_questions(
            {"mode": "absolute", "combined": {"detectors": w.names}},
            w.audited,
            None,
            None,
            dataclasses.replace(settings, seed=r),
        )
        hits += bool(d.flagged.any())
    return hits / reps


@pytest.mark.parametrize("kind", ["gaussian", "binomial"])
def test_with_no_contaminated_question_the_decisions_flag_at_level_not_far_below(kind):
    """Finding 1: with the defaults before, P(any flag | no contaminated question) was 0.002–0.02
    at q = 0.10; now it lies within [q/2, q + 2 s.e.] (60 questions, 3 controls)."""
    reps = 500
    rate = any_flag_rate(reps, VerdictSettings(), n=60, c=3, kind=kind)
    se = math.sqrt(0.1 * 0.9 / reps)
    assert 0.05 <= rate <= 0.10 + 2 * se, rate
    assert any_flag_rate(200, BEFORE, n=60, c=3, kind=kind) < 0.02  # what it was: far below q


def test_the_learned_combination_of_three_detectors_keeps_its_level():
    reps = 300
    w = world(60, 3, detectors=3, seed=1)
    d = decide_questions(
        {"mode": "absolute", "combined": {"detectors": w.names}}, w.audited, None, None, VerdictSettings()
    )
    assert (
        [s.name for s in d.streams] == ["controls"]
        and d.streams[0].detectors == w.names
        and len(d.streams[0].weights) == 3
    )
    pvalues = []
    for r in range(reps):
        w = world(60, 3, detectors=3, seed=20_000 + r)
        d = decide_questions(
            {"mode": "absolute", "combined": {"detectors": w.names}}, w.audited, None, None, VerdictSettings(seed=r)
        )
        pvalues.append(d.p_value)
    p = np.stack(pvalues)  # [worlds, questions]: the questions of one world share its pool and classifier
    for t in (0.01, 0.05, 0.2, 0.5):  # valid at every level, and at level where decisions are made (3 s.e. over worlds)
        share = (p <= t).mean(axis=1)
        se = share.std(ddof=1) / math.sqrt(reps)
        assert share.mean() < t + 3 * se, (t, share.mean())
        if t <= 0.05:
            assert share.mean() > t - 3 * se, (t, share.mean())  # measured 0.0098 at 0.01, 0.049 at 0.05 (0.190 at 0.2)


def test_a_p_value_near_one_cannot_veto_a_question():
    """Finding 2: PPL alone flags all 60 planted questions; reward gain (no controls) is 0 on every
    audited question against a clean set that is 90 % zeros. With the deterministic p-value and a
    Cauchy combination its p of 1 made a question's combined p 1: 7 of 60 flagged."""
    rng = np.random.default_rng(0)
    n, c = 60, 3
    controls = rng.normal(size=(n, c))
    original = controls.mean(axis=1) + 40.0  # far beyond every control residual of the pool
    audited, audited_ctl = tables(original, controls)
    clean_gain = np.r_[np.zeros(90), rng.uniform(0.1, 0.5, size=10)]
    clean_orig = rng.normal(size=100)
    clean, clean_ctl = tables(clean_orig, rng.normal(size=(100, c)), prefix="c")
    scores = ScoreTable(
        audited.ids + clean.ids, {"ppl": np.r_[original, clean_orig], "reward_gain": np.r_[np.zeros(n), clean_gain]}
    )
    from probes.scorefiles import ControlTable

    ctl = ControlTable(
        audited_ctl.ids + clean_ctl.ids,
        np.r_[audited_ctl.index, clean_ctl.index],
        {"ppl": np.r_[audited_ctl.columns["ppl"], clean_ctl.columns["ppl"]]},
    )
    splits = {i: "clean_ref" for i in clean.ids}
    verdict, decisions = audit_verdict(
        scored_files(scores, ctl), splits=splits, settings=VerdictSettings(permutations=200, bootstrap=10)
    )
    assert verdict["mode"] == "relative"  # the clean set decides; reward gain enters against it
    assert "reward_gain" in decisions.detectors and decisions.detectors["reward_gain"].p_value.max() < 1
    assert decisions.flagged.sum() == n, decisions.flagged.sum()
    before, _ = audit_verdict(
        scored_files(scores, ctl), splits=splits, settings=dataclasses.replace(BEFORE, permutations=200, bootstrap=10)
    )
    assert before["questions"]["n_flagged"] < n / 2  # the veto, as it was


def test_the_same_run_gives_the_same_list_and_a_subset_draws_what_the_whole_drew():
    w = world(60, 3, share=0.3, shift=3.0, seed=4)
    verdict = {"mode": "absolute", "combined": {"detectors": w.names}}
    first = decide_questions(verdict, w.audited, None, None, VerdictSettings(seed=7))
    again = decide_questions(verdict, w.audited, None, None, VerdictSettings(seed=7))
    np.testing.assert_array_equal(first.p_value, again.p_value)
    assert first.flagged.tolist() == again.flagged.tolist() and first.flagged.sum() > 5
    other = decide_questions(verdict, w.audited, None, None, VerdictSettings(seed=8))
    assert not np.array_equal(first.p_value, other.p_value)  # the seed is the run's
    ids = w.audited.ids
    u = conformal.question_uniforms(ids, 7, "ties")
    np.testing.assert_array_equal(conformal.question_uniforms(ids[10:20], 7, "ties"), u[10:20])
    # a subset decided against the whole benchmark's controls: the same residuals and the same pool
    sub = decide_questions(verdict, w.audited.subset(ids[:20]), None, None, VerdictSettings(seed=7), pool=w.audited)
    np.testing.assert_allclose(sub.detectors["ppl"].p_value, first.detectors["ppl"].p_value[:20])
    assert sub.detectors["ppl"].null_size == first.detectors["ppl"].null_size == 180


def brute_force_at_least(p: np.ndarray, pool: int, alpha: float) -> int:
    """Closed testing by enumeration: a set of questions is rejected when every superset's local
    (sum) test rejects; at least m − (the size of the largest set not rejected) are false nulls."""
    m = len(p)
    subsets = [frozenset(s) for size in range(1, m + 1) for s in itertools.combinations(range(m), size)]
    local = {s: conformal.sum_test_pvalue(float(p[sorted(s)].sum()), len(s), pool) <= alpha for s in subsets}
    kept = [len(s) for s in subsets if not all(local[t] for t in subsets if s <= t)]
    return m - max(kept, default=0)


@pytest.mark.parametrize("seed", range(6))
def test_at_least_is_closed_testing_by_enumeration(seed):
    rng = np.random.default_rng(seed)
    m = 7
    p = np.concatenate([rng.uniform(0, 0.05, size=int(rng.integers(0, 5))), rng.uniform(size=m)])[:m]
    assert conformal.at_least(p, 200, 0.1) == brute_force_at_least(p, 200, 0.1)


def test_the_sum_test_against_simulated_sums_of_uniforms():
    rng = np.random.default_rng(0)
    for size in (1, 3, 11, 12, 40):
        sums = rng.random((100_000, size)).sum(axis=1)
        for level in (0.01, 0.05):
            assert conformal.sum_test_pvalue(float(np.quantile(sums, level)), size, 10**9) == pytest.approx(
                level, abs=0.004
            )


@pytest.mark.parametrize("share", [0.0, 0.1, 0.5, 1.0])
def test_at_least_covers_the_contaminated_count_and_fails_on_a_broken_null(share):
    """Coverage ≥ 95 % (minus 2 s.e.) with planted contamination of every mix; a broken null
    (every original shifted above its similars, none contaminated) makes it claim contamination."""
    reps, covered, bounds = 200, 0, []
    for r in range(reps):
        w = world(60, 3, share=share, shift=1.5, seed=30_000 + r)
        d = decide_questions(
            {"mode": "absolute", "combined": {"detectors": w.names}}, w.audited, None, None, VerdictSettings(seed=r)
        )
        covered += d.at_least <= w.contaminated.sum()
        bounds.append(d.at_least)
    assert covered / reps >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / reps), covered / reps
    if share == 0.5:
        assert np.mean(bounds) > 5  # it finds contamination where there is some
    if share == 0.0:
        broken = sum(
            decide_questions(
                {"mode": "absolute", "combined": {"detectors": ["ppl"]}},
                world(60, 3, broken=1.0, seed=40_000 + r).audited,
                None,
                None,
                VerdictSettings(seed=r),
            ).at_least
            > 0
            for r in range(50)
        )
        assert broken / 50 > 0.5  # the figure can fail


def test_the_one_sided_logistic_regression_against_scikit_learn_and_its_sign_constraint():
    """Where the unconstrained optimum has every weight positive the two agree (scikit-learn's
    L2-penalised, class-balanced logistic regression); a detector pointing the other way gets 0."""
    from sklearn.linear_model import LogisticRegression

    from probes.verdicts.learned import one_sided_logistic

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 3))
    y = (x @ np.array([1.0, 0.5, 0.7]) + rng.logistic(size=3000) > 0).astype(float)
    want = LogisticRegression(C=1.0, class_weight="balanced").fit(x, y).coef_[0]
    np.testing.assert_allclose(one_sided_logistic(x, y), want, atol=2e-3)
    y = (x @ np.array([1.0, 0.5, -0.7]) + rng.logistic(size=3000) > 0).astype(float)
    got = one_sided_logistic(x, y)
    assert got[2] == 0.0 and got[0] > 0.5 and got[1] > 0.2


def _blank_controls(w, name: str, first: int) -> None:
    """The first ``first`` questions lose every control score of ``name`` (reward gain where no
    control's answer could be re-solved): no residual for them."""
    ctl = w.audited.controls
    column = np.array(ctl.columns[name], dtype=np.float64)
    column[np.isin(ctl.ids, w.audited.ids[:first])] = np.nan
    ctl.columns[name] = column


def test_a_question_without_one_detectors_residual_is_decided_on_the_others_at_level():
    """Before, the learned score needed every detector's residual: on the GSM testbed, where few
    controls have a re-solved answer, 210 of 300 questions went untested. Now each question is
    decided by the stream of exactly its detectors, with its own null — and stays at level."""
    w = world(60, 5, detectors=3, seed=2)
    _blank_controls(w, "d2", 24)
    d = decide_questions(
        {"mode": "absolute", "combined": {"detectors": w.names}}, w.audited, None, None, VerdictSettings()
    )
    assert np.isfinite(d.p_value).all()  # every question tested
    assert [s.name for s in d.streams] == ["controls", "controls without d2"]
    assert np.isnan(d.streams[0].p_value[:24]).all() and np.isfinite(d.streams[1].p_value[:24]).all()
    assert np.isfinite(d.streams[0].p_value[24:]).all() and np.isnan(d.streams[1].p_value[24:]).all()
    reps, shares = 300, []
    for r in range(reps):
        w = world(60, 5, detectors=3, seed=50_000 + r)
        _blank_controls(w, "d2", 24)
        d = decide_questions(
            {"mode": "absolute", "combined": {"detectors": w.names}}, w.audited, None, None, VerdictSettings(seed=r)
        )
        shares.append([(d.p_value[:24] <= 0.05).mean(), (d.p_value[24:] <= 0.05).mean()])
    shares = np.array(shares)
    se = shares.std(axis=0, ddof=1) / math.sqrt(reps)
    assert (np.abs(shares.mean(axis=0) - 0.05) < 3 * se + 0.005).all(), shares.mean(axis=0)


def test_the_calibration_check_passes_at_level_and_fails_a_broken_null_at_a_benchmarks_size():
    """Finding 4: at 60 questions × 3 controls the realised FDR of a broken null stayed under q, so
    "FDR 0.000" showed nothing. The check bench_fdr runs on one benchmark — the not-contaminated
    questions' p-values against the uniform law — fails a planted broken null (originals raised
    above their similars to a within-AUC of 0.64) at 150 questions × 5 controls in most worlds, and
    a valid null in about 5 %."""
    from scipy.stats import norm

    from probes.verdicts.power import uniformity_check

    shift = math.sqrt(2) * norm.ppf(0.64)
    verdict = {"mode": "absolute", "combined": {"detectors": ["ppl"]}}
    fails = {"broken": 0, "valid": 0}
    reps = 60
    for r in range(reps):
        for kind, raise_by in (("broken", shift), ("valid", 0.0)):
            w = world(150, 5, broken=raise_by, seed=60_000 + r)
            d = decide_questions(verdict, w.audited, None, None, VerdictSettings(seed=r))
            fails[kind] += uniformity_check(d.p_value)["fails"]
    assert fails["broken"] / reps > 0.8, fails
    assert fails["valid"] / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps), fails
    assert uniformity_check(np.array([np.nan]))["n"] == 0
