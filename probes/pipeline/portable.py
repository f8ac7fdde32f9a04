"""What a ledger key leaves out (SPEC §10, keys): where and how fast a stage runs.

A stage's key holds what changes its result and nothing else, so a run begun on one machine, at
one batch size, finishes on another without redoing what is done. Left out of every key, and
written to the stage's record as its *placement* instead:

- a model's device and placement (``device``, ``device_map``, ``gpus_per_rank``) and its
  attention kernel (``attn_implementation``: the same arithmetic, another kernel);
- throughput settings: batch sizes and token budgets per forward pass, flush sizes, the padding
  side (results never depend on it: tested), a served model's requests in flight, where the
  response store lives, vLLM's parallelism and memory settings;
- the toolkit's version string (the generator's identity holds a digest of its own code);
- a local model's path: its content digest (``content``, ``base_content``) names it instead.

The rules are by the key a mapping sits under, at any depth (a ``model`` or ``reference`` identity,
the ``extraction`` and ``detect`` settings, a served ``endpoint``, an engine's ``args``, a
``generator`` identity), so a key written before this module existed can be read again the same
way (:meth:`.ledger.Ledger.done_record`).
"""

from __future__ import annotations

from typing import Any

from cache.loading import auto_dtype_on

from ..responders.registry import throughput_arguments

MODEL_PLACEMENT = ("device", "device_map", "gpus_per_rank", "attn_implementation")
LEFT_OUT: dict[str, tuple[str, ...]] = {
    "model": MODEL_PLACEMENT,
    "reference": MODEL_PLACEMENT,
    "extraction": ("batch_size", "max_batch_tokens", "flush_every", "padding_side"),
    "detect": ("batch_size", "decoding", "store"),
    "endpoint": ("concurrency",),
    "args": throughput_arguments(),  # every engine's speed-only arguments, from the registry
    "generator": ("toolkit_version",),
}
_PATHS_OF = ("model", "reference")  # identities whose local path gives way to its content digest


def portable(inputs: Any) -> Any:
    """``inputs`` without the placement and throughput entries (a new structure)."""
    return _split(inputs, None)[0]


def placement(inputs: Any) -> dict[str, Any]:
    """The entries :func:`portable` leaves out, by dotted path (the stage record's provenance)."""
    return _split(inputs, None)[1]


def _split(value: Any, parent: str | None, path: str = "") -> tuple[Any, dict[str, Any]]:
    """(the value without the left-out entries, {dotted path: left-out value})."""
    if isinstance(value, list):
        kept, dropped = [], {}
        for i, item in enumerate(value):
            k, d = _split(item, None, f"{path}[{i}]")
            kept.append(k)
            dropped.update(d)
        return kept, dropped
    if not isinstance(value, dict):
        return value, {}
    left_out = set(LEFT_OUT.get(parent or "", ()))
    if parent in _PATHS_OF and "content" in value:
        left_out |= {"source", "base"}  # a local model: named by its content digest
    kept, dropped = {}, {}
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key in left_out:
            dropped[where] = item
            continue
        kept[key], below = _split(item, key, where)
        dropped.update(below)
    if parent in _PATHS_OF and kept.get("dtype") == "auto":
        kept["dtype"] = _legacy_auto_dtype(value)
    return kept, dropped


def _legacy_auto_dtype(identity: dict[str, Any]) -> str:
    """A model identity written before ``dtype: auto`` was keyed by what it resolves to: read with
    the resolution its recorded placement implies (:func:`cache.loading.auto_dtype_on`); a device
    of ``auto`` stays ambiguous (reruns)."""
    device_type = str(identity.get("device") or "").split(":")[0]
    spread = identity.get("device_map") is not None or bool(identity.get("gpus_per_rank"))
    if not spread and device_type not in ("cpu", "cuda", "mps", "xpu"):
        return "auto"
    return f"auto: {auto_dtype_on(device_type, spread)}"
