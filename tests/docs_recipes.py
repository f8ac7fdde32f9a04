"""The recipes of docs/development.md as their tests read them: a section's first code block, split
into the files it edits."""

from __future__ import annotations

import re
from pathlib import Path

DEVELOPMENT = Path(__file__).resolve().parents[1] / "docs" / "development.md"


def recipe_blocks(heading: str) -> dict[str, str]:
    """``{file: code}`` of the first code block after ``heading``, split at its ``# probes/…:`` (or
    ``# probes/…,``) comment lines, in the page's order."""
    page = DEVELOPMENT.read_text()
    code = re.search(r"```python\n(.*?)```", page[page.index(heading) :], re.S).group(1)
    parts = re.split(r"^# (probes/\S+)[,:].*$", code, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}
