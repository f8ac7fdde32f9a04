"""What identifies the sets a generation config makes: its settings, the algorithm's version, a
digest of the generation code and, for the LLM backend, each prompt template's content hash.
Sets are reused (by ``lara generate``'s resume and ``lara run``'s ledger) only when all of it
matches. The backend is chosen in one place, :func:`build_generator`, for the identity and for
the run (:func:`generation.pipeline.make_generator`)."""

from __future__ import annotations

from typing import Any, Callable

from lara_core.version import __version__

from .config import GenerationConfig
from .llm_backend import LLMGenerator
from .offline import OfflineGenerator
from .prompts import load_templates


def build_generator(config: GenerationConfig, client: Callable[[], Any] | None = None) -> Any:
    """The configured backend: the offline generator, or the LLM one with its templates and the
    client ``client()`` makes once they are read (None: one that describes itself without
    contacting an endpoint)."""
    if config.backend == "offline":
        return OfflineGenerator(config, __version__)
    templates = load_templates(config.openai.templates)
    return LLMGenerator(config, __version__, client() if client is not None else None, templates)


def generator_identity(config: GenerationConfig) -> dict[str, Any]:
    """The provenance every set made with ``config`` carries — settings, algorithm version, code
    digest and, for the LLM backend, each prompt template's content hash — without contacting an
    endpoint: what decides whether existing sets can be reused."""
    return build_generator(config).provenance()
