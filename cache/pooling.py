"""Masked mean pooling, done where the activation is produced, and early stopping."""

from __future__ import annotations

from typing import Any


class StopForward(Exception):
    """Raised by the hook on the deepest layer needed, to end a forward pass early."""


def pool_weights(pool_mask: Any) -> tuple[Any, Any]:
    """Precompute what :func:`masked_mean` needs for a batch.

    Args:
        pool_mask: ``[batch, seq]`` bool.

    Returns:
        ``(mask, counts)``: ``[batch, seq, 1]`` bool and ``[batch, 1]`` float32 token counts.
    """
    import torch

    counts = pool_mask.sum(dim=1, keepdim=True).to(torch.float32)
    return pool_mask.unsqueeze(-1), counts


def masked_mean(hidden: Any, mask: Any, counts: Any) -> Any:
    """Mean of ``hidden`` over the masked positions, in float32.

    Args:
        hidden: ``[batch, seq, d]`` in the model's dtype.
        mask / counts: from :func:`pool_weights`.

    Returns:
        ``[batch, d]`` float32. ``torch.where`` (not multiplication) keeps a non-finite value at
        a padded position from leaking into the mean.
    """
    import torch

    mask, counts = mask.to(hidden.device), counts.to(hidden.device)
    return torch.where(mask, hidden, 0).sum(dim=1, dtype=torch.float32) / counts


def stack_on_host(pooled: list[Any]) -> Any:
    """Stack per-layer ``[batch, d]`` tensors into ``[batch, n_layers, d]`` on the CPU, with one
    device-to-host copy when they share a device (several under a multi-device map)."""
    import torch

    if len({p.device for p in pooled}) == 1:
        return torch.stack(pooled, dim=1).cpu()
    return torch.stack([p.cpu() for p in pooled], dim=1)
