"""docs/development.md's recipe for a detector, followed to the letter: the module its code block
gives and the one-line edit of ``probes/detectors/__init__.py`` (its import, its name in ``ORDER``)
are all a new detector needs to run through ``lara detect``, the registry's listings and the
generated docs table."""

from __future__ import annotations

import importlib.util
import re
import sys

import numpy as np
import pytest

from probes.cli import main
from probes.detectors import ORDER, REGISTRY
from probes.detectors.base import order_registry
from probes.detectors.selection import detector_names
from probes.detectors.table import detector_table
from probes.scores import ScoreTable
from tests.docs_recipes import recipe_blocks


@pytest.fixture()
def recipe_detector(tmp_path):
    blocks = recipe_blocks("## Adding a detector")
    assert set(blocks) == {"probes/detectors/length.py", "probes/detectors/__init__.py"}  # two files, no more
    module_file = tmp_path / "length.py"
    module_file.write_text(blocks["probes/detectors/length.py"])
    spec = importlib.util.spec_from_file_location("probes.detectors.length", module_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    saved = dict(REGISTRY)
    try:
        spec.loader.exec_module(module)  # what `from .length import AnswerLength` does
        added = re.search(r'ORDER = \(\.\.\., "(\w+)"\)', blocks["probes/detectors/__init__.py"]).group(1)
        order_registry((*ORDER, added))  # what the name in ORDER does
        yield added
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)
        del sys.modules[spec.name]


def test_the_recipe_s_detector_runs_through_lara_detect(recipe_detector, audit, tmp_path, capsys):
    assert recipe_detector == "answer_length" and list(REGISTRY)[-1] == "answer_length"
    assert "answer_length" in detector_names("all")
    assert "| `answer_length` | tokens of the greedy answer |" in detector_table()
    out = tmp_path / "scores.csv"
    argv = ["detect", "ppl,answer_length", str(audit.questions), "--model", str(audit.model_dir), "--device", "cpu"]
    argv += ["--prompt-format", "raw", "--template", "Q: {prompt}\nA:", "--param", "answer_length.max_new_tokens=6"]
    argv += ["--param", "ppl.max_new_tokens=6", "--store", str(tmp_path / "s.sqlite"), "-o", str(out), "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    table, raw = ScoreTable.read_csv(out), ScoreTable.read_csv(out.with_suffix(".raw.csv"))
    assert list(table.columns) == ["ppl", "answer_length"]
    tokens = raw.columns["answer_tokens"]
    assert ((tokens >= 0) & (tokens <= 6)).all() and (tokens == 6).any()
    assert np.array_equal(table.columns["answer_length"], -tokens)
    bad = [a.replace("answer_length.max_new_tokens=6", "answer_length.max_new_tokens=0") for a in argv]
    assert main(bad) == 2
    assert "answer_length.max_new_tokens: must be an integer ≥ 1, got 0" in capsys.readouterr().err


def test_the_recipe_s_detector_is_in_the_generic_check_suite_and_passes_it(recipe_detector, two_models, tmp_path):
    """No test file names it: the suite's parametrisation, read from the registry, holds it."""
    from tests.detector_checks import CHECKS, detector_checks

    mine = [check for name, check in detector_checks() if name == recipe_detector]
    assert mine == list(CHECKS)
    for check in mine:
        check(recipe_detector, two_models, tmp_path / check.__name__)


def _variant(base: type, name: str, **changes) -> type:
    """The recipe's detector under another name, with ``changes`` (class attributes)."""
    from probes.detectors.base import register

    return register(type(f"Faulty_{name}", (base,), {"name": name, **changes}))


def test_the_generic_checks_fail_on_planted_faults(recipe_detector, two_models, tmp_path):
    """Each check fails on its planted fault: a detector reading token ids it does not declare, one
    returning its scores in another order, one drawing unseeded randomness, one not turning its raw
    statistic by its direction, one scoring "no answer" as 0, one whose default its constraint
    refuses; and without a declared direction the detector is refused where it registers, so the
    suite cannot even be collected."""
    from lara_core.params import COUNT, Param
    from probes.detectors.base import register
    from probes.responders.base import Access
    from tests.detector_checks import (
        check_asks_only_what_it_declares,
        check_direction_is_the_declared_one,
        check_nan_is_passed_through_and_counted,
        check_one_score_per_question_in_order,
        check_parameters_round_trip,
        check_seeded_runs_are_identical,
    )

    base = REGISTRY[recipe_detector]

    def reordered(self, questions, responder):
        base.score(self, questions, responder)
        return self._result([len(q) for q in questions][::-1])  # distinct values, in another order

    def unseeded(self, questions, responder):
        result = base.score(self, questions, responder)
        result.raw = result.raw + np.random.default_rng().normal(size=len(result.raw))
        result.scores = -result.raw
        return result

    def unturned(self, raw, **kwargs):
        result = base._result(self, raw, **kwargs)
        result.scores = result.raw.copy()  # "lower = member" declared, the raw statistic returned as the score
        return result

    def zero_for_nan(self, raw, **kwargs):
        result = base._result(self, raw, **kwargs)
        result.scores = np.nan_to_num(result.scores)  # "no answer" turned into a number
        return result

    faults = [  # (the check that must fail, the planted fault)
        (check_asks_only_what_it_declares, {"needs": frozenset({Access.SAMPLING})}),
        (check_one_score_per_question_in_order, {"score": reordered}),
        (check_seeded_runs_are_identical, {"score": unseeded}),
        (check_direction_is_the_declared_one, {"_result": unturned}),
        (check_nan_is_passed_through_and_counted, {"_result": zero_for_nan}),
        (check_parameters_round_trip, {"max_new_tokens": Param(0, COUNT)}),  # a default its constraint refuses
    ]
    for k, (check, fault) in enumerate(faults):
        faulty = _variant(base, f"faulty_{k}", **fault)
        with pytest.raises(AssertionError):
            check(faulty.name, two_models, tmp_path / check.__name__)

    no_direction = {k: v for k, v in vars(base).items() if k not in ("raw_column", "raw_name", "raw_direction")}
    with pytest.raises(ValueError, match="declare its natural statistic as raw_column"):
        register(type("NoDirection", (base.__mro__[1],), {**no_direction, "name": "no_direction"}))
