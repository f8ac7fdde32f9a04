"""Generation-based detectors: CDD, Min-kNN, Self-Critique and the entropy baselines
(Entropy-Temp, Entropy-Noise) of the Self-Critique paper."""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from lara_core.params import COUNT, POSITIVE, SEED, SHARE, Interval, Options, Param, Text

from ..responders.base import Access
from . import stats
from .base import Detector, DetectorResult, builtin_text, register, template_text
from .likelihood import GREEDY_TOKENS, greedy_params

UNIT_SHARE = Interval(integer=False, low=0, high=1, closed="left")  # [0, 1)

if TYPE_CHECKING:
    from ..responders.base import Responder


@register
class CDD(Detector):
    family = "sampling"
    name = "cdd"
    raw_column = "cdd_peak", "higher = member"
    statistic = "share of 50 samples (T = 0.8) within α·ℓ_max token edits of the greedy output (decision: > ξ)"  # docs/detectors.md's table
    summary = "CDD: share of samples within α·ℓ_max token edits of the greedy output (N = 50, T = 0.8)"
    samples_at_temperature = True
    needs = frozenset({Access.SAMPLING, Access.TOKEN_IDS})
    capped_by_design = True  # it compares the first max_tokens tokens only

    n: int = Param(50, COUNT)
    temperature: float = Param(0.8, POSITIVE)
    alpha: float = Param(0.05, UNIT_SHARE)
    xi: float = Param(0.01, UNIT_SHARE)
    max_tokens: int = Param(100, COUNT)
    seed: int = Param(0, SEED)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        greedy = responder.generate(questions, greedy_params(self.max_tokens))
        samples = responder.generate(questions, self.sampling_params())
        peaks = np.array(
            [
                stats.cdd_peak(g[0].token_ids, [s.token_ids for s in row], self.alpha, self.max_tokens)
                for g, row in zip(greedy, samples)
            ]
        )
        return self._result(peaks, contaminated=peaks > self.xi, responses=[g + row for g, row in zip(greedy, samples)])


@register
class MinKNN(Detector):
    family = "sampling"
    name = "min_knn"
    raw_column = "min_knn_distance", "lower = member"
    statistic = "mean of the 10 smallest nearest-neighbour normalised edit distances among 32 samples (T = 0.7, top-p 0.95)"  # docs/detectors.md's table
    summary = "Min-kNN distance: mean of the k smallest nearest-neighbour edit distances among 32 samples"
    samples_at_temperature = True
    needs = frozenset({Access.SAMPLING, Access.TOKEN_IDS})

    n: int = Param(32, Interval(integer=True, low=2))
    k: int = Param(10, COUNT)
    temperature: float = Param(0.7, POSITIVE)
    top_p: float = Param(0.95, SHARE)
    max_new_tokens: int = Param(1024, COUNT)
    unit: Literal["tokens", "characters"] = Param("tokens", Options(("tokens", "characters")))
    seed: int = Param(0, SEED)

    def check_params(self) -> None:
        self._require(self.k <= self.n, "k", f"it must be between 1 and n = {self.n}")

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        samples = responder.generate(questions, self.sampling_params())
        raw = [
            stats.min_knn_statistic([s.token_ids if self.unit == "tokens" else s.text for s in row], self.k)
            for row in samples
        ]
        return self._result(raw, responses=samples)


def _entropy_notes(gens: Sequence[Any], name: str) -> list[str]:
    kinds = {g.entropy_kind for g in gens}
    return [f"{name}: entropies are {', '.join(sorted(kinds))}"] if kinds - {"exact"} else []


@register
class SelfCritique(Detector):
    family = "sampling"
    name = "self_critique"
    raw_column = "self_critique_similarity", "higher = member"
    statistic = 'penalized cosine of the entropy sequences of the answer and of a "solve it differently" answer'  # docs/detectors.md's table
    summary = (
        "Self-Critique: penalized cosine of the entropy sequences of the answer and of a 'solve it differently' answer"
    )
    needs = frozenset({Access.SAMPLING, Access.ENTROPY_EXACT})

    template: str = Param("self_critique.v1.txt", Text())
    max_new_tokens: int = Param(GREEDY_TOKENS, COUNT)

    def check_params(self) -> None:
        text = template_text(self.template)  # a missing template is refused here, naming it
        self._require(
            "$question" in text and "$response" in text, "template", "it must contain $question and $response"
        )

    def critique_prompt(self, question: str, response: str) -> str:
        """The second prompt: the question, the first answer quoted, and the instruction."""
        return string.Template(template_text(self.template)).substitute(question=question, response=response)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        params = greedy_params(self.max_new_tokens)
        first = [g[0] for g in responder.generate(questions, params)]
        second = [
            g[0]
            for g in responder.generate([self.critique_prompt(q, r.text) for q, r in zip(questions, first)], params)
        ]
        raw = [stats.penalized_cosine(a.entropies, b.entropies) for a, b in zip(first, second)]
        return self._result(
            raw, notes=_entropy_notes(first + second, self.name), responses=[[a, b] for a, b in zip(first, second)]
        )


@register
class EntropyTemp(Detector):
    family = "sampling"
    name = "entropy_temp"
    raw_column = "entropy_temp_similarity", "higher = member"
    statistic = "the same similarity as Self-Critique, against sampled answers"  # docs/detectors.md's table
    summary = "Entropy-Temp: penalized cosine of the greedy answer's entropies and sampled answers' (mean over samples)"
    samples_at_temperature = True
    needs = frozenset({Access.SAMPLING, Access.ENTROPY_EXACT})

    n: int = Param(5, COUNT)
    temperature: float = Param(1.0, POSITIVE)
    max_new_tokens: int = Param(GREEDY_TOKENS, COUNT)
    seed: int = Param(0, SEED)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        greedy = [g[0] for g in responder.generate(questions, greedy_params(self.max_new_tokens))]
        samples = responder.generate(questions, self.sampling_params())
        raw = [
            float(np.mean([stats.penalized_cosine(g.entropies, s.entropies) for s in row]))
            for g, row in zip(greedy, samples)
        ]
        gens = greedy + [s for row in samples for s in row]
        return self._result(
            raw, notes=_entropy_notes(gens, self.name), responses=[[g, *row] for g, row in zip(greedy, samples)]
        )


@register
class EntropyNoise(Detector):
    family = "sampling"
    name = "entropy_noise"
    raw_column = "entropy_noise_similarity", "higher = member"
    statistic = "the same similarity as Self-Critique, against the answer to an unrelated-prefix prompt"  # docs/detectors.md's table
    summary = "Entropy-Noise: penalized cosine of the greedy answer's entropies with and without an unrelated prefix"
    needs = frozenset({Access.SAMPLING, Access.ENTROPY_EXACT})

    prefix: str | None = Param(None, Text(optional=True))
    max_new_tokens: int = Param(GREEDY_TOKENS, COUNT)

    def score(self, questions: Sequence[str], responder: Responder) -> DetectorResult:
        prefix = self.prefix if self.prefix is not None else builtin_text("noise_prefix.v1.txt")
        params = greedy_params(self.max_new_tokens)
        plain = [g[0] for g in responder.generate(questions, params)]
        noisy = [g[0] for g in responder.generate([prefix + q for q in questions], params)]
        raw = [stats.penalized_cosine(a.entropies, b.entropies) for a, b in zip(plain, noisy)]
        return self._result(
            raw, notes=_entropy_notes(plain + noisy, self.name), responses=[[a, b] for a, b in zip(plain, noisy)]
        )
