"""Installing a toy engine as docs/development.md's recipe says: its module (written to a temporary
file and imported under ``probes.responders``) and one entry in the engine registry."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def install_engine(
    monkeypatch: Any, folder: Path, module_name: str, source: str, name: str, **fields: Any
) -> ModuleType:
    """Import ``source`` (with ``open_engine`` and ``version``) as ``probes.responders.<module_name>``
    and register it as engine ``name``: the ``EngineEntry`` ``fields`` given (by default every
    access kind but whole distributions, exact); both undone by ``monkeypatch`` after the test."""
    from probes.responders import registry
    from probes.responders.base import Access

    module_file = folder / f"{module_name}.py"
    module_file.write_text(source)
    spec = importlib.util.spec_from_file_location(f"probes.responders.{module_name}", module_file)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    defaults = {"supplies": frozenset(Access) - {Access.FULL_DISTRIBUTION}, "exact": True}
    where = {"opener": f"{spec.name}:open_engine", "version": f"{spec.name}:version"}
    entry = registry.EngineEntry(name, **{**defaults, **fields, **where})
    monkeypatch.setitem(registry.ENGINES, name, entry)  # the one registry line
    return module
