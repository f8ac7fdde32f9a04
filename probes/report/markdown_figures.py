"""Number formats shared by the report's Markdown sections."""

from __future__ import annotations


def p_text(p: float | None) -> str:
    """A p-value as the report prints it: ``–`` when missing, ``< 1e-4``, or three decimals."""
    if p is None or p != p:
        return "–"
    return "< 1e-4" if p < 1e-4 else f"{p:.3f}"
