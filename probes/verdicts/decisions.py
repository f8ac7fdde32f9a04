"""Which questions (SPEC §8.10): per-question decisions with a false-discovery guarantee, in the
verdict's deciding mode, and a lower bound on how many questions are contaminated.

Per detector and question, the original's residual e_j in that mode's scores (reference:
s_audited − s_reference; absolute: s_audited) is taken against all but one of its controls (one
dropped at random, so that it is drawn like a control's residual), and gets a randomised conformal
p-value against the pool of every control's residual — of the audited questions, or of the whole
benchmark when a subset is decided (``pool``). In the relative mode the pool is the clean set's
originals (residuals, or scores for a detector without controls such as LaRA or reward gain).

One learned score per text combines the detectors (:mod:`.learned`, AdaDetect, weights ≥ 0): over
their residuals against the controls (reference and absolute modes) or against the clean set's
originals (relative mode, where detectors without controls enter too). The decisions weigh what
their mode's verdict weighs: a reference-mode decision does not lean on the clean set, whose
exchangeability with the audited questions is the relative mode's assumption. The learned score's
conformal p-value is the question's (with several nulls, their Bonferroni: no detector and no null
can veto a question); Benjamini–Hochberg at ``fdr`` flags questions, with q-values; closed testing
over the same p-values gives "at least k of the n are contaminated" at 1 − α. A Cauchy or
Bonferroni combination of the detectors' own p-values is an option (``decision_combine``). Flags
from the absolute mode are marked uncalibrated, as its verdict is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..robust import robust_scale
from ..scorefiles import ScoredSet
from . import conformal, learned, stats
from .decision_table import DetectorEvidence, QuestionDecisions, Stream
from .modes import PLAIN_RELATIVE, REFERENCE_DIFFERENCES, VerdictSettings

__all__ = ["DetectorEvidence", "QuestionDecisions", "Stream", "decide_questions"]


@dataclass
class _Texts:
    """One detector's decisive-mode scores over the pool's questions: ``original [P]``,
    ``controls [P, C]`` (None without controls)."""

    original: np.ndarray
    controls: np.ndarray | None


def decide_questions(
    verdict: dict,
    audited: ScoredSet,
    reference: ScoredSet | None,
    clean: ScoredSet | None,
    settings: VerdictSettings,
    pool: ScoredSet | None = None,
) -> QuestionDecisions | None:
    """The per-question decisions in the verdict's deciding mode over its detectors. ``pool``: the whole benchmark when
    ``audited`` is a subset of it — its questions' controls join the null (a control is fresh
    whichever question it belongs to). None when there is no verdict."""
    mode = verdict.get("mode")
    if mode is None:
        return None
    names = list(verdict["combined"]["detectors"])
    if mode == "relative":
        assert clean is not None
        evidence, streams = _relative(names, audited, clean, settings)
    else:
        evidence, streams = _within(mode, names, audited, reference, settings, pool)
    p_value, lines = _combine(evidence, streams, settings, len(audited.ids))
    flagged, q_value = conformal.benjamini_hochberg(p_value, settings.fdr, settings.fdr_method, settings.storey_lambda)
    bound = max((conformal.at_least(p, size, settings.alpha / len(lines)) for p, size in lines), default=0)
    notes = []
    if mode == "absolute":
        notes.append(
            "flags from the absolute mode are uncalibrated, as its verdict is: the generator's similars may not be "
            "exchangeable with real questions"
        )
    if settings.decision_residual == "spec":
        notes.append(
            "decision_residual: spec — an original's residual against all its controls is less dispersed than a "
            "control's against the others, so the decisions are conservative (and not valid for coarse scores)"
        )
    return QuestionDecisions(
        list(audited.ids),
        mode,
        mode != "absolute",
        settings.fdr,
        settings.fdr_method,
        settings.decision_combine,
        evidence,
        streams,
        p_value,
        q_value,
        flagged,
        bound,
        1 - settings.alpha,
        notes,
        lines,
    )


def _combine(
    evidence: dict[str, DetectorEvidence], streams: list[Stream], s: VerdictSettings, n: int
) -> tuple[np.ndarray, list[tuple[np.ndarray, int]]]:
    """Each question's p-value and the lines of evidence behind it (p-values ``[N]`` and the
    smallest pool behind them) for the "at least" bound. The learned streams of one null decide
    disjoint sets of questions (each the questions with exactly its detectors): one line."""
    if s.decision_combine == "learned" and streams:
        p = np.column_stack([st.p_value for st in streams])
        combined = conformal.bonferroni_per_question(p)
        return combined, [(combined, min(st.pool for st in streams))]
    else:
        lines = [(e.p_value, e.null_size) for e in evidence.values()]
        p = np.column_stack([e.p_value for e in evidence.values()]) if evidence else np.full((n, 1), np.nan)
    if s.decision_combine == "cauchy":
        return conformal.combine_per_question(dict(enumerate(p.T))), lines
    return conformal.bonferroni_per_question(p), lines


def _uniforms(ids: list[str], s: VerdictSettings) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(which control an original's residual drops, the tie-breaking draw), per question id."""
    drop = conformal.question_uniforms(ids, s.seed, "drop") if s.decision_residual == "matched" else None
    ties = conformal.question_uniforms(ids, s.seed, "ties") if s.decision_pvalue == "randomised" else None
    return drop, ties


