"""The toolkit's version, looked up once (``probes.__version__`` and ``generation.__version__``
are this value)."""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("lara-probes")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"
