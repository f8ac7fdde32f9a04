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

CPU_VLLM_FROM_BYTES = 256 * 2**20  # on a CPU, auto takes vLLM from checkpoints this large (GPT-2-small: 500 MB)


def resolve_engine(engine: str, source: str | None = None, base: str | None = None) -> str:
    """``hf`` or ``vllm`` for a configured engine. ``auto`` takes vLLM where it is installed (and
    no launcher started several processes) and is the faster engine: on a CUDA device, or on a CPU
    for a checkpoint whose weight files reach ``CPU_VLLM_FROM_BYTES`` (measured on 2 cores: vLLM
    1.5–2.5x the built-in sampler on GPT-2-small, 0.9x on the 2 MB testbed model); else hf.
    ``base`` is an adapter's base (``model.base``), whose weights are what runs."""
    if engine != AUTO:
        return engine_entry(engine).name
    faster = [e for e in ENGINES.values() if e.auto and e.installed() and not (e.single_process and launched())]
    if not faster:
        return LOCAL
    import torch

    on_cuda = torch.cuda.is_available()
    return faster[0].name if on_cuda or weight_bytes(source, base) >= CPU_VLLM_FROM_BYTES else LOCAL


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
        raise ConfigError(UNDER_LAUNCHER)
    return {
        "engine": entry.name,
        "version": entry.version_string(),
        "args": dict(getattr(model, "engine_args", None) or {}),
    }


UNDER_LAUNCHER = (
    "this model.engine under torchrun: vLLM starts its own workers and process group, which clash with "
    "the launcher's; run one process with model.engine_args.tensor_parallel_size set to the node's GPUs, or serve the "
    "model (python -m vllm.entrypoints.openai.api_server …) and set detect.endpoint (docs/scaling.md)"
)


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
