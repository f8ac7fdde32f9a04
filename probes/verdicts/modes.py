"""Label-free verdicts (SPEC §8.3–8.6): per detector a calibrated test of "the benchmark is in the
RL data", combined over detectors, in the first available of three modes.

* **reference**: the within-question test on difference scores Δ = s_audited − s_reference of the
  originals and their controls (the generator's bias hits both models and cancels).
* **relative**: the audited questions' within-ranks r_j (or, for a detector without controls such
  as LaRA, their scores) against a clean set's, one-sided Mann–Whitney. Valid only if the clean
  set is drawn like the audited one.
* **absolute**: the within-question test as it is; its size depends on how exchangeable the
  generator's similars are with real questions, so it is marked ``"calibrated": false``.

Every available mode is computed and reported; the first available one decides. A mode in which no
detector has a usable question is unavailable and never decides; with no available mode the
result is *no verdict* (never "not flagged").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, InputError
from ..scorefiles import ScoredSet, first_scored
from . import stats
from .comparable import check_aligned, check_settings

MODES = ("reference", "relative", "absolute")
REFERENCE_CONSTANT = (
    "the reference scores every text the same (e.g. its drift from itself), so subtracting it calibrates "
    "nothing: this is the absolute mode's test, left out of the reference mode"
)
# detectors that enter the relative mode by their scores against the clean set's, with controls or without: reward
# gain's (and gold shift's) within-question ranks need controls with re-solved answers, whose share differs by template, so the two sets'
# ranks would be compared over different kinds of questions (on the GSM testbed its size went from 0.02 to 0.375)
PLAIN_RELATIVE = ("lara", "reward_gain", "gold_shift")
# detectors whose score is already audited minus reference of one statistic of the same text (the detectors'
# ``reference_difference`` tag; a test keeps the two equal): in the reference mode each is its own difference
REFERENCE_DIFFERENCES = ("ref", "reward_gain", "shift_vote", "answer_shift", "gold_shift")
_ABSOLUTE_CAVEAT = (
    "absolute mode: the within-question test assumes the generator's similar questions are exchangeable "
    "with real ones; its size depends on the generator and is not calibrated."
)
ABSOLUTE_WARNING = (
    f"{_ABSOLUTE_CAVEAT} Give a reference model (the checkpoint before RL) or a clean set drawn like the audited "
    "questions for a calibrated verdict"
)
# the same warning on the reference model's own verdict, which no reference can calibrate
REFERENCE_ABSOLUTE_WARNING = (
    f"{_ABSOLUTE_CAVEAT} This model is the run's reference, so only a clean set drawn like the audited questions "
    "(split clean_ref) calibrates its verdict"
)
NO_VERDICT = (
    "no verdict: no mode has a detector with a usable question (scores NaN, or too few scored controls); "
    "this is not a negative answer — fix the scores (see the counts left out) and run the verdict again"
)
RELATIVE_WARNING = (
    "relative mode is valid only if the clean set is drawn like the audited questions (same sources, same "
    "kinds of problems)"
)


@dataclass(frozen=True)
class VerdictSettings:
    """How a verdict is computed (SPEC §8 defaults).

    Attributes:
        alpha: level of the combined test.
        combine: ``cauchy`` (valid under any dependence) or ``bonferroni``.
        detectors: the detectors combined (None: every detector with controls, plus ``lara`` in
            the relative mode).
        permutations / bootstrap: resamples of the permutation test and of the CIs.
        storey_lambda: λ of Storey's bound.
        seed: seed of every random draw.
        subsets: groups of the audited questions with a verdict of their own (``members``,
            ``non_members`` by label, or a split name); labels never enter a verdict otherwise.
        fdr: the false-discovery rate of the per-question decisions (SPEC §8.10).
        fdr_method: ``bh`` (Benjamini–Hochberg), ``two-stage`` (Benjamini–Krieger–Yekutieli's
            adaptive BH) or ``storey`` (Storey's adaptive BH, π̂₀ at ``storey_lambda``): the
            adaptive ones have more power when many questions are contaminated.
        decision_residual: an original's residual against the median of all but one of its
            controls, dropped at random (``matched``, SPEC §8.10: drawn like a control's residual
            against the others, so the decisions are at level), or of all (``spec``, the form
            before: less dispersed than the pool's, 10–100× conservative, not valid for discrete
            scores).
        decision_pvalue: ``randomised`` over ties (SPEC §8.10: exactly uniform, never 1; the
            draw comes from ``seed`` and the question id, so the same run gives the same list) or
            ``spec`` (1 + #{null ≥ e}) / (1 + n_null), deterministic and conservative with ties.
        decision_combine: one question's evidence from several detectors: ``learned`` (one
            cross-fitted score per text over the detectors' residuals, AdaDetect; a p-value per
            null, Bonferroni over them), ``cauchy`` or ``bonferroni`` over each detector's own
            p-value.
        decision_screen: the learned score's screen: a detector enters its fit only where its
            originals rank above the null texts at this one-sided level on the fold it is fitted on
            (the strongest one where none does); None (the default) fits every detector. It keeps
            pure-noise detectors from costing the bound, but on the toy testbed it costs real
            weak detectors more than it saves (docs/verdicts.md, "Many detectors").
    """

    alpha: float = 0.05
    combine: Literal["cauchy", "bonferroni"] = "cauchy"
    detectors: tuple[str, ...] | None = None
    permutations: int = 10_000
    bootstrap: int = 1000
    storey_lambda: float = 0.5
    seed: int = 0
    subsets: tuple[str, ...] = ()
    fdr: float = 0.10
    fdr_method: Literal["bh", "two-stage", "storey"] = "storey"
    decision_residual: Literal["matched", "spec"] = "matched"
    decision_pvalue: Literal["randomised", "spec"] = "randomised"
    decision_combine: Literal["learned", "cauchy", "bonferroni"] = "learned"
    decision_screen: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ConfigError(f"verdict alpha must be in (0, 1), got {self.alpha}")
        if not 0 < self.fdr < 1:
            raise ConfigError(f"verdict fdr must be in (0, 1), got {self.fdr}")
        if self.fdr_method not in ("bh", "two-stage", "storey"):
            raise ConfigError(f"verdict fdr_method: {self.fdr_method!r}; choose bh, two-stage or storey")
        if self.decision_residual not in ("spec", "matched"):
            raise ConfigError(f"verdict decision_residual: {self.decision_residual!r}; choose spec or matched")
        if self.decision_pvalue not in ("spec", "randomised"):
            raise ConfigError(f"verdict decision_pvalue: {self.decision_pvalue!r}; choose spec or randomised")
        if self.decision_combine not in ("learned", "cauchy", "bonferroni"):
            raise ConfigError(
                f"verdict decision_combine: {self.decision_combine!r}; choose learned, cauchy or bonferroni"
            )
        if self.decision_screen is not None and not 0 < self.decision_screen < 1:
            raise ConfigError(f"verdict decision_screen must be in (0, 1) or null, got {self.decision_screen}")
        if self.combine not in ("cauchy", "bonferroni"):
            raise ConfigError(f"verdict combine: {self.combine!r}; choose cauchy or bonferroni")
        if self.detectors is not None:
            object.__setattr__(self, "detectors", tuple(self.detectors))
        object.__setattr__(self, "subsets", tuple(self.subsets))
        if self.permutations < 1 or self.bootstrap < 1:
            raise ConfigError("verdict permutations and bootstrap must be >= 1")


def within_test(original: np.ndarray, controls: np.ndarray, s: VerdictSettings) -> dict[str, Any]:
    """SPEC §8.3–8.4 for one detector: the permutation p-value, the within-AUC T with a bootstrap
    CI over questions, Storey's contaminated fraction with its CI, the questions used and those
    left out (by reason)."""
    t, p = stats.permutation_test(original, controls, s.permutations, s.seed)
    r = stats.within_ranks(original, controls)
    pj = stats.question_pvalues(original, controls, s.seed)
    out = _figures(p, t, stats.bootstrap_ci(r, np.mean, s.bootstrap, s.seed), pj, s, int((~np.isnan(r)).sum()))
    out["left_out"] = stats.left_out(original, controls)
    if stats.all_tied(original, controls):
        out.update(p_value=math.nan, uninformative="every question's original ties with its controls")
    return out


def relative_test(audited: np.ndarray, clean: np.ndarray, s: VerdictSettings) -> dict[str, Any]:
    """SPEC §8.6 relative: audited statistics against a clean set's (one-sided Mann–Whitney, exact
    by permutation); the AUC of audited vs clean (0.5 under H0) with a two-sample bootstrap CI; the
    difference of means; Storey's fraction from each audited value's p-value against the clean
    values; the NaN values left out on each side."""
    from scipy.stats import rankdata

    auc, p = stats.mann_whitney_greater(audited, clean, s.permutations, s.seed)
    a, c = audited[~np.isnan(audited)], clean[~np.isnan(clean)]
    rng = np.random.default_rng(s.seed)
    draws, deltas = np.full(s.bootstrap, np.nan), np.full(s.bootstrap, np.nan)
    for b in range(s.bootstrap if len(a) and len(c) else 0):
        ra, rc = a[rng.integers(0, len(a), len(a))], c[rng.integers(0, len(c), len(c))]
        ranks = rankdata(np.concatenate([ra, rc]))[: len(ra)]  # AUC from ranks: O(n log n), ties averaged
        draws[b] = (ranks.sum() - len(ra) * (len(ra) + 1) / 2) / (len(ra) * len(rc))
        with np.errstate(invalid="ignore"):
            deltas[b] = ra.mean() - rc.mean()
    out = _figures(p, auc, _interval(draws), stats.empirical_pvalues(audited, clean, s.seed), s, len(a))
    with np.errstate(invalid="ignore"):
        out["difference"] = {
            "value": float(a.mean() - c.mean()) if len(a) and len(c) else math.nan,
            "ci": _interval(deltas),
        }
    out["n_clean"] = int(len(c))
    out["left_out"] = {"nan_score": int(np.isnan(audited).sum())}
    out["clean_left_out"] = {"nan_score": int(np.isnan(clean).sum())}
    if len(a) and len(c) and np.unique(np.concatenate([a, c])).size == 1:
        out.update(p_value=math.nan, uninformative="one value on both sides")
    return out


def relative_within_test(
    audited: tuple[np.ndarray, np.ndarray], clean: tuple[np.ndarray, np.ndarray], s: VerdictSettings
) -> dict[str, Any]:
    """The relative mode for a detector with controls: each side's within-ranks over the *same*
    number of controls C (the smaller of the two sets' widths; a question with fewer scored
    controls is left out and counted), so r_j has one null distribution on both sides."""
    (a_orig, a_ctl), (c_orig, c_ctl) = audited, clean
    width = min(a_ctl.shape[1], c_ctl.shape[1])
    a_ctl, c_ctl = stats.first_controls(a_ctl, width), stats.first_controls(c_ctl, width)
    out = relative_test(stats.within_ranks(a_orig, a_ctl), stats.within_ranks(c_orig, c_ctl), s)
    out["controls_per_question"] = width
    needed = max(width, stats.MIN_CONTROLS)
    out["left_out"] = stats.left_out(a_orig, a_ctl, needed)
    out["clean_left_out"] = stats.left_out(c_orig, c_ctl, needed)
    return out


def _figures(
    p: float, value: float, ci: tuple[float, float], pj: np.ndarray, s: VerdictSettings, n: int
) -> dict[str, Any]:
    pi1 = stats.storey_pi1(pj, s.storey_lambda)
    pi_ci = stats.bootstrap_ci(pj, lambda v: stats.storey_pi1(v, s.storey_lambda), s.bootstrap, s.seed)
    return {
        "p_value": p,
        "within_auc": {"value": value, "ci": list(ci)},
        "contaminated_fraction": {"value": pi1, "ci": list(pi_ci), "reported_as": "at least"},
        "n": n,
    }


def _interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    finite = draws[np.isfinite(draws)]
    if not len(finite):
        return math.nan, math.nan
    return float(np.percentile(finite, 100 * (1 - level) / 2)), float(np.percentile(finite, 100 * (1 + level) / 2))


def _combine(per_detector: dict[str, dict[str, Any]], s: VerdictSettings) -> dict[str, Any]:
    names = [n for n, r in per_detector.items() if math.isfinite(r["p_value"])]
    pvalues = [per_detector[n]["p_value"] for n in names]
    p = stats.cauchy_combination(pvalues) if s.combine == "cauchy" else stats.bonferroni(pvalues)
    return {"p_value": p, "method": s.combine, "detectors": names}


def _mode(per_detector: dict[str, dict[str, Any]], s: VerdictSettings) -> dict[str, Any]:
    combined = _combine(per_detector, s)
    left = {n: r["uninformative"] for n, r in per_detector.items() if r.get("uninformative")}
    if left:
        combined["left_out"] = {n: f"no information ({why})" for n, why in left.items()}
    uncalibrated = {n: r["not_calibrated"] for n, r in per_detector.items() if r.get("not_calibrated")}
    if uncalibrated:
        combined["not_calibrated"] = uncalibrated
    reject = bool(combined["p_value"] < s.alpha)
    if not reject:  # no fraction is a lower bound on contamination the mode found no evidence of
        per_detector = {n: _fraction_withheld(r) for n, r in per_detector.items()}
    return {"reject": reject, "combined": combined, "detectors": per_detector}


FRACTION_WITHHELD = (
    "not reported: the mode does not reject, so no contaminated fraction is shown as a lower bound "
    "(the estimate and its CI are kept for diagnosis)"
)


def _fraction_withheld(record: dict[str, Any]) -> dict[str, Any]:
    """A detector's record with its contaminated fraction withheld (``value`` None, the estimate
    kept as ``estimate``): Storey's bound reads above 0 by chance on clean questions."""
    fraction = record["contaminated_fraction"]
    withheld = {"value": None, "estimate": fraction["value"], "ci": fraction["ci"], "reported_as": FRACTION_WITHHELD}
    return {**record, "contaminated_fraction": withheld}