def _decisive(mode: str, name: str, scored: ScoredSet, reference: ScoredSet | None, width: int | None = None) -> _Texts:
    """A detector's scores in the mode's terms on ``scored``'s questions (reference: minus the
    reference model's on the same texts)."""
    original = scored.original(name)
    controls = scored.control_matrix(name, width) if scored.has_controls(name) else None
    if mode != "reference" or name in REFERENCE_DIFFERENCES:  # such a score is its own reference difference
        return _Texts(original, controls)
    assert reference is not None
    ref = reference.subset(scored.ids)
    with np.errstate(invalid="ignore"):  # inf − inf is NaN: left out, counted
        if controls is None:
            return _Texts(original - ref.original(name), None)
        return _Texts(original - ref.original(name), controls - ref.control_matrix(name, controls.shape[1]))


def _within(
    mode: str,
    names: list[str],
    audited: ScoredSet,
    reference: ScoredSet | None,
    s: VerdictSettings,
    pool: ScoredSet | None,
) -> tuple[dict[str, DetectorEvidence], list[Stream]]:
    """Reference and absolute modes: each detector's residuals against the pooled control
    residuals, and the learned stream over them."""
    extra = [i for i in (pool.ids if pool is not None else []) if i not in set(audited.ids)]
    everyone = audited.subset(list(audited.ids) + extra)
    n = len(audited.ids)
    width = max(everyone.width, reference.width if reference is not None else 0)
    drop, ties = _uniforms(everyone.ids, s)
    evidence, own, null = {}, [], []
    for name in names:
        texts = _decisive(mode, name, everyone, reference, width)
        residual = conformal.original_residuals(texts.original, texts.controls, drop)
        controls = conformal.control_residuals(texts.original, texts.controls)
        scale = _scale(texts.controls)
        p = conformal.conformal_pvalues(residual[:n], controls, None if ties is None else ties[:n])
        evidence[name] = DetectorEvidence(
            texts.original[:n],
            texts.controls[:n],
            _scaled(residual[:n], scale),
            p,
            int((~np.isnan(controls)).sum()),
            scale,
            stats.left_out(texts.original[:n], texts.controls[:n], conformal.MIN_CONTROLS),
            null_values=_scaled(controls[~np.isnan(controls)], scale),
        )
        own.append(_scaled(residual, scale))
        null.append(_scaled(controls, scale))
    if not names:
        return evidence, []
    fold = learned.folds(everyone.ids, s.seed)
    controls_x, own_x = np.stack(null, axis=-1), np.stack(own, axis=-1)  # [P, C, D], [P, D]
    null_x = controls_x.reshape(-1, len(names))  # [P·C, D]: a control takes its question's fold
    null_fold = np.repeat(fold, controls_x.shape[1])
    tested = _Residuals(null_x, null_fold, own_x[:n], fold[:n], None if ties is None else ties[:n], (own_x, fold))
    return evidence, _streams("controls", names, tested, "every control's residual", s.decision_screen)


