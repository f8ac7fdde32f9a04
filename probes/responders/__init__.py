"""Model access for the output-level detectors: a local Hugging Face model or an
OpenAI-compatible endpoint, behind one interface (:class:`Responder`)."""

from __future__ import annotations

from .base import Access, CallCounter, Generation, GenerationParams, Responder, Rollout, TextScore, sample_seed

__all__ = [
    "Access",
    "CallCounter",
    "Generation",
    "GenerationParams",
    "Responder",
    "Rollout",
    "TextScore",
    "sample_seed",
]
