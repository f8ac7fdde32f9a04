"""Derived score columns (``<detector>@cal``, ``<detector>@ref``) are named by one function."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from probes.report.plots import roc_family
from probes.scores import AGAINST_REFERENCE, CALIBRATED, derived_column, split_column

PACKAGE = Path(__file__).resolve().parents[2] / "probes"


def test_a_derived_name_round_trips_and_plain_names_are_left_alone():
    assert derived_column("ppl", CALIBRATED) == "ppl@cal"
    assert derived_column("min_k_plus_plus", AGAINST_REFERENCE) == "min_k_plus_plus@ref"
    assert split_column("min_k_plus_plus@ref") == ("min_k_plus_plus", "ref")
    assert split_column("ppl") == ("ppl", None)
    assert split_column("ppl+lara") == ("ppl+lara", None)
    assert split_column("lara@weird") == ("lara@weird", None)  # not one of ours
    with pytest.raises(ValueError, match="'cal' or 'ref'"):
        derived_column("ppl", "calibrated")


def test_the_roc_panels_read_the_names_through_it():
    assert roc_family(derived_column("ppl", CALIBRATED)) == roc_family("cdd@ref") == "calibrated (@cal, @ref)"
    assert roc_family("ppl") != "calibrated (@cal, @ref)"


def test_no_module_builds_a_derived_name_by_hand():
    """An f-string ending in ``}@cal"`` or ``}@ref"`` anywhere but probes/scores.py is a second
    naming function (four files had one)."""
    pattern = re.compile(r"\}@(cal|ref)[\"']")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "scores.py" or path.parent != PACKAGE
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
