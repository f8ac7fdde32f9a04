"""Which engine runs a local model for the output-level detectors (SPEC §5, engines).

``hf``: Hugging Face forward passes and the toolkit's KV-cached sampler (full logits, exact
everywhere). ``vllm``: vLLM in-process (:mod:`.vllm_engine`). ``auto``: whichever is faster
where vLLM is installed (:func:`resolve_engine`; ``benchmarks/bench_engines.py``,
docs/performance.md), else hf.

A detector the chosen engine cannot feed (policy drift needs whole next-token distributions)
runs on the hf engine instead, loaded only if such a detector runs (:class:`LazyResponder`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..errors import ConfigError
from .base import Access
from .registry import AUTO, ENGINES, LOCAL, engine_entry
from .weights import weight_bytes

logger = logging.getLogger(__name__)


def resolve_engine(engine: str, source: str | None = None, base: str | None = None) -> str:
    """The engine that runs for a configured one. ``auto`` takes the first engine of the registry
    that ``auto`` may pick, is installed (and, if it starts its own workers, no launcher started
    several processes) and is the faster one: on a CUDA device, or on a CPU for a checkpoint whose
    weight files reach its ``cpu_from_bytes``; else hf. ``base`` is an adapter's base
    (``model.base``), whose weights are what runs."""
    if engine != AUTO:
        return engine_entry(engine).name
    candidates = [e for e in ENGINES.values() if e.auto and e.installed() and not (e.single_process and launched())]
    if not candidates:
        return LOCAL
    import torch

    if torch.cuda.is_available():
        return candidates[0].name
    size = weight_bytes(source, base)
    faster = [e for e in candidates if e.cpu_from_bytes is not None and size >= e.cpu_from_bytes]
    return faster[0].name if faster else LOCAL


def engine_key(model: Any) -> dict[str, Any] | None:
    """What a model's engine adds to a stage key: None for hf (keys as before engines existed),
    else the engine, its version and its arguments."""
    engine = resolve_engine(
        getattr(model, "engine", "hf"), getattr(model, "source", None), getattr(model, "base", None)
    )
    entry = engine_entry(engine)
    if entry.name == LOCAL:
        return None
    if entry.single_process and launched():
        raise ConfigError(entry.under_launcher or f"engine {entry.name!r} cannot run under torchrun")
    return {
        "engine": entry.name,
        "version": entry.version_string(),
        "args": dict(getattr(model, "engine_args", None) or {}),
    }


def launched() -> bool:
    """Whether this process is one of several started by a launcher (torchrun)."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1")) > 1


class LazyResponder:
    """A responder built on first use (the hf fallback of an engine: its model loads only when a
    detector needs it). ``access`` is known without building it."""

    def __init__(self, build: Callable[[], Any], access: frozenset[Access]) -> None:
        self._build = build
        self._built: Any = None
        self.access = access

    @property
    def built(self) -> Any:
        if self._built is None:
            self._built = self._build()
        return self._built

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.built, name)


def close_engine(responder: Any) -> None:
    """Stop the engine :func:`probes.responders.open.open_responder` opened behind ``responder``
    (its ``opened_engine``), if it has one and it can be stopped (its ``close``); a responder of the
    hf engine, or a served model's, has none."""
    engine = getattr(responder, "opened_engine", None)
    if engine is not None and callable(getattr(engine, "close", None)):
        engine.close()
