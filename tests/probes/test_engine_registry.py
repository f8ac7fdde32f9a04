"""The engine registry (issue 43): one entry per engine — what it supplies, what it needs installed
and how it is refused, where its code lives — and no engine branch outside it."""

from __future__ import annotations

import dataclasses

import pytest

from probes.errors import ConfigError
from probes.responders import engines, registry
from probes.responders.base import Access
from probes.responders.registry import ENGINES, LOCAL, EngineEntry, engine_entry, load


def test_an_unknown_engine_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match=r"model.engine 'vlm': choose auto, hf, vllm"):
        engine_entry("vlm")
    with pytest.raises(ConfigError, match="choose auto, hf, vllm"):
        engines.resolve_engine("vlm")
    assert engines.resolve_engine("hf") == LOCAL


def test_a_missing_package_is_refused_in_one_line_with_its_install_command():
    entry = EngineEntry(
        "toy",
        frozenset(),
        False,
        opener="probes.responders.local:LocalResponder",
        package="no_such_package_x",
        install="pip install no-such-package-x",
    )
    with pytest.raises(ConfigError) as caught:
        entry.open(None, None)
    assert (
        str(caught.value)
        == "engine 'toy' needs the 'no_such_package_x' package; install it: pip install no-such-package-x"
    )
    assert "\n" not in str(caught.value)


def test_auto_takes_only_installed_engines(monkeypatch):
    missing = {name: dataclasses.replace(e, package="no_such_package_x") for name, e in ENGINES.items()}
    monkeypatch.setattr(registry, "ENGINES", missing)
    monkeypatch.setattr(engines, "ENGINES", missing)
    assert engines.resolve_engine("auto", "/no/such/model") == LOCAL


def test_every_entry_names_code_that_exists_and_what_it_supplies():
    assert ENGINES[LOCAL].supplies == frozenset(Access) and ENGINES[LOCAL].exact
    for entry in ENGINES.values():
        assert entry.supplies <= frozenset(Access) and (entry.opener is None) == (entry.name == LOCAL)
        if entry.opener is not None:
            module, _, function = entry.opener.partition(":")
            source = __import__("importlib.util").util.find_spec(module)
            assert source is not None and f"def {function}(" in open(source.origin).read(), entry.opener
            assert entry.install and entry.package
    assert load("probes.responders.registry:engine_entry") is engine_entry