def _reference_mode(
    audited: ScoredSet, reference: ScoredSet, names: list[str], s: VerdictSettings, notes: list[str]
) -> dict[str, dict[str, Any]]:
    ref = reference.subset(audited.ids)
    usable = [n for n in names if n not in REFERENCE_DIFFERENCES and ref.has_controls(n) and n in ref.scores.columns]
    notes += check_aligned(audited, ref, usable) if usable else []
    width = max(audited.width, ref.width)
    with np.errstate(invalid="ignore"):  # inf − inf: NaN, left out and counted
        out = {
            n: within_test(audited.original(n) - ref.original(n), _control_differences(audited, ref, n, width), s)
            for n in usable
        }
    for n in usable:
        if math.isfinite(out[n]["p_value"]) and _constant(ref.original(n), ref.control_matrix(n, width)):
            out[n].update(p_value=math.nan, not_calibrated=REFERENCE_CONSTANT)
    out.update(
        {n: within_test(audited.original(n), audited.control_matrix(n), s) for n in names if n in REFERENCE_DIFFERENCES}
    )
    return out


def _control_differences(audited: ScoredSet, ref: ScoredSet, name: str, width: int) -> np.ndarray:
    """``[n, width]``: audited − reference on the same controls (by index), then each question's first
    ``width`` controls both scored — the cut after the difference, so the two stay paired."""
    both = audited.limited(None), ref.limited(None)
    largest = max(x.largest for x in both)
    diff = both[0].control_matrix(name, largest) - both[1].control_matrix(name, largest)
    return first_scored(diff, width) if audited.max_controls is not None else diff[:, :width]


