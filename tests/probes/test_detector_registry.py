"""The detector registry: a declared order, every detector module in it, and the counts the docs give."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from probes.detectors import ORDER, REGISTRY
from probes.detectors.base import order_registry, register
from probes.detectors.likelihood import PPL

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()


def test_the_registry_is_in_the_declared_order_whatever_the_order_of_registration():
    saved = dict(REGISTRY)
    try:
        REGISTRY.clear()
        REGISTRY.update({name: saved[name] for name in reversed(ORDER)})  # as if imported backwards
        order_registry(ORDER)
        assert list(REGISTRY) == list(ORDER)
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


def test_a_detector_left_out_of_the_order_or_never_registered_is_refused():
    saved = dict(REGISTRY)

    class Toy(PPL):
        name = "toy_detector"

    try:
        register(Toy)
        with pytest.raises(ValueError, match="registered but not in ORDER: toy_detector"):
            order_registry(ORDER)
        del REGISTRY["toy_detector"]
        del REGISTRY["zlib"]
        with pytest.raises(ValueError, match="never registered .*: zlib"):
            order_registry(ORDER)
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


def registered_in_sources() -> dict[str, str]:
    """``{class name: module}`` of every class decorated ``@register`` in probes/detectors/."""
    found = {}
    for path in sorted((ROOT / "probes" / "detectors").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list
            ):
                found[node.name] = path.stem
    return found


def test_every_detector_a_module_defines_is_in_the_registry():
    """A module whose import was forgotten in probes/detectors/__init__.py dropped its detector
    silently; every ``@register`` class of the package must be registered."""
    in_sources = registered_in_sources()
    in_registry = {cls.__name__ for cls in REGISTRY.values()}
    assert len(in_sources) >= 15
    assert set(in_sources) == in_registry, set(in_sources) ^ in_registry


def test_the_detector_counts_in_the_readme_and_docs_are_the_registry_s():
    word = NUMBERS[len(REGISTRY)]
    pattern = re.compile(r"\b(" + "|".join(NUMBERS[10:]) + r")\b(?=( output-level)? detectors)|(?<=\ball )(\w+)\b")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    counted = [
        (page.name, m.group(1) or m.group(3))
        for page in pages
        for m in pattern.finditer(page.read_text().replace("\n", " "))
        if (m.group(1) or m.group(3)) in NUMBERS[10:]
    ]
    assert counted, "the README names the number of detectors"
    assert all(found == word for _, found in counted), [c for c in counted if c[1] != word]
