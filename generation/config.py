"""Settings of a generation job, as validated dataclasses loaded from YAML.

Example (``configs/generation.openrouter.yaml`` reproduces the LaRA paper's setup)::

    backend: openai
    seed: 0
    similars: 5          # K
    paraphrases: 5       # M
    blanks: 1            # k
    openai:
      base_url: https://openrouter.ai/api/v1
      model: openai/gpt-4o-mini
      api_key_env: OPENROUTER_API_KEY
      concurrency: 16

Unknown keys are refused with the valid ones and a close match; values are checked for type and
range, and the message names the dotted key. The CLI's flags override the file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from lara_core.configio import from_mapping, load_yaml

from .errors import ConfigError

Backend = Literal["offline", "openai", "local"]
STEP_TEMPLATES = ("similars", "key_information", "blanked", "paraphrases", "retry_feedback", "solve")


def default_prompts_dir() -> Path:
    """``generation/prompt_templates`` in an installed wheel, else the checkout's ``configs/prompts``."""
    packaged = Path(__file__).resolve().parent / "prompt_templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[1] / "configs" / "prompts"


def default_cache_dir() -> Path:
    """Where LLM responses are cached: ``$LARA_HOME/llm-cache`` or ``~/.cache/lara-probes/llm-cache``."""
    import os

    home = os.environ.get("LARA_HOME")
    return (Path(home) if home else Path.home() / ".cache" / "lara-probes") / "llm-cache"


@dataclass(frozen=True)
class Temperatures:
    """Sampling temperature of each LLM step."""

    similars: float = 0.7
    key_information: float = 0.0
    blanked: float = 0.0
    paraphrases: float = 0.7

    def __post_init__(self) -> None:
        for name in ("similars", "key_information", "blanked", "paraphrases"):
            if not 0.0 <= getattr(self, name) <= 2.0:
                raise ConfigError(f"'openai.temperature.{name}' must be between 0 and 2, got {getattr(self, name)}")


@dataclass(frozen=True)
class Templates:
    """Prompt template file of each step; relative names are looked up in :func:`default_prompts_dir`."""

    similars: str = "similar_questions.v1.txt"
    key_information: str = "key_information.v1.txt"
    blanked: str = "blank_information.v1.txt"
    paraphrases: str = "paraphrases.v1.txt"
    retry_feedback: str = "retry_feedback.v1.txt"
    solve: str = "solve.v1.txt"

    def path(self, step: str) -> Path:
        name = Path(getattr(self, step))
        return name if name.is_absolute() or name.parent != Path(".") else default_prompts_dir() / name


@dataclass(frozen=True)
class OpenAIConfig:
    """The LLM backend: any OpenAI-compatible chat-completions endpoint.

    Attributes:
        base_url: endpoint root (OpenAI, OpenRouter, a vLLM or Ollama server…).
        model: model name as the endpoint knows it.
        api_key_env: name of the environment variable holding the key (the key itself never
            goes in a config); None for servers that need no key.
        max_tokens: completion token limit per request (None: the server's default).
        timeout_s: per-request timeout.
        max_attempts: tries per step when the answer fails validation (each retry tells the
            model what was wrong).
        max_http_attempts: tries per request on HTTP 429/5xx, timeouts and connection errors.
        backoff_s, backoff_max_s: exponential backoff base and cap (a server's Retry-After is
            honoured up to the cap).
        concurrency: requests in flight at once (and questions worked on at once).
        cache_dir: response cache directory (None: :func:`default_cache_dir`).
        structured: ask for each step's answer under its JSON schema (``response_format:
            json_schema``, :mod:`generation.structured`); off for a server that refuses it.
        answer_samples: k, the generator model's solutions of each similar and control, whose
            majority is its answer (0: no answers).
        answer_temperature: their sampling temperature.
        answer_agreement: the share of the k answers the majority needs; below it, no answer.
    """

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: Temperatures = field(default_factory=Temperatures)
    templates: Templates = field(default_factory=Templates)
    max_tokens: int | None = 2048
    timeout_s: float = 60.0
    max_attempts: int = 3
    max_http_attempts: int = 6
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    concurrency: int = 8
    cache_dir: str | None = None
    structured: bool = True
    answer_samples: int = 5
    answer_temperature: float = 0.7
    answer_agreement: float = 0.6

    def __post_init__(self) -> None:
        _positive(self, "openai", "timeout_s", "max_attempts", "max_http_attempts", "concurrency")
        if self.answer_samples < 0:
            raise ConfigError(f"'openai.answer_samples' must be >= 0, got {self.answer_samples}")
        if not 0.0 < self.answer_agreement <= 1.0:
            raise ConfigError(f"'openai.answer_agreement' must be in (0, 1], got {self.answer_agreement}")
        if not 0.0 <= self.answer_temperature <= 2.0:
            raise ConfigError(f"'openai.answer_temperature' must be between 0 and 2, got {self.answer_temperature}")
        if self.max_tokens is not None:
            _positive(self, "openai", "max_tokens")
        if self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ConfigError("'openai.backoff_s' and 'openai.backoff_max_s' must not be negative")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"'openai.base_url' must start with http:// or https://, got {self.base_url!r}")

    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else default_cache_dir()


