"""A smoke-preset testbed, built once per session (well under a minute on 2 CPU cores)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smoke_testbed(tmp_path_factory):
    from probes.testbed import build_testbed

    out = tmp_path_factory.mktemp("testbed") / "smoke"
    manifest = build_testbed(out, "smoke", seed=0)
    return out, manifest
