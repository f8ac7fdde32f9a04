"""Read the texts to cache from a ``.txt`` (one per line) or ``.jsonl`` file.

* ``.txt``: one text per line; blank lines are separators and are skipped (their count is
  logged). A text cannot contain a newline in this format: use JSONL for that.
* ``.jsonl``: each line is a JSON string, or an object whose ``field`` (default ``text``) is a
  string. An empty text is an error naming the line.
* Input must be UTF-8; any other encoding is refused with the line, the byte and a fix.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lara_core.errors import json_problem
from lara_core.files import utf8_lines

from .errors import InputError

logger = logging.getLogger(__name__)


def read_texts(path: str | Path, field: str = "text") -> list[str]:
    """Texts of ``path`` in file order (duplicates kept; the cache dedupes)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"texts file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in (".txt", ".jsonl"):
        raise InputError(
            f"{path}: expected a .txt (one text per line) or .jsonl file, got '{suffix or 'no extension'}'"
        )
    texts: list[str] = []
    blank = 0
    for lineno, line in utf8_lines(path):
        if not line.strip():
            blank += 1
            continue
        if suffix == ".txt":
            texts.append(line)
        else:
            texts.append(_parse_jsonl_line(path, lineno, line, field))
    if blank and suffix == ".txt":
        logger.info("%s: skipped %d blank lines", path, blank)
    if not texts:
        raise InputError(f"{path} holds no texts")
    return texts


def _parse_jsonl_line(path: Path, lineno: int, line: str, field: str) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{lineno}: not valid JSON ({json_problem(err)})") from None
    if isinstance(record, dict):
        if field not in record:
            raise InputError(
                f"{path}:{lineno}: no '{field}' key (keys: {', '.join(map(str, record)) or 'none'}); "
                "choose the key with --text-field"
            )
        record = record[field]
    if not isinstance(record, str):
        raise InputError(f"{path}:{lineno}: the text must be a string, got {type(record).__name__}")
    if not record.strip():
        raise InputError(f"{path}:{lineno}: the text is empty")
    return record
