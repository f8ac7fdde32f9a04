"""Prompt templates of the LLM backend: loaded from files, identified by name and content hash.

Templates are plain text with ``$name`` placeholders (:class:`string.Template`), one file per
step in ``configs/prompts/`` (your own files can be named in the config). The rendered text is
sent as a single user message. Every record stores each template's id (the file name) and the
SHA-256 of its text, so a set can always be traced to the exact wording that produced it.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from pathlib import Path

from .config import STEP_TEMPLATES, Templates
from .errors import ConfigError

PLACEHOLDERS = {
    "similars": {"question", "count"},
    "key_information": {"question"},
    "blanked": {"question", "information", "k"},
    "paraphrases": {"question", "count", "k"},
    "retry_feedback": {"problem"},
    "solve": {"question"},
}


@dataclass(frozen=True)
class PromptTemplate:
    """One step's template."""

    step: str
    id: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def render(self, **values: object) -> str:
        return string.Template(self.text).substitute({k: str(v) for k, v in values.items()})


def load_templates(config: Templates) -> dict[str, PromptTemplate]:
    """Every step's template, checked for unknown or missing placeholders."""
    out: dict[str, PromptTemplate] = {}
    for step in STEP_TEMPLATES:
        path: Path = config.path(step)
        if not path.is_file():
            raise ConfigError(f"prompt template for step '{step}' not found: {path} (set openai.templates.{step})")
        text = path.read_text(encoding="utf-8")
        used = {
            m.group("named") or m.group("braced")
            for m in string.Template.pattern.finditer(text)
            if m.group("named") or m.group("braced")
        }
        unknown, missing = used - PLACEHOLDERS[step], PLACEHOLDERS[step] - used - {"k", "count"}
        if unknown:
            raise ConfigError(
                f"{path}: unknown placeholder(s) {', '.join('$' + u for u in sorted(unknown))}; step '{step}' offers {', '.join('$' + p for p in sorted(PLACEHOLDERS[step]))}"
            )
        if missing:
            raise ConfigError(f"{path}: the template never uses {', '.join('$' + m for m in sorted(missing))}")
        out[step] = PromptTemplate(step, path.name, text)
    return out
