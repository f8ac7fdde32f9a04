"""Where a model goes and in what dtype: a device (``auto``: CUDA, then MPS, then the CPU), a device
map, or a rank's share of a node's GPUs; ``dtype: auto`` resolved for that placement."""

from __future__ import annotations

from typing import Any

from .config import ModelConfig
from .distributed import Ranks, gpu_share, local_rank
from .errors import ModelLoadError


def placement(config: ModelConfig) -> tuple[Any, dict[str, Any]]:
    """The device the model moves to (None when a device map places it) and the placement
    arguments of ``from_pretrained``."""
    if config.gpus_per_rank:
        import torch

        if not torch.cuda.is_available():
            raise ModelLoadError(
                "model.gpus_per_rank (--gpus-per-rank) spreads the model over GPUs, but CUDA is not "
                "available here; drop it to run on this machine's device"
            )
        free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
        return None, share_device_map(config.gpus_per_rank, local_rank(), free)
    if config.device_map is not None:
        if Ranks.from_env() is not None:
            raise ModelLoadError(
                f"device_map {config.device_map!r} under torchrun would spread every process's model over "
                "all the node's GPUs; give each process its own with gpus_per_rank (--gpus-per-rank)"
            )
        return None, {"device_map": config.device_map}
    return resolve_device(config.device), {}


def share_device_map(gpus_per_rank: int, local_rank: int, free_memory: list[int]) -> dict[str, Any]:
    """``from_pretrained`` arguments that spread a model over this process's share of the node's
    GPUs (``free_memory``: free bytes of each GPU of the node): ``device_map="auto"`` with a
    ``max_memory`` that names only those GPUs, so accelerate places nothing elsewhere (and
    refuses a model too large for them rather than spilling it to the CPU)."""

    try:
        share = gpu_share(local_rank, gpus_per_rank, len(free_memory))
    except ValueError as err:
        raise ModelLoadError(str(err)) from None
    return {"device_map": "auto", "max_memory": {i: free_memory[i] for i in share}}


def resolve_device(device: str) -> Any:
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as err:
        raise ModelLoadError(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps") from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} was asked for but CUDA is not available here; use --device cpu")
    return resolved


def auto_dtype(config: ModelConfig) -> str:
    """What ``dtype: auto`` computes in here (:func:`auto_dtype_on`) — a result-changing setting that
    depends on the device, so a stage's key holds it (not the device)."""
    spread = config.device_map is not None or bool(config.gpus_per_rank)
    return auto_dtype_on("" if spread else resolve_device(config.device).type, spread)


def auto_dtype_on(device_type: str, spread: bool) -> str:
    """``float32`` on a CPU, ``checkpoint`` (the checkpoint's own dtype) on an accelerator or for a
    model spread by a device map."""
    return "checkpoint" if spread or device_type != "cpu" else "float32"


def resolve_dtype(dtype: str, device: Any) -> Any:
    import torch

    if dtype == "auto":
        if device is not None and device.type == "cpu":
            return torch.float32
        return "auto"
    return getattr(torch, dtype)
