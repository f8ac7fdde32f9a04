"""The detectors' table of docs/detectors.md, made from their declared tags (name, statistic, raw
direction, what they need of a model, their family, whether the run's sampling temperature
applies), so the page cannot drift from the registry.

``python -m probes.detectors.table docs/detectors.md`` rewrites the table between its markers;
without an argument it prints it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..responders.base import Access
from .base import REGISTRY, Detector

START, END = "<!-- detector-table -->", "<!-- /detector-table -->"
# what each kind of access reads as in the table (token ids are an implementation detail)
NEEDS_WORDS = {
    Access.FULL_DISTRIBUTION: "full next-token distributions",
    Access.ENTROPY_EXACT: "full-vocabulary entropy",
    Access.VOCAB_MOMENTS: "vocabulary moments",
    Access.CHOSEN_LOGPROBS: "generation log-probs",
    Access.TEXT_LOGPROBS: "text log-probs",
    Access.SAMPLING: "sampling",
}


def needs_text(cls: type[Detector]) -> str:
    """What a detector (with its default parameters) needs of the audited model, and of the run."""
    needs = set(cls().needs)
    words = [w for access, w in NEEDS_WORDS.items() if access in needs]
    if len(words) > 1 and "sampling" in words:  # generation is implied by what is read of it
        words.remove("sampling")
    if cls.requires_reference:
        words.append("a reference model")
    if cls.requires_answers:
        words.append("the questions' answers")
    return ", ".join(words)


def detector_table() -> str:
    """The Markdown table, one row per registered detector in registry order."""
    lines = [
        "| name | statistic (SPEC §5) | raw direction | needs | family | at the sampling temperature |",
        "|---|---|---|---|---|---|",
    ]
    for name, cls in REGISTRY.items():
        sampled = "yes" if cls.samples_at_temperature else ""
        lines.append(
            f"| `{name}` | {cls.statistic} | {cls.raw_direction} | {needs_text(cls)} | {cls.family} | {sampled} |"
        )
    return "\n".join(lines)


def with_table(page: str) -> str:
    """``page`` with the text between the table's markers replaced by :func:`detector_table`."""
    head, found, rest = page.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"the page has no {START} … {END} markers")
    return f"{head}{START}\n{detector_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if not argv:
        sys.stdout.write(detector_table() + "\n")
        return 0
    path = Path(argv[0])
    path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
