"""The Python API (``import probes``): the operations of an audit on objects a notebook holds,
over the library entries the CLI and ``lara run`` use. Its reference, generated from these
docstrings, is ``docs/python-api.md``."""

from __future__ import annotations

NAMES = {
    "load_model": "models",
    "pool": "models",
    "cache_activations": "models",
    "open_store": "models",
    "perturb": "lara",
    "lara_metrics": "lara",
    "lara_score": "lara",
    "drift": "drift",
    "detect": "audit",
    "fuse": "audit",
    "verdict": "audit",
    "evaluate": "audit",
    "plot_roc": "plots",
    "plot_scores": "plots",
    "plot_verdict": "plots",
}
