"""Which engine runs a local model for the output-level detectors (SPEC §5, engines).

``hf``: Hugging Face forward passes and the toolkit's KV-cached sampler (full logits, exact
everywhere). ``vllm``: vLLM in-process (:mod:`.vllm_engine`). ``auto``: whichever is faster
where vLLM is installed (:func:`resolve_engine`; ``benchmarks/bench_engines.py``,
docs/performance.md), else hf.

A detector the chosen engine cannot feed (policy drift needs whole next-token distributions)
runs on the hf engine instead, loaded only if such a detector runs (:class:`LazyResponder`).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError
from .base import Access

logger = logging.getLogger(__name__)

ENGINES = ("auto", "hf", "vllm")
CPU_VLLM_FROM_BYTES = 256 * 2**20  # on a CPU, auto takes vLLM from checkpoints this large (GPT-2-small: 500 MB)


def resolve_engine(engine: str, source: str | None = None, base: str | None = None) -> str:
    """``hf`` or ``vllm`` for a configured engine. ``auto`` takes vLLM where it is installed (and
    no launcher started several processes) and is the faster engine: on a CUDA device, or on a CPU
    for a checkpoint whose weight files reach ``CPU_VLLM_FROM_BYTES`` (measured on 2 cores: vLLM
    1.5–2.5x the built-in sampler on GPT-2-small, 0.9x on the 2 MB testbed model); else hf.
    ``base`` is an adapter's base (``model.base``), whose weights are what runs."""
    if engine not in ENGINES:
        raise ConfigError(f"model.engine {engine!r}: choose {', '.join(ENGINES)}")
    if engine != "auto":
        return engine
    if importlib.util.find_spec("vllm") is None or launched():
        return "hf"
    import torch

    return "vllm" if torch.cuda.is_available() or weight_bytes(source, base) >= CPU_VLLM_FROM_BYTES else "hf"


def weight_files(source: str | None) -> list[Path]:
    """A checkpoint directory's weight files (``*.safetensors``, ``*.bin``), sorted; none for anything else."""
    if source is None or not Path(source).is_dir():
        return []
    return sorted(p for p in Path(source).iterdir() if p.suffix in (".safetensors", ".bin"))


def weight_bytes(source: str | None, base: str | None = None) -> int:
    """What the weights take as they run: a checkpoint directory's weight files; a GGUF file's
    weights dequantised to float32 (what it is converted to, whether converted yet or not, so the
    choice is the same on every run); an adapter's root base's (its own are small); 0 for a hub
    id. A source that does not resolve (refused elsewhere, with its reason) counts its directory's
    weight files, if any."""
    from cache.errors import ModelLoadError
    from cache.gguf_header import parameter_count
    from cache.sources import PACKAGE_PREFIX, resolve_source

    if source is None or not (source.startswith(PACKAGE_PREFIX) or Path(source).expanduser().exists()):
        return 0
    try:
        root = resolve_source(source, base=base).chain()[-1]
    except ModelLoadError:
        return sum(p.stat().st_size for p in weight_files(source))
    if root.kind == "gguf":
        return 4 * parameter_count(root.location)
    return sum(p.stat().st_size for p in weight_files(root.location))


def engine_key(model: Any) -> dict[str, Any] | None:
    """What a model's engine adds to a stage key: None for hf (keys as before engines existed),
    else the engine, its version and its arguments."""
    engine = resolve_engine(
        getattr(model, "engine", "hf"), getattr(model, "source", None), getattr(model, "base", None)
    )
    if engine == "hf":
        return None
    if launched():
        raise ConfigError(UNDER_LAUNCHER)
    from .vllm_engine import vllm_version  # lazy: pulls h5py

    return {"engine": engine, "version": vllm_version(), "args": dict(model.vllm or {})}


UNDER_LAUNCHER = (
    "model.engine 'vllm' under torchrun: vLLM starts its own workers and process group, which clash with "
    "the launcher's; run one process with model.vllm.tensor_parallel_size set to the node's GPUs, or serve the "
    "model (python -m vllm.entrypoints.openai.api_server …) and set detect.endpoint (docs/scaling.md)"
)


def launched() -> bool:
    """Whether this process is one of several started by a launcher (torchrun)."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def open_vllm(model: Any, prompt_format: Any) -> Any:
    """The vLLM responder of a model config (``cache.ModelConfig``: source, dtype, vllm arguments)."""
    from .vllm_engine import TOP_K, VLLMResponder  # lazy: pulls h5py

    if launched():
        raise ConfigError(UNDER_LAUNCHER)
    args = dict(model.vllm or {})
    top = int(args.pop("top_logprobs", TOP_K))
    dtype = "float32" if model.dtype == "auto" and not _cuda() else model.dtype
    from cache.loading import checkpoint_directory  # lazy: pulls h5py

    return VLLMResponder(
        checkpoint_directory(model),  # a GGUF file's conversion, an adapter merged into its base
        prompt_format,
        dtype=dtype,
        top_logprobs=top,
        engine_args=args,
        trust_remote_code=model.trust_remote_code,
    )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


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
    """Stop the in-process engine behind ``responder`` (and its wrappers), if it has one to stop."""
    while responder is not None:  # the store and rank wrappers each hold the next as .responder
        if hasattr(responder, "llm"):
            responder.close()
            return
        responder = getattr(responder, "responder", None)
