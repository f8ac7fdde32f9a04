"""What identifies the sets a generation config makes: its settings, the algorithm's version, a
digest of the generation code and, for the LLM backend, each prompt template's content hash.
Sets are reused (by ``lara generate``'s resume and ``lara run``'s ledger) only when all of it
matches."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .config import GenerationConfig


def code_digest() -> str:
    """sha256 (16 hex digits) of the generation package's source: any change to how sets are made
    (an upgrade, a local edit) gives sets a new provenance, so none made before is reused as if the
    code were the same (the offline algorithm's version alone is bumped by hand)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        h = hashlib.sha256()
        for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


_CODE_DIGEST: str | None = None


def generator_identity(config: GenerationConfig) -> dict[str, Any]:
    """The provenance every set made with ``config`` carries — settings, algorithm version, code
    digest and, for the LLM backend, each prompt template's content hash — without contacting an
    endpoint: what decides whether existing sets can be reused."""
    from . import __version__

    if config.backend == "offline":
        from .offline import OfflineGenerator

        return OfflineGenerator(config, __version__).provenance()
    from .llm_backend import LLMGenerator
    from .prompts import load_templates

    return LLMGenerator(config, __version__, None, load_templates(config.openai.templates)).provenance()  # type: ignore[arg-type]