@dataclass
class _Residuals:
    """The residuals a stream decides on: the null's ``null_x [M, D]`` and the tested questions'
    ``own_x [N, D]`` (NaN where a detector has none), each row's cross-fitting fold, the tested
    questions' tie-break draws, and the originals a learned score is fitted against (``train``:
    residuals and folds; None: the tested ones)."""

    null_x: np.ndarray
    null_fold: np.ndarray
    own_x: np.ndarray
    own_fold: np.ndarray
    ties: np.ndarray | None
    train: tuple[np.ndarray, np.ndarray] | None = None


def _streams(name: str, names: list[str], r: _Residuals, what: str, screen: float | None) -> list[Stream]:
    """One learned stream per set of detectors the tested questions have residuals for (null
    ``[M, D]``, tested ``[N, D]``, NaN where a detector has none): each question is decided by the
    stream of exactly its detectors, whose null texts and training originals are those scored by all
    of them — so a question without reward gain's residual is decided on the others, not left out."""
    out = []
    sets, which = _detector_sets(r.own_x)
    for k, used in enumerate(sets):
        x_null = r.null_x[:, used]
        kept = ~np.isnan(x_null).any(axis=1)
        tested = r.own_x[:, used].copy()
        tested[which != k] = np.nan
        fit_on = None
        if r.train is not None:
            x_train = r.train[0][:, used]
            complete = ~np.isnan(x_train).any(axis=1)
            fit_on = (x_train[complete], r.train[1][complete])
        left = [n for n, u in zip(names, used) if not u]
        stream = _stream(
            name + (f" without {', '.join(left)}" if left else ""),
            [n for n, u in zip(names, used) if u],
            _Residuals(x_null[kept], r.null_fold[kept], tested, r.own_fold, r.ties, fit_on),
            what,
            screen,
        )
        stream.left_out = {"decided by another stream (another set of detectors)": int((which != k).sum())}
        out.append(stream)
    return out


