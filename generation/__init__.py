"""Perturbation sets for LaRA: similar questions, ``[BLANK]``ed variants and paraphrases.

Two backends build them (SPEC §1): ``offline`` (default; deterministic rules, no model) and
``openai`` (any OpenAI-compatible endpoint, cached and resumable). Light to import: the
``openai`` client loads only when the LLM backend runs.

>>> from generation import GenerationConfig, read_questions, run_generation
>>> run_generation(read_questions("questions.jsonl"), "sets.jsonl", GenerationConfig(seed=0))
"""

from __future__ import annotations

from lara_core.version import __version__ as __version__  # re-exported

from .config import GenerationConfig, OfflineConfig, OpenAIConfig
from .errors import ConfigError, EndpointError, GenerationError, InputError, OutputMismatchError
from .pipeline import JobSummary, run_generation
from .records import BLANK, Failure, PerturbationSet, Question, read_questions, unexplained_gaps

__all__ = [
    "BLANK",
    "ConfigError",
    "EndpointError",
    "Failure",
    "GenerationConfig",
    "GenerationError",
    "InputError",
    "JobSummary",
    "OfflineConfig",
    "OpenAIConfig",
    "OutputMismatchError",
    "PerturbationSet",
    "Question",
    "read_questions",
    "run_generation",
    "unexplained_gaps",
]
