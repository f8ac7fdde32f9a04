"""A digest of the generation package's source, part of every set's provenance."""

from __future__ import annotations

import hashlib
from pathlib import Path


def code_digest() -> str:
    """sha256 (16 hex digits) of the generation package's source: any change to how sets are made
    (an upgrade, a local edit) gives sets a new provenance, so none made before is reused as if the
    code were the same (the offline algorithm's version alone is bumped by hand)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        h = hashlib.sha256()
        for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


_CODE_DIGEST: str | None = None
