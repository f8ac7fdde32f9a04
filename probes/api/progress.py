"""Whether the Python API shows progress bars: asked for, or by default where someone watches — a
notebook or an interactive terminal — so a call that runs for minutes is never silent there."""

from __future__ import annotations

import sys


def show_progress(progress: bool | None) -> bool:
    """``progress`` where given; else True in a Jupyter/IPython kernel or when stderr is a terminal."""
    if progress is not None:
        return progress
    if "ipykernel" in sys.modules:
        return True
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())
