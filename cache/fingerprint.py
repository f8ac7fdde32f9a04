"""Fingerprints that tell two models (or tokenizers) apart, cheaply and wherever they live.

The weights fingerprint hashes, for every parameter in name order, its name, dtype, shape and
an evenly strided sample of at most ``SAMPLE_PER_TENSOR`` values. Fine-tuning (RL included)
moves essentially every weight, so two checkpoints of one architecture get different
fingerprints, while hashing costs milliseconds instead of reading every byte, and works the
same for a local directory, a hub snapshot or a model dispatched over several devices.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

SAMPLE_PER_TENSOR = 4096
FINGERPRINT_METHOD = f"sha256/strided-{SAMPLE_PER_TENSOR}"


def weights_fingerprint(model: Any) -> str:
    """Hex digest identifying a model's weights (see module docstring)."""
    import torch

    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        digest.update(f"{name}|{param.dtype}|{tuple(param.shape)}|".encode())
        if param.device.type == "meta" or param.numel() == 0:
            continue
        flat = param.detach().reshape(-1)
        step = max(1, flat.numel() // SAMPLE_PER_TENSOR)
        sample = flat[::step][:SAMPLE_PER_TENSOR].to(device="cpu", dtype=torch.float32)
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """Hex digest of everything that decides a tokenizer's ids: its full serialised pipeline
    (normaliser, pre-tokenizer, model, post-processor), special tokens and chat template."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        core = json.loads(backend.to_str())
        core.pop("padding", None)
        core.pop("truncation", None)
        body = json.dumps(core, sort_keys=True)
    else:
        body = json.dumps(sorted(tokenizer.get_vocab().items()))
    extra = {
        "special": {k: str(v) for k, v in sorted(getattr(tokenizer, "special_tokens_map", {}).items())},
        "chat_template": getattr(tokenizer, "chat_template", None),
    }
    return hashlib.sha256((body + json.dumps(extra, sort_keys=True)).encode()).hexdigest()


def text_hash(text: str) -> str:
    """Sha256 hex digest of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
