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


def test_no_page_counts_the_registry_s_detectors_by_hand():
    """A count written beside the detectors turned false with each new one (issue 57): the list is
    docs/detectors.md's table, generated from the registry; no page says how many there are, in
    words or in digits ("the 15 detectors of issue 53" is a measurement of its time, of another size)."""
    size = len(REGISTRY)
    count = rf"(?:{NUMBERS[size]}|{size})"
    pattern = re.compile(rf"\b{count}\b(?=( output-level)? detectors)|(?<=\ball ){count}\b(?! of)", re.I)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    counted = [(page.name, m.group(0)) for page in pages for m in pattern.finditer(page.read_text().replace("\n", " "))]
    assert counted == []
    assert pattern.search(f"It implements {NUMBERS[size]} output-level detectors."), "a hand count is found"
