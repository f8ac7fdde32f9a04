"""Benchmarks in: import a benchmark table into a questions file (``importing``), pair member and
non-member sets into a labelled one with duplicates removed and its balance shown (``pairing``)."""

from .importing import ImportOptions, ImportResult, import_questions, write_questions
from .presets import PRESETS, Preset, preset_named
from .question_files import read_provenance
from .tables import TableSource, open_table

__all__ = [
    "ImportOptions",
    "ImportResult",
    "PRESETS",
    "Preset",
    "TableSource",
    "import_questions",
    "open_table",
    "preset_named",
    "read_provenance",
    "write_questions",
]
