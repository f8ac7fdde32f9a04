"""The detectors that compare a model with its checkpoint before RL, after DIBA (Liu et al. 2025,
"Auditing Data Membership in RLVR", arXiv 2511.14045; SPEC §5):

* ``policy_drift`` — how far the audited policy moved from the reference on the question: the
  full-vocabulary KL(π_audited ‖ π_reference) at every position of the audited model's own sampled
  answers (its end-of-sequence position included), averaged over each answer, then over the
  answers.
* ``reward_gain`` — how much more often the audited model is now right: the mean verifier reward
  of its sampled answers minus the reference's (:mod:`probes.accuracy.verifier`).

Both sample with Min-kNN's parameters by default (n = 32, T = 0.7, top-p 0.95, 1,024 tokens, seed
0; the sampling temperature of a run replaces T), so the audited model's samples come from the
response store when Min-kNN drew them. RL improves a model on every question of its kind, not only
its training questions: a reward gain or a drift on a question is evidence of membership only
relative to similar questions — the calibration of SPEC §8 (controls for policy drift; a clean set
for reward gain, whose generated controls have no answers).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from lara_core.params import COUNT, POSITIVE, SEED, SHARE, Param

from ..accuracy.verifier import gold_readable, judge
from ..errors import ConfigError
from ..responders.base import Access, Rollout
from .base import Detector, DetectorResult, check_reference, has_answer, register

if TYPE_CHECKING:
    from ..responders.base import Responder


class _SamplingComparison(Detector):
    """Sampling parameters shared by the two detectors (Min-kNN's defaults)."""

    requires_reference = True
    samples_at_temperature = True

    n: int = Param(32, COUNT)
    temperature: float = Param(0.7, POSITIVE)
    top_p: float = Param(0.95, SHARE)
    max_new_tokens: int = Param(1024, COUNT)
    seed: int = Param(0, SEED)


@register
class PolicyDrift(_SamplingComparison):
    name = "policy_drift"
    raw_column = "policy_kl", "higher = member"
    statistic = "mean over the audited model's sampled answers of the per-token full-vocabulary KL(π_audited ‖ π_reference) along the answer"  # docs/detectors.md's table
    summary = "policy drift: mean full-vocabulary KL(audited ‖ reference) along the audited model's sampled answers"
    needs = frozenset({Access.SAMPLING, Access.TOKEN_IDS, Access.FULL_DISTRIBUTION})
    reference_needs = frozenset({Access.FULL_DISTRIBUTION})

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        reference = getattr(self, "reference_", None)
        check_reference(self, responder, reference)
        samples = responder.generate(questions, self.sampling_params())
        rollouts = [Rollout.of(q, answer) for q, row in zip(questions, samples) for answer in row]
        kl = responder.divergence(rollouts, reference)
        per_answer = np.array([float(v.mean()) if len(v) else np.nan for v in kl]).reshape(len(questions), self.n)
        raw = np.array([float(row[~np.isnan(row)].mean()) if (~np.isnan(row)).any() else np.nan for row in per_answer])
        empty = int(np.isnan(per_answer).sum())
        notes = (
            [f"{self.name}: {empty} answer(s) have no position to compare (left out of their question's mean)"]
            if empty
            else []
        )
        return self._result(raw, notes=notes, responses=samples)


@register
class RewardGain(_SamplingComparison):
    name = "reward_gain"
    raw_column = "reward_gain", "higher = member"
    statistic = "mean verifier reward of sampled answers, audited minus reference (the raw file also holds each model's mean reward)"  # docs/detectors.md's table
    summary = "reward gain: mean verifier reward of sampled answers, audited minus reference (needs answers)"
    needs = frozenset({Access.SAMPLING})
    reference_needs = frozenset({Access.SAMPLING})
    requires_answers = True
    reference_difference = True

    @classmethod
    def usable_answer(cls, answer: Any) -> bool:
        """A given answer the verifier can read: one it cannot would mark every response wrong."""
        return has_answer(answer) and gold_readable(answer)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        reference = getattr(self, "reference_", None)
        check_reference(self, responder, reference)
        answers = getattr(self, "answers_", None)
        if answers is None or len(answers) != len(questions):
            raise ConfigError(
                "reward_gain needs each question's known answer (the 'answer' field of the questions file)"
            )
        # only questions with an answer the verifier reads are sampled: sample j of a prompt does
        # not depend on the other prompts asked with it, so a subset draws the same samples
        usable = [i for i, answer in enumerate(answers) if self.usable_answer(answer)]
        asked = [questions[i] for i in usable]
        params = self.sampling_params()
        drawn = (responder.generate(asked, params), reference.generate(asked, params)) if asked else ([], [])
        ours, theirs = ([[] for _ in questions] for _ in range(2))
        for k, i in enumerate(usable):
            ours[i], theirs[i] = drawn[0][k], drawn[1][k]
        rules: Counter = Counter()
        gain, audited, base = (np.full(len(questions), np.nan) for _ in range(3))
        for i in usable:
            judged = [[judge(g.text, answers[i]) for g in row] for row in (ours[i], theirs[i])]
            rules.update(j.rule for row in judged for j in row)
            audited[i], base[i] = (float(np.mean([j.reward for j in row])) for row in judged)
            gain[i] = audited[i] - base[i]
        missing = sum(not has_answer(a) for a in answers)
        unreadable = len(questions) - len(usable) - missing
        notes = [f"{self.name}: answers judged by " + ", ".join(f"{rule} {n}" for rule, n in sorted(rules.items()))]
        notes += [f"{self.name}: {missing} question(s) without an answer (NaN)"] if missing else []
        if unreadable:
            notes.append(
                f"{self.name}: {unreadable} question(s) whose answer the verifier cannot read (NaN; "
                "give it as a number, text, or LaTeX math-verify parses)"
            )
        return self._result(
            gain,
            notes=notes,
            responses=[a + b for a, b in zip(ours, theirs)],
            reward_audited=audited,
            reward_reference=base,
        )
