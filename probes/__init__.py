"""LaRA Probes: detect RL-phase benchmark contamination from layer-wise representations.

``probes`` is the top layer: it owns the pipeline and the ``lara`` CLI, and builds on
``cache`` (activations) and ``generation`` (perturbation sets).
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("lara-probes")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"