def _detector_sets(own: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct sets of detectors the questions ``own [N, D]`` have residuals for (``[D]``
    masks, none empty, the fullest first), and each question's set (``[N]`` index; -1: none): a
    question that lacks one detector's residual (reward gain where too few of its controls have a
    re-solved answer) is decided on the others, by a score and a null of its own, not left out.
    With no question having any, one set of them all (every p NaN)."""
    present = ~np.isnan(own)
    masks = sorted({tuple(row) for row in present if row.any()}, key=lambda m: (-sum(m), m))
    index = {m: k for k, m in enumerate(masks)}
    which = np.array([index.get(tuple(row), -1) for row in present], dtype=np.int64)
    return ([np.array(m) for m in masks] or [np.ones(own.shape[1], dtype=bool)]), which


def _relative(
    names: list[str], audited: ScoredSet, clean: ScoredSet, s: VerdictSettings
) -> tuple[dict[str, DetectorEvidence], list[Stream]]:
    """The clean set's originals as the null: each detector's residual (with controls on both
    sides, the same number) or score (without), and the learned stream over all of them."""
    drop_a, ties = _uniforms(audited.ids, s)
    drop_c, _ = _uniforms(clean.ids, s)
    evidence, own, null, used = {}, [], [], []
    for name in names:
        if name not in audited.scores.columns or name not in clean.scores.columns:
            continue
        if audited.has_controls(name) and clean.has_controls(name) and name not in PLAIN_RELATIVE:
            width = _common_width(audited.control_matrix(name), clean.control_matrix(name))
            a_ctl, c_ctl = (stats.first_controls(x.control_matrix(name), width) for x in (audited, clean))
            a_val = conformal.original_residuals(audited.original(name), a_ctl, drop_a)
            c_val = conformal.original_residuals(clean.original(name), c_ctl, drop_c)
            what, controls = "the clean set's residuals", a_ctl
        else:
            a_val, c_val, what, controls = audited.original(name), clean.original(name), "the clean set's scores", None
        fitted = robust_scale(c_val[:, None])
        center, scale = float(fitted.center[0]), float(fitted.scale[0])
        shift = center if controls is None else 0.0  # a score is read against the clean median, a residual as it is
        left_out = (
            stats.left_out(audited.original(name), controls, conformal.MIN_CONTROLS)
            if controls is not None
            else stats.left_out(audited.original(name))
        )
        evidence[name] = DetectorEvidence(
            audited.original(name),
            controls,
            _scaled(a_val - shift, scale),
            conformal.conformal_pvalues(a_val, c_val, ties),
            int((~np.isnan(c_val)).sum()),
            scale,
            left_out,
            what,
            _scaled(c_val[~np.isnan(c_val)] - shift, scale),
        )
        own.append(_scaled(a_val - center, scale))
        null.append(_scaled(c_val - center, scale))
        used.append(name)
    if not used:
        return evidence, []
    null_x, own_x = np.stack(null, axis=-1), np.stack(own, axis=-1)
    fold = learned.folds(audited.ids, s.seed)
    tested = _Residuals(null_x, learned.folds(clean.ids, s.seed), own_x, fold, ties, (own_x, fold))
    return evidence, _streams("clean set", used, tested, "the clean set's originals", s.decision_screen)


def _common_width(*controls: np.ndarray) -> int:
    """How many controls every question is read with in the relative mode (both sides alike, so
    residuals have one null): the count that 95 % of the questions reach (at least
    :data:`~.conformal.MIN_CONTROLS`); a question with fewer is left out and counted."""
    counts = np.concatenate([(~np.isnan(c)).sum(axis=1) for c in controls])
    counts = counts[counts >= conformal.MIN_CONTROLS]
    return (
        max(conformal.MIN_CONTROLS, int(np.floor(np.quantile(counts, 0.05)))) if len(counts) else conformal.MIN_CONTROLS
    )


def _stream(name: str, detectors: list[str], r: _Residuals, what: str, screen: float | None) -> Stream:
    """One learned score over ``detectors`` with its null: with one detector, its residual itself
    (higher = member) against the whole pool; with more, the cross-fitted logistic score against
    the own fold's null (fitted on the other fold's null texts against its originals — ``train``,
    or the tested ones). A question missing any detector's residual is left out (counted)."""
    null_x, null_fold, own_x, own_fold, ties, train = r.null_x, r.null_fold, r.own_x, r.own_fold, r.ties, r.train
    complete = ~np.isnan(own_x).any(axis=1)
    p = np.full(len(own_x), np.nan)
    if len(detectors) == 1:
        score, weights, null_scores = own_x[:, 0], {detectors[0]: [1.0, 1.0]}, null_x[:, 0]
        p[complete] = conformal.conformal_pvalues(
            score[complete], null_x[:, 0], None if ties is None else ties[complete]
        )
        pool = int(len(null_x))
    else:
        fitted = learned.cross_fitted_scores(
            null_x, null_fold, own_x[complete], own_fold[complete], *(train or (None, None)), screen=screen
        )
        score = np.full(len(own_x), np.nan)
        score[complete] = fitted.tested
        p[complete], pool = fitted.pvalues(None if ties is None else ties[complete])
        weights, null_scores = learned.describe_weights(detectors, fitted.weights), fitted.null
    return Stream(
        name,
        detectors,
        score,
        p,
        pool,
        int(len(null_x)),
        weights,
        what,
        {"incomplete": int((~complete).sum())},
        null_scores,
    )


def _scaled(values: np.ndarray, scale: float) -> np.ndarray:
    """Residuals in units of the pooled scale (SPEC §8.10; ranks, hence p-values, unchanged)."""
    return values / scale if math.isfinite(scale) and scale > 0 else values


def _scale(controls: np.ndarray | None) -> float:
    """SPEC §8.2's pooled σ̂ of the controls (for reading residuals; the p-values are rank-based)."""
    fitted = stats.pooled_control_scale(controls) if controls is not None else None
    return float(fitted.scale[0]) if fitted is not None else math.nan
