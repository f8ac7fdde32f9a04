"""A model's settings as the detectors see them: where it comes from and how it is placed
(:class:`cache.ModelConfig`, the activation package's own settings) plus which engine runs the
output-level detectors on it — ``engine``, a name the engine registry knows, and ``engine_args``,
a mapping checked against that engine's declared arguments (:mod:`.registry`). The activation
package knows of no engine: activations are always extracted by forward passes
(:func:`activation_config`).

An engine's old block of arguments (``model.vllm:``, before engines were named by name and
arguments) is still read, as ``engine_args``, with a deprecation warning
(:func:`read_old_engine_keys`); a run's keys are unchanged by the move (the engine's arguments
were and are the key's ``args``).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Mapping

from cache.config import ModelConfig

from ..errors import ConfigError
from .registry import AUTO, ENGINES, check_engine_args

logger = logging.getLogger(__name__)

ENGINE_FIELDS = ("engine", "engine_args")  # what runs the detectors: in the detect stage's key alone


@dataclass(frozen=True)
class ModelSettings(ModelConfig):
    """Where the model comes from, how it is placed, and which engine runs its detectors.

    Attributes:
        engine: what runs the output-level detectors' generation and scoring: ``hf`` (forward
            passes and the toolkit's KV-cached sampler), any engine of the registry (``vllm``:
            vLLM in-process, the ``vllm`` extra) or ``auto`` (the faster installed one: vLLM where
            it is installed, on a CUDA machine or on a CPU for weights of 256 MiB and more; else
            hf). Activations are always forward passes.
        engine_args: the engine's arguments (``vllm``: ``tensor_parallel_size``,
            ``gpu_memory_utilization``, ``top_logprobs`` — K, or −1 for the whole vocabulary — and
            any further ``vllm.LLM`` argument); each engine declares the ones it takes.
    """

    engine: str = AUTO
    engine_args: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "engine_args", check_engine_args(self.engine, self.engine_args))


def activation_config(model: ModelConfig) -> ModelConfig:
    """The activation package's settings of ``model``: every field but the engine's."""
    return ModelConfig(**{f.name: getattr(model, f.name) for f in dataclasses.fields(ModelConfig)})


def read_old_engine_keys(model: Any, where: str = "model") -> Any:
    """A ``model`` mapping with an engine's deprecated block of arguments (its registry entry's
    ``old_key``: ``model.vllm``) read as ``engine_args``, with a warning saying so; both at once
    are refused. Anything else is returned as it is."""
    if not isinstance(model, Mapping):
        return model
    for old in [e.old_key for e in ENGINES.values() if e.old_key and e.old_key in model]:
        if model[old] is None:  # what an older run's config.resolved.yaml wrote when it held none
            model = {k: v for k, v in model.items() if k != old}
            continue
        if model.get("engine_args") is not None:
            raise ConfigError(f"{where}.{old} and {where}.engine_args both set: keep engine_args alone")
        logger.warning(
            "%s.%s is deprecated: write %s.engine_args (the same keys); read as engine_args this time",
            where,
            old,
            where,
        )
        model = {**{k: v for k, v in model.items() if k != old}, "engine_args": model[old]}
    return model
