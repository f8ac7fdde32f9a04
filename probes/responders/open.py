"""Open a responder from settings — the one place the stack is built, for ``lara detect``, the
``detect`` stage of ``lara run`` and the Python API alike: a local model (a loaded one or a
callable that loads it, called only when needed) or an OpenAI-compatible endpoint, behind the
response store, split across the ranks of a launched job."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from generation.config import default_cache_dir

from .base import Responder
from .distributed import on_ranks
from .engines import LazyResponder, resolve_engine
from .local import LocalResponder, PromptFormat
from .openai_api import OpenAIResponder
from .registry import LOCAL, engine_entry
from .store import CachedResponder, ResponseStore


class Endpoint(Protocol):
    """What a served model is reached by (``pipeline.config.EndpointSettings`` has these fields)."""

    base_url: str
    model: str
    api_key_env: str | None
    top_logprobs: int
    concurrency: int


def default_store_path() -> Path:
    """The response store ``lara detect`` and the Python API share by default (beside the
    generator's cache, ``~/.cache/lara-probes/responses.sqlite``); its folder is created."""

    path = default_cache_dir().parent / "responses.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def open_store(store: ResponseStore | str | Path) -> ResponseStore:
    """``store`` itself, or the response store at that path."""
    return store if isinstance(store, ResponseStore) else ResponseStore(Path(store))


def open_responder(
    model: Any,
    prompt_format: PromptFormat,
    store: ResponseStore | str | Path,
    *,
    batch_size: int = 16,
    endpoint: Endpoint | None = None,
    ranks: Any = None,
    progress: bool = False,
    engine: Any = None,
    decoding: str = "auto",
) -> Responder:
    """The cached responder of one model.

    Args:
        model: a ``LoadedModel``, or a callable returning one (called only for a local model);
            ignored when ``endpoint`` is given.
        prompt_format: how a question becomes the model's prompt (the system turn included).
        store: the response store (or its path) that keeps every answer and score.
        batch_size: prompts per forward pass of a local model.
        endpoint: a served model (base URL, model name, key variable, top log-probs, concurrency).
        ranks: a launched job's ranks (``cache.distributed.Ranks``): each batch call split across them.
        progress: show progress bars.
        engine: the model's settings (:class:`.model_settings.ModelSettings`) when its ``engine`` may be other than
            hf: with vLLM, the detectors vLLM cannot feed get the hf engine (``fallback``).
        decoding: the built-in sampler's loop (``auto``, ``dynamic``, ``static``: :mod:`.decoding`).
    """
    if endpoint is not None:
        backend: Any = OpenAIResponder(
            endpoint.base_url,
            endpoint.model,
            api_key_env=endpoint.api_key_env,
            top_logprobs=endpoint.top_logprobs,
            concurrency=endpoint.concurrency,
            system=prompt_format.system,
            prompt_format=prompt_format,
        )
    elif (
        engine is not None
        and (chosen := resolve_engine(engine.engine, engine.source, getattr(engine, "base", None))) != LOCAL
    ):

        def hf() -> Responder:
            return open_responder(
                model, prompt_format, store, batch_size=batch_size, ranks=ranks, progress=progress, decoding=decoding
            )

        responses = open_store(store)  # before the engine starts: a store that fails to open leaves none running
        opened = engine_entry(chosen).open(engine, prompt_format)
        cached = on_ranks(CachedResponder(opened, responses, progress=progress), ranks)
        cached.fallback = LazyResponder(hf, LocalResponder.access)  # type: ignore[union-attr]
        cached.opened_engine = opened  # type: ignore[union-attr]  # what close_engine stops
        return cached
    else:
        loaded = model() if callable(model) and not hasattr(model, "layout") else model
        backend = LocalResponder(loaded, prompt_format, batch_size=batch_size, decoding=decoding)
    return on_ranks(CachedResponder(backend, open_store(store), progress=progress), ranks)
