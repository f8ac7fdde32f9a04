"""Data-parallel ``lara cache`` on ``torch.distributed``, launched by ``torchrun`` (or ``accelerate
launch`` / ``srun torchrun``, which set the same variables: RANK, WORLD_SIZE, LOCAL_RANK).

Every rank reads the store's committed rows, waits for the others (so all see the same state),
takes its share of the texts still to do — longest first, each to the least-loaded rank by
tokens, ties broken by the text's hash, so the split is the same on every rank and every run —
and commits its rows as its own shard files. Rank 0 merges the shards once every rank has
finished. A rank that dies takes the job down (torchrun names it); the rerun, at the same or
another world size, resumes from every committed shard. Without a launcher (or with one process)
nothing here is used.
"""

from __future__ import annotations

import atexit
import dataclasses
import heapq
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from .config import ModelConfig


@dataclass(frozen=True)
class Ranks:
    """This process's place in a launched job."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_env(cls) -> "Ranks | None":
        """The launcher's RANK / WORLD_SIZE / LOCAL_RANK, or None when not launched (or one process)."""
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            return None
        world_size = int(os.environ["WORLD_SIZE"])
        if world_size <= 1:
            return None
        return cls(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))

    def device(self, requested: str, gpus_per_rank: int | None = None) -> str:
        """``cuda:LOCAL_RANK`` where the model would go to a GPU (the first GPU of the rank's share
        with ``gpus_per_rank``), else the requested device."""
        import torch

        if gpus_per_rank:
            return f"cuda:{self.local_rank * gpus_per_rank}"
        if requested in ("auto", "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return "cpu" if requested == "auto" else requested

    def place(self, model: "ModelConfig") -> "ModelConfig":
        """``model`` on this rank's device, unless a device map places it (``gpus_per_rank``)."""
        if model.device_map is not None or model.gpus_per_rank is not None:
            return model
        return dataclasses.replace(model, device=self.device(model.device))

    def start_for(self, model: "ModelConfig", timeout_s: float | None = None) -> None:
        """:meth:`start` on the device ``model`` runs on in this rank (the first GPU of its share)."""
        self.start(self.device(model.device, model.gpus_per_rank), timeout_s)

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the one that writes what every rank shares."""
        return self.rank == 0

    def start(self, device: str, timeout_s: float | None = None) -> None:
        """Join the process group (NCCL on GPUs, gloo on CPUs) unless already in one.

        ``timeout_s``: how long a collective waits for the slowest rank (torch's default, 30 min
        on gloo, when None) — ``lara run`` raises it, as the other ranks wait while rank 0 works alone.
        """
        import datetime

        import torch
        import torch.distributed as dist

        if dist.is_initialized():
            return
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))  # object collectives on NCCL go through this device
        kwargs = {"timeout": datetime.timedelta(seconds=timeout_s)} if timeout_s else {}
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo", **kwargs)
        atexit.register(leave_process_group)

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value``, in rank order, on every rank."""
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out

    def broadcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (the others pass anything, e.g. None)."""
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def leave_process_group() -> None:
    """Destroy the process group, if one is open: registered at exit by :meth:`Ranks.start`.

    Left to the interpreter's teardown, gloo's threads are sometimes destroyed while still
    joinable and the process aborts ("terminate called without an active exception") after its
    work is done — 4 of 55 two-rank jobs on 2 CPU cores, 0 of 130 with this."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def assign(lengths: Sequence[int], keys: Sequence[str], world_size: int) -> list[int]:
    """The rank of each item: longest first (ties by key), each to the rank with the fewest tokens
    so far (ties: the lowest rank). Deterministic in (lengths, keys, world_size)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], keys[i]))
    load = [(0, r) for r in range(world_size)]
    out = [0] * len(lengths)
    for i in order:
        tokens, rank = heapq.heappop(load)
        out[i] = rank
        heapq.heappush(load, (tokens + lengths[i], rank))
    return out


def local_rank() -> int:
    """This process's index on its node (LOCAL_RANK; 0 without a launcher)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def gpu_share(local_rank: int, gpus_per_rank: int, n_gpus: int) -> list[int]:
    """The GPUs of the process with ``local_rank`` when each takes ``gpus_per_rank`` of the node's ``n_gpus``.

    Raises:
        ValueError: the node has too few GPUs for this process's share.
    """
    first = local_rank * gpus_per_rank
    if first + gpus_per_rank > n_gpus:
        raise ValueError(
            f"local rank {local_rank} with gpus_per_rank {gpus_per_rank} needs GPUs {first}-{first + gpus_per_rank - 1}, "
            f"but this node has {n_gpus}; launch at most {n_gpus // gpus_per_rank} process(es) per node "
            "(torchrun --nproc_per_node) or lower gpus_per_rank"
        )
    return list(range(first, first + gpus_per_rank))
