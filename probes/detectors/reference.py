"""Ref: the reference-model likelihood ratio (the classic reference attack; SPEC §5).

raw = mean token log-prob of the target under the audited model − the same under a reference
checkpoint (the pre-RL base), over the same tokens read after the same prompt; higher = member.
The target is the audited model's greedy response (default) or the question. Both models must
share the tokenizer (checked before any work, :func:`probes.detectors.base.check_reference`).
RL sharpens a model on every question of its kind, so the difference is weaker than the level it
is taken from; SPEC §8's calibration against matched controls is what isolates the trained-on
questions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .base import DetectorResult, check_reference, register
from .likelihood import _RescoringDetector, greedy_params, same_tokens

if TYPE_CHECKING:
    from ..responders.base import Responder


@register
class Ref(_RescoringDetector):
    name = "ref"
    raw_column = "ref_ll_difference", "higher = member"
    statistic = "mean token log-prob of the greedy response under the audited model − under a reference model (same tokenizer)"  # docs/detectors.md's table
    summary = "Ref: mean token log-prob of the greedy response (or the question) under the audited model minus under a reference (pre-RL) model"
    requires_reference = True
    reference_difference = True

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        reference = getattr(self, "reference_", None)
        check_reference(self, responder, reference)
        responses: list[Any] = []
        if self.target == "response":
            responses = [g[0] for g in responder.generate(questions, greedy_params(self.max_new_tokens))]
            contexts, texts = [responder.format(q) for q in questions], [g.text for g in responses]
        elif self.target == "question":
            contexts, texts = [responder.question_context()] * len(questions), list(questions)
        else:
            raise ValueError(f"target {self.target!r}")
        audited, base = responder.score(contexts, texts), reference.score(contexts, texts)
        raw = np.full(len(questions), np.nan)
        for i, (a, b) in enumerate(zip(audited, base)):
            pair = same_tokens(a, b)
            if pair is not None:
                raw[i] = float(pair[0].mean() - pair[1].mean())
        read = [([responses[i]] if responses else []) + [audited[i], base[i]] for i in range(len(questions))]
        return self._result(raw, responses=read)