def _constant(original: np.ndarray, controls: np.ndarray) -> bool:
    """Whether every finite score (originals and controls) is one value."""
    values = np.concatenate([np.ravel(original), np.ravel(controls)])
    values = values[np.isfinite(values)]
    return len(values) > 0 and bool((values == values[0]).all())


def _relative_mode(
    audited: ScoredSet, clean: ScoredSet, names: list[str], s: VerdictSettings, notes: list[str]
) -> dict[str, dict[str, Any]]:
    notes += check_settings(audited, clean, [n for n in names if n in clean.scores.columns], "clean set")
    out = {
        n: relative_within_test(
            (audited.original(n), audited.control_matrix(n)), (clean.original(n), clean.control_matrix(n)), s
        )
        for n in names
        if clean.has_controls(n) and n not in PLAIN_RELATIVE
    }
    plain = [
        n
        for n in (s.detectors or PLAIN_RELATIVE)
        if n not in out
        and n in audited.scores.columns
        and n in clean.scores.columns
        and (n in PLAIN_RELATIVE or not audited.has_controls(n))
    ]
    out.update({n: relative_test(audited.original(n), clean.original(n), s) for n in plain})
    return out


def compute_verdict(
    audited: ScoredSet,
    reference: ScoredSet | None = None,
    clean: ScoredSet | None = None,
    settings: VerdictSettings = VerdictSettings(),
) -> dict[str, Any]:
    """The verdict on ``audited`` (see the module docstring): every available mode, the first deciding.

    ``reference``: the reference model's scores on the same questions and controls; ``clean``: the
    audited model's scores on a clean set (and its controls). A mode in which no detector has a
    usable question is unavailable (listed under ``unavailable`` with why) and never decides;
    when no mode is available the result is *no verdict*: ``mode`` and ``reject`` are None."""
    s = settings
    with_controls = [
        n for n in (s.detectors or (audited.controls.columns if audited.controls else ())) if audited.has_controls(n)
    ]
    candidates: dict[str, dict[str, dict[str, Any]]] = {}
    notes: list[str] = []
    if reference is not None:
        candidates["reference"] = _reference_mode(audited, reference, with_controls, s, notes)
    if clean is not None:
        candidates["relative"] = _relative_mode(audited, clean, with_controls, s, notes)
    if with_controls:
        candidates["absolute"] = {
            n: within_test(audited.original(n), audited.control_matrix(n), s) for n in with_controls
        }
    if not any(candidates.values()):
        raise InputError(
            "no verdict can be computed: score the questions' controls (lara detect --sets SETS.jsonl), "
            "or give a clean set for the relative mode"
        )
    modes = {
        m: _mode(per, s) for m, per in candidates.items() if any(math.isfinite(r["p_value"]) for r in per.values())
    }
    unavailable = {m: _why_unavailable(per) for m, per in candidates.items() if m not in modes}
    base = {"alpha": s.alpha, "n": len(audited.ids), "modes": modes, "unavailable": unavailable, "notes": notes}
    if not modes:
        return {
            **base,
            "mode": None,
            "calibrated": None,
            "reject": None,
            "detectors": {},
            "combined": {"p_value": math.nan, "method": s.combine, "detectors": []},
            "warnings": [NO_VERDICT],
        }
    if clean is not None and "absolute" in modes:
        base["absolute_on_clean"] = _absolute_on_clean(clean, with_controls, len(audited.ids), s)
    mode = next(m for m in MODES if m in modes)
    plain = [n for n in (s.detectors or PLAIN_RELATIVE) if n in audited.scores.columns and not audited.has_controls(n)]
    if mode != "relative" and plain:
        notes.append(
            f"{', '.join(plain)}: no controls, so not in the {mode} mode's combination; "
            + (
                "tested in the relative mode against the clean set (the per-question decisions weigh what the deciding mode weighs)"
                if clean is not None
                else "give a clean set (split clean_ref) to test them"
            )
        )
    warnings = [ABSOLUTE_WARNING] if mode == "absolute" else []
    if "relative" in modes:
        warnings.append(RELATIVE_WARNING)
    return {**base, "mode": mode, "calibrated": mode != "absolute", **modes[mode], "warnings": warnings}


def _absolute_on_clean(clean: ScoredSet, names: list[str], n_audited: int, s: VerdictSettings) -> dict[str, Any]:
    """The absolute mode's test on the clean set itself and its estimated size at the audited count."""
    from .absolute_size import absolute_size  # lazy: pulls scipy

    usable = [n for n in names if clean.has_controls(n)]
    test = {n: within_test(clean.original(n), clean.control_matrix(n), s) for n in usable}
    size = absolute_size(
        {n: clean.original(n) for n in usable},
        {n: clean.control_matrix(n) for n in usable},
        n_audited,
        s.alpha,
        s.combine,
        s.seed,
    )
    return {"test": _mode(test, s) if any(math.isfinite(r["p_value"]) for r in test.values()) else None, "size": size}


def _why_unavailable(per_detector: dict[str, dict[str, Any]]) -> str:
    if not per_detector:
        return "no detector has the scores this mode needs"
    if all(r.get("not_calibrated") for r in per_detector.values()):
        return f"{', '.join(per_detector)}: {REFERENCE_CONSTANT}"
    counts = "; ".join(
        f"{n}: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in r.get("left_out", {}).items() if v)
        for n, r in per_detector.items()
    )
    return f"no detector has a usable question ({counts or 'no questions'})"
