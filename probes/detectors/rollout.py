"""Reference scores on the audited model's own rollouts (SPEC §10): where GRPO's loss acts.

GRPO trains the completion's tokens only, so the evidence of a trained-on question is in how the
audited model A reads its own answers against the checkpoint before RL, R. For a rollout y of A on
question x, the per-token shift is Δ_t = log p_A(y_t | x, y_<t) − log p_R(y_t | x, y_<t), both
teacher-forced over the very same token ids (the prompt as A's generation read it). Per rollout:

* ``shift_vote`` — the share of windows of ``window`` tokens (the last one shorter) whose mean Δ
  is positive (WBC's sign vote over sliding windows, arXiv 2601.02751);
* ``answer_shift`` — the mean Δ over the tokens of the answer the rollout states (the characters
  the verifier reads, :func:`probes.accuracy.verifier.answer_span`);
* ``gold_shift`` — log p_A(g | x, y_pre) − log p_R(g | x, y_pre): the known answer g after the
  rollout up to its stated answer, y_pre (a continuous counterpart of reward gain).

Each averaged over the question's rollouts — the ones reward gain and Min-kNN draw (the response
store serves them): forward passes only. Larger = member. A model against itself scores 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from lara_core.params import COUNT, Param

from ..accuracy.verifier import answer_span
from ..responders.base import Access, Generation
from ..responders.divergence import local_of
from .base import DetectorResult, check_reference, has_answer, register
from .likelihood import same_tokens
from .rl import _SamplingComparison

if TYPE_CHECKING:
    from ..responders.base import Responder


def window_vote(delta: np.ndarray, window: int) -> float:
    """The share of consecutive windows of ``window`` values of ``delta`` (``[T]``; the last window
    shorter) whose mean is positive; NaN for an empty ``delta``."""
    if not len(delta):
        return float("nan")
    means = [float(np.mean(delta[i : i + window])) for i in range(0, len(delta), window)]
    return float(np.mean([m > 0 for m in means]))


def span_tokens(tokenizer: Any, token_ids: Sequence[int], span: tuple[int, int]) -> range:
    """The tokens of ``token_ids`` whose decoded characters overlap ``span`` (``[start, end)`` of
    the decoded text), found by bisection on the decoded prefixes' lengths."""

    def first_prefix(longer_than: int) -> int:  # the fewest tokens whose decoded text exceeds ``longer_than`` chars
        lo, hi = 1, len(token_ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(tokenizer.decode(list(token_ids[:mid]), skip_special_tokens=True)) > longer_than:
                hi = mid
            else:
                lo = mid + 1
        return lo

    if not len(token_ids):
        return range(0)
    return range(first_prefix(span[0]) - 1, first_prefix(span[1] - 1))


class _RolloutShift(_SamplingComparison):
    """A statistic of the per-token shift Δ along the audited model's sampled answers."""

    needs = frozenset({Access.SAMPLING, Access.TOKEN_IDS, Access.TEXT_LOGPROBS})
    reference_needs = frozenset({Access.TEXT_LOGPROBS})
    reference_difference = True
    family = "reference on rollouts"
    unread = "have no token to read"  # why an answer is left out of its question's mean (the note)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        reference = getattr(self, "reference_", None)
        check_reference(self, responder, reference)
        samples = responder.generate(questions, self.sampling_params())
        values = self._per_rollout(questions, samples, responder, reference)  # [N, n], NaN where not read
        read = ~np.isnan(values)
        raw = np.array([float(row[ok].mean()) if ok.any() else np.nan for row, ok in zip(values, read)])
        notes = []
        if (~read).any():
            notes.append(
                f"{self.name}: {int((~read).sum())} of {values.size} answers {self.unread} "
                f"(left out of their question's mean; {int(np.isnan(raw).sum())} question(s) with none)"
            )
        return self._result(raw, notes=notes, responses=samples)

    def _per_rollout(
        self, questions: Sequence[str], samples: list[list[Generation]], responder: Responder, reference: Responder
    ) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


def rollout_shifts(
    questions: Sequence[str], samples: list[list[Generation]], responder: Responder, reference: Responder
) -> list[list[np.ndarray]]:
    """``[T']`` Δ_t of every rollout (per question, per answer): both models teacher-forced over the
    prompt as the audited model's generation read it (formatted, fitted to its context) and the
    answer's own ids; T' < T where an answer was cut to fit the context. Scores go through each
    responder's store."""
    local = local_of(responder)
    prompts = [local._fit_prompt(local.encode_prompt(q))[0] for q in questions]
    pairs = [(prompts[i], list(g.token_ids)) for i, row in enumerate(samples) for g in row]
    if same_model(responder, reference):  # every shift is 0
        flat = [np.zeros(len(ids)) for _, ids in pairs]
    else:
        ours, theirs = responder.score_ids(pairs), reference.score_ids(pairs)
        flat = [a.logprobs[: len(b.logprobs)] - b.logprobs[: len(a.logprobs)] for a, b in zip(ours, theirs)]
    it = iter(flat)
    return [[next(it) for _ in row] for row in samples]


def same_model(responder: Responder, reference: Responder) -> bool:
    """Whether the audited model is compared with itself (the reference's own run): no forward pass."""
    return local_of(responder).model is local_of(reference).model


@register
class ShiftVote(_RolloutShift):
    name = "shift_vote"
    raw_column = "shift_vote", "higher = member"
    statistic = "share of windows of the audited model's sampled answers whose mean log-prob shift (audited − reference) is positive"  # docs/detectors.md's table
    summary = "shift vote: share of token windows of the audited model's own answers it reads more likely than the reference does (WBC)"

    window: int = Param(8, COUNT)

    def _per_rollout(
        self, questions: Sequence[str], samples: list[list[Generation]], responder: Responder, reference: Responder
    ) -> np.ndarray:
        shifts = rollout_shifts(questions, samples, responder, reference)
        return np.array([[window_vote(d, self.window) for d in row] for row in shifts])


@register
class AnswerShift(_RolloutShift):
    name = "answer_shift"
    raw_column = "answer_shift", "higher = member"
    statistic = "mean log-prob shift (audited − reference) over the tokens of the answer each sampled answer states"  # docs/detectors.md's table
    summary = "answer shift: mean log-prob shift (audited − reference) over the stated answer's tokens of the audited model's own answers"
    unread = "state no answer the verifier can locate"

    def _per_rollout(
        self, questions: Sequence[str], samples: list[list[Generation]], responder: Responder, reference: Responder
    ) -> np.ndarray:
        shifts = rollout_shifts(questions, samples, responder, reference)
        tokenizer = local_of(responder).tokenizer
        out = np.full((len(samples), self.n), np.nan)
        for i, row in enumerate(samples):
            for j, (answer, delta) in enumerate(zip(row, shifts[i])):
                span = answer_span(answer.text)
                if span is None:
                    continue
                tokens = span_tokens(tokenizer, answer.token_ids, span)
                inside = delta[tokens.start : tokens.stop]  # an answer cut to fit the context keeps what was read
                out[i, j] = float(inside.mean()) if len(inside) else np.nan
        return out


@register
class GoldShift(_RolloutShift):
    name = "gold_shift"
    raw_column = "gold_shift", "higher = member"
    statistic = "log-prob of the known answer after each sampled answer's reasoning up to its stated answer, audited − reference"  # docs/detectors.md's table
    summary = "gold shift: log p(known answer | question, own reasoning) under the audited model minus the reference (needs answers)"
    requires_answers = True
    unread = "state no answer to put the known one in place of, or belong to a question without an answer"

    def _per_rollout(
        self, questions: Sequence[str], samples: list[list[Generation]], responder: Responder, reference: Responder
    ) -> np.ndarray:
        answers = getattr(self, "answers_", None) or [None] * len(questions)
        slots, contexts, golds = [], [], []
        for i, (question, row) in enumerate(zip(questions, samples)):
            prompt = responder.format(question)
            for j, answer in enumerate(row):
                span = answer_span(answer.text)
                if span is not None and has_answer(answers[i]):
                    slots.append((i, j))
                    contexts.append(prompt + answer.text[: span[0]])
                    golds.append(str(answers[i]).strip())
        out = np.full((len(samples), self.n), np.nan)
        if not slots:
            return out
        if same_model(responder, reference):
            for i, j in slots:
                out[i, j] = 0.0
            return out
        for (i, j), a, b in zip(slots, responder.score(contexts, golds), reference.score(contexts, golds)):
            pair = same_tokens(a, b)
            out[i, j] = float(pair[0].sum() - pair[1].sum()) if pair is not None else np.nan
        return out
