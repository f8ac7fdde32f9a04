"""LaRA Probes: detect RL-phase benchmark contamination from layer-wise representations.

``probes`` is the top layer: it owns the pipeline and the ``lara`` CLI, and builds on
``cache`` (activations) and ``generation`` (perturbation sets). Its Python API is imported lazily
(nothing heavy loads until a function is called):

>>> import probes
>>> model = probes.load_model("probes/testbed/checkpoints/cpu-seed0/rl")
>>> probes.pool(model, ["What is 2 + 3?"]).shape          # torch.Size([1, n_layers, d_model])
>>> result = probes.detect(model, questions, "ppl,min_k", sets=probes.perturb(questions))
>>> probes.verdict(result).summary()

Reference: ``docs/python-api.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from lara_core.version import __version__

from .api import NAMES

__all__ = ["__version__", *NAMES]


def __getattr__(name: str) -> Any:
    if name in NAMES:
        return getattr(importlib.import_module(f"{__name__}.api.{NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
