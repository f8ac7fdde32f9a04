"""The learned score's screen (docs/verdicts.md, "Many detectors"): a detector enters the fit only where
its originals rank above the null texts on the fold it is fitted on — against scipy's
Mann–Whitney test; with pure-noise detectors beside a real one the bound keeps most of what the
real one alone gives (and loses much without the screen: the figure can fail); the decisions keep
their level with the screen on."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from probes.verdicts.decisions import decide_questions
from probes.verdicts.learned import screened
from probes.verdicts.modes import VerdictSettings
from probes.verdicts.simulation import world


def test_the_screen_is_mann_whitneys_one_sided_test_and_keeps_the_strongest_when_none_passes():
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(0)
    for _ in range(20):
        negatives = rng.normal(size=(300, 6))
        positives = rng.normal(size=(40, 6)) + np.array([0.0, 0.1, 0.3, 0.5, 0.8, -0.5])
        positives[:5, 1] = negatives[:5, 1]  # ties: mid-ranks on both sides
        want = mannwhitneyu(positives, negatives, alternative="greater", method="asymptotic", use_continuity=False)
        np.testing.assert_array_equal(screened(negatives, positives, 0.05), want.pvalue < 0.05)
    none = screened(rng.normal(size=(300, 3)), rng.normal(size=(40, 3)) - [1.0, 0.2, 2.0], 0.05)
    assert none.tolist() == [False, True, False]  # none passes: the one ranking highest stays


def _noise(w, k: int, seed: int) -> list[str]:
    """``k`` pure-noise detectors beside the world's: a fresh normal draw for every text."""
    rng = np.random.default_rng(seed)
    for j in range(k):
        w.audited.scores.columns[f"noise{j}"] = rng.normal(size=len(w.audited.scores.ids))
        w.audited.controls.columns[f"noise{j}"] = rng.normal(size=len(w.audited.controls.ids))
    return w.names + [f"noise{j}" for j in range(k)]


def _bound(w, names: list[str], settings: VerdictSettings) -> int:
    d = decide_questions({"mode": "absolute", "combined": {"detectors": names}}, w.audited, None, None, settings)
    return d.at_least


def test_noise_detectors_cost_the_bound_little_with_the_screen_and_much_without():
    """One detector carries the signal (half the questions contaminated); 13 carry none. Paired
    over 25 worlds: the bound over all 14 stays near the real detector's alone with the screen,
    and falls well below it without (the planted fault the figure must catch)."""
    alone, screened_bounds, unscreened = [], [], []
    settings = VerdictSettings(decision_screen=0.01)
    for r in range(25):
        w = world(120, 8, share=0.5, shift=1.2, seed=70_000 + r)
        names = _noise(w, 13, seed=r)
        s = dataclasses.replace(settings, seed=r)
        alone.append(_bound(w, w.names, s))
        screened_bounds.append(_bound(w, names, s))
        unscreened.append(_bound(w, names, dataclasses.replace(s, decision_screen=None)))
    alone, screened_bounds, unscreened = map(np.array, (alone, screened_bounds, unscreened))
    se = (alone - screened_bounds).std(ddof=1) / math.sqrt(len(alone))
    assert alone.mean() > 15  # a real signal to keep
    assert (alone - screened_bounds).mean() < max(3 * se, 0.1 * alone.mean()), (alone.mean(), screened_bounds.mean())
    assert (alone - unscreened).mean() > 0.25 * alone.mean(), (alone.mean(), unscreened.mean())


def test_with_the_screen_and_noise_detectors_the_p_values_of_clean_questions_stay_uniform():
    reps, shares = 150, []
    for r in range(reps):
        w = world(60, 5, detectors=3, seed=80_000 + r)
        names = _noise(w, 6, seed=r)
        d = decide_questions(
            {"mode": "absolute", "combined": {"detectors": names}},
            w.audited,
            None,
            None,
            VerdictSettings(seed=r, decision_screen=0.01),
        )
        shares.append([(d.p_value <= t).mean() for t in (0.05, 0.2)])
    shares = np.array(shares)
    se = shares.std(axis=0, ddof=1) / math.sqrt(reps)
    assert (np.abs(shares.mean(axis=0) - [0.05, 0.2]) < 3 * se + 0.005).all(), shares.mean(axis=0)
