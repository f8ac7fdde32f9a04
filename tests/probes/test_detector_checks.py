"""Every check of :mod:`tests.detector_checks` on every registered detector (issue 57, item 3):
the list comes from the registry when the tests are collected, so a new detector is checked with
no test file edited."""

from __future__ import annotations

import pytest

from tests.detector_checks import detector_checks


@pytest.mark.parametrize(
    "name, check", detector_checks(), ids=[f"{name}-{check.__name__[6:]}" for name, check in detector_checks()]
)
def test_every_registered_detector_passes_every_check(name, check, two_models, tmp_path):
    check(name, two_models, tmp_path)
