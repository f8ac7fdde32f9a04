"""docs/detectors.md's table of engines, made from the registry: what each engine supplies and the
arguments it declares (``model.engine_args``), so a new engine appears in the docs by its entry
alone. ``python -m probes.responders.engine_table docs/detectors.md`` rewrites the table between
its markers."""

from __future__ import annotations

import sys
from pathlib import Path

from .registry import ENGINES, EngineEntry

MARKERS = ("<!-- engine-table -->", "<!-- /engine-table -->")


def engine_table() -> str:
    """The Markdown table, one row per registered engine in registry order."""
    lines = ["| engine | log-probs | supplies | arguments (`model.engine_args`) |", "|---|---|---|---|"]
    for name, entry in ENGINES.items():
        supplies = ", ".join(sorted(a.value for a in entry.supplies))
        lines.append(f"| `{name}` | {'exact' if entry.exact else 'top-K'} | {supplies} | {_arguments(entry)} |")
    return "\n".join(lines)


def _arguments(entry: EngineEntry) -> str:
    declared = [f"`{name}` ({constraint.describe()})" for name, constraint in entry.parameters.items()]
    if entry.further:
        declared.append(f"any further argument of {entry.title or entry.name}'s own (checked when it opens)")
    return "; ".join(declared) or "none"


def with_engine_table(page: str) -> str:
    """``page`` with the text between the table's markers replaced by :func:`engine_table`."""
    start, end = MARKERS
    if start not in page or end not in page:
        raise ValueError(f"the page has no {start} … {end} markers")
    before, after = page.split(start, 1)[0], page.split(end, 1)[1]
    return before + start + "\n" + engine_table() + "\n" + end + after


if __name__ == "__main__":  # pragma: no cover
    target = Path(sys.argv[1])
    target.write_text(with_engine_table(target.read_text(encoding="utf-8")), encoding="utf-8")
