"""Partial-prompt completion (Wu et al. 2025, "Reasoning or Memorization?"; SPEC §5).

The question is cut after a fraction ρ of its tokens (moved back to a word boundary), the model
continues the first part greedily as plain text (no prompt template), for as many tokens as the
true remainder has, and the continuation is compared with the remainder: ROUGE-L F1 over tokens
(the score, higher = member) and exact match (whitespace-normalised text).

It finds *text* memorisation — pre-training or SFT on the benchmark's questions. RL trains on the
answers a model samples to a question, never on reproducing the question, so a model that saw a
question only in RL has no reason to complete it: do not expect it to find RL-only contamination.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from lara_core.params import Interval, Param

from ..responders.base import Access, GenerationParams
from . import stats
from .base import Detector, DetectorResult, register

if TYPE_CHECKING:
    from ..responders.base import Responder


@register
class PartialCompletion(Detector):
    name = "partial_completion"
    raw_column = "partial_rouge_l", "higher = member"
    statistic = "ROUGE-L F1 (tokens) of the greedy plain-text continuation of the question's first 60 % against the rest; exact match in the raw file"  # docs/detectors.md's table
    summary = "partial-prompt completion: ROUGE-L F1 of the greedy plain-text continuation of the question's first 60 % vs the rest"
    needs = frozenset({Access.SAMPLING, Access.TOKEN_IDS})
    capped_by_design = True  # the budget is the true remainder's length

    ratio: float = Param(
        0.6, Interval(integer=False, low=0, high=1, closed="neither")
    )  # the share of the question kept

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        rouge = np.full(len(questions), np.nan)
        exact = np.full(len(questions), np.nan)
        cuts: dict[
            int, list[tuple[int, str, str, list[int]]]
        ] = {}  # remainder length -> (index, prefix, remainder, units)
        for i, question in enumerate(questions):
            spans = responder.token_spans(question)
            p = stats.cut_point(question, spans, self.ratio)
            if p is None:
                continue
            units = [unit for unit, start, _ in spans if start >= p]
            cuts.setdefault(len(units), []).append((i, question[:p], question[p:], units))
        responses: list[list[Any]] = [[] for _ in questions]
        for budget, rows in sorted(cuts.items()):
            gens = responder.complete([prefix for _, prefix, _, _ in rows], GenerationParams(max_new_tokens=budget))
            for (i, _, remainder, units), (gen,) in zip(rows, gens):
                rouge[i] = stats.rouge_l_f1(gen.token_ids, units)
                exact[i] = float(" ".join(gen.text.split()) == " ".join(remainder.split()))
                responses[i].append(gen)
        skipped = len(questions) - sum(len(rows) for rows in cuts.values())
        notes = [f"{self.name}: {skipped} question(s) too short to cut at a word boundary (NaN)"] if skipped else []
        return self._result(rouge, exact_match=exact, notes=notes, responses=responses)
