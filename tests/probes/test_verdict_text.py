"""The verdict's words live beside the report; the verdicts package returns numbers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

VERDICTS = Path(__file__).resolve().parents[2] / "probes" / "verdicts"


def test_printing_a_verdict_imports_no_statistics_library():
    code = (
        "import sys; from probes.report.verdict_text import describe_verdict, verdict_markdown; "
        "print(sorted(m for m in ('scipy', 'sklearn', 'statsmodels', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=VERDICTS.parents[1]
    )
    assert out.stdout.strip() == "[]"


def test_no_verdict_sentence_is_written_in_the_verdicts_package():
    """Before: calibration/audit.py (now verdicts/on_files.py) held ~175 lines of the verdict's wording."""
    phrases = ("CONTAMINATED", "NO CALIBRATED VERDICT", "not flagged", "which questions:", "## Verdict")
    modules = sorted(VERDICTS.glob("*.py"))
    assert len(modules) >= 10, "the package's modules are read"
    found = [(path.name, phrase) for path in modules for text in _strings(path) for phrase in phrases if phrase in text]
    assert not found, found


def _strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]
