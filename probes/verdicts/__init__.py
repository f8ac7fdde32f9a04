"""The calibrated, label-free audit (SPEC §8): matched controls from the perturbation sets, the
within-question statistics, verdicts in reference / relative / absolute mode, and the blind
text-only baseline of labelled reports.

>>> from probes.verdicts import ScoredSet, VerdictSettings, compute_verdict
>>> verdict = compute_verdict(ScoredSet(rl_scores, rl_controls), reference=ScoredSet(sft_scores, sft_controls))
>>> verdict["mode"], verdict["reject"], verdict["combined"]["p_value"]
"""

from __future__ import annotations

from ..scorefiles import ControlTable, ScoredSet
from .blind import blind_baseline
from .controls import control_texts
from .modes import VerdictSettings, compute_verdict, relative_test, within_test

__all__ = [
    "ControlTable",
    "ScoredSet",
    "VerdictSettings",
    "blind_baseline",
    "compute_verdict",
    "control_texts",
    "relative_test",
    "within_test",
]