@dataclass(frozen=True)
class LocalConfig:
    """The in-process LLM backend (``backend: local``): a model on this machine answers the LLM
    generator's requests, each decoded under its JSON schema (:mod:`generation.local_client`); the
    prompts, temperatures, retries, answers and cache are the ``openai`` section's.

    Attributes:
        model: a checkpoint directory or a ``.gguf`` file (never the audited model or its
            reference: ``lara run`` refuses it).
        device: ``cpu``, ``cuda`` or ``mps``.
        dtype: ``float32``, ``float16`` or ``bfloat16``.
        max_new_tokens: the completion budget where a request sets none.
    """

    model: str = ""
    device: str = "cpu"
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    max_new_tokens: int = 1024

    def __post_init__(self) -> None:
        _positive(self, "local", "max_new_tokens")
        if self.dtype not in ("float32", "float16", "bfloat16"):
            raise ConfigError(f"'local.dtype': {self.dtype!r}; choose float32, float16 or bfloat16")


@dataclass(frozen=True)
class OfflineConfig:
    """The built-in offline backend.

    Attributes:
        blank_slot: which quantity of the original is blanked, by order of appearance
            (0 = first, -1 = last); the same slot is blanked in every similar question. With
            ``blanks: k > 1`` the k quantities from this one on are blanked.
        max_tries: draws per set before giving up on distinct similars or paraphrases.
        relations: what a similar question keeps of the original's numbers: ``arithmetic``
            (default: order, divisibility, signs of sums and products against a third quantity,
            number of digits — :mod:`generation.relations`) or ``order`` (order only; the
            algorithm before toolkit 0.2, whose similars a model tells from real questions).
    """

    blank_slot: int = 0
    max_tries: int = 50
    relations: Literal["arithmetic", "order"] = "arithmetic"

    def __post_init__(self) -> None:
        _positive(self, "offline", "max_tries")
        if self.relations not in ("arithmetic", "order"):
            raise ConfigError(f"offline.relations: {self.relations!r}; choose arithmetic or order")


@dataclass(frozen=True)
class GenerationConfig:
    """A generation job.

    Attributes:
        backend: ``offline`` (default, deterministic), ``openai`` (any OpenAI-compatible endpoint)
            or ``local`` (a model in this process, :class:`LocalConfig`).
        seed: seeds the offline draws and the per-request ``seed`` sent to the LLM.
        similars: K, similar questions per original (≥ 2; SPEC §1).
        paraphrases: M, paraphrases per blanked variant.
        blanks: k, ``[BLANK]`` markers per blanked variant.
        min_changed: share of the original's quantities a similar question must change.
        controls: further similar questions per original drawn only as matched controls (no
            blanks, no paraphrases; SPEC §8.10's ``decision_controls``): ``lara run`` sets it from
            ``calibration``; 0 = none.
        answers: re-solve each similar's and control's answer from the question's worked
            solution (``extra.solution``, where the questions file gives one; :mod:`generation.answers`),
            so that the detectors that read answers (reward gain) can be scored on the controls.
    """

    backend: Backend = "offline"
    seed: int = 0
    similars: int = 5
    paraphrases: int = 5
    blanks: int = 1
    min_changed: float = 1.0
    controls: int = 0
    answers: bool = True
    offline: OfflineConfig = field(default_factory=OfflineConfig)
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)
    local: LocalConfig = field(default_factory=LocalConfig)

    def __post_init__(self) -> None:
        if self.similars < 2:
            raise ConfigError(
                f"'similars' (K) must be at least 2 (a standard deviation over the similars is taken), got {self.similars}"
            )
        _positive(self, "", "paraphrases", "blanks")
        if self.controls < 0:
            raise ConfigError(f"'controls' must be >= 0 (further similars drawn only as controls), got {self.controls}")
        if not 0.0 < self.min_changed <= 1.0:
            raise ConfigError(f"'min_changed' must be in (0, 1], got {self.min_changed}")
        if self.backend == "local" and not self.local.model:
            raise ConfigError("'local.model' is required with backend: local (a checkpoint directory or a .gguf file)")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "GenerationConfig":
        return from_mapping(cls, data or {})

    @classmethod
    def from_yaml(cls, path: str | Path) -> "GenerationConfig":
        return cls.from_dict(load_yaml(path))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _positive(obj: object, section: str, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value <= 0:
            key = f"{section}.{name}" if section else name
            raise ConfigError(f"'{key}' must be positive, got {value}")
