"""Declared detector parameters (issue 35, item 3): every detector states each hyperparameter's
type and range once; one validator refuses a bad value with one line naming the key, before any
model loads — from the Python API, ``lara detect --param`` and a run config alike. Before, CDD's
``n = 2.5`` passed its range check and ended in a TypeError at ``range(n)`` after the model had
loaded, and ``n = "20"`` in a TypeError inside the check itself."""

from __future__ import annotations

import json

import pytest

from lara_core.params import COUNT, SHARE, Interval, Options, Text
from probes.cli import main
from probes.detectors import REGISTRY, Detector, get_detector
from probes.errors import ConfigError

BAD_N = ((2.5, "2.5"), ("20", '"20"'), ("abc", '"abc"'))


def test_every_detector_declares_each_parameter_once_and_its_defaults_hold():
    """A parameter is one ``Param`` class attribute (before: the ``parameters`` table, the
    ``__init__`` signature and its assignments — three times); the constructor is the base's."""
    for name, cls in REGISTRY.items():
        assert cls.__init__ is Detector.__init__, name
        built = cls()
        assert list(built.get_params()) == list(cls.parameters) == list(cls.declared), name
        for param, declaration in cls.declared.items():
            assert cls.parameters[param].holds(declaration.default), (name, param)
            assert getattr(built, param) == declaration.default, (name, param)


def test_a_detector_built_directly_is_checked_too():
    """Before, only ``get_detector`` checked: ``CDD(n="20")`` built, and failed later in a sampler."""
    from probes.detectors import CDD, MinKNN

    with pytest.raises(ConfigError, match='^cdd.n: must be an integer ≥ 1, got "20"$'):
        CDD(n="20")
    with pytest.raises(ConfigError, match="has no parameter nn"):
        MinKNN(nn=3)
    assert CDD(n=20).n == 20 and MinKNN(k=3).get_params()["k"] == 3


def test_constraints_describe_themselves_as_the_message_prints_them():
    assert COUNT.describe() == "an integer ≥ 1" and SHARE.describe() == "a number in (0, 1]"
    assert Interval(integer=False, low=0, high=1, closed="left").describe() == "a number in [0, 1)"
    assert Interval(integer=False, low=0, closed="neither").describe() == "a number > 0"
    assert Options(("tokens", "characters")).describe() == "one of tokens, characters"
    assert Text(optional=True).describe() == "a string or null"
    assert not COUNT.holds(True) and not COUNT.holds(1.0) and COUNT.holds(3)
    assert not Interval(integer=False).holds(float("nan")) and Interval(integer=False).holds(2)


@pytest.mark.parametrize("value,shown", BAD_N)
def test_the_python_api_refuses_a_bad_value_naming_the_key(value, shown):
    with pytest.raises(ConfigError) as err:
        get_detector("cdd", n=value)
    assert str(err.value) == f"cdd.n: must be an integer ≥ 1, got {shown}"
    with pytest.raises(ConfigError, match=r"^min_knn.unit: must be one of tokens, characters, got \"words\"$"):
        get_detector("min_knn", unit="words")
    with pytest.raises(
        ConfigError, match="k = 9, but it must be between 1 and n = 4"
    ):  # a rule tying two: the detector's own
        get_detector("min_knn", n=4, k=9)


@pytest.mark.parametrize("value,shown", BAD_N)
def test_lara_detect_refuses_before_the_model_loads(value, shown, tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "Ann has 3 pens. How many?"}) + "\n")
    missing_model = tmp_path / "no-such-checkpoint"  # had it been loaded first, the error would name it
    assert (
        main(
            [
                "detect",
                "cdd",
                str(questions),
                "--model",
                str(missing_model),
                "--param",
                f"cdd.n={json.dumps(value)}",
                "-o",
                str(tmp_path / "s.csv"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err == f"error: cdd.n: must be an integer ≥ 1, got {shown}"


@pytest.mark.parametrize("value,shown", BAD_N)
def test_a_run_config_is_refused_when_read(value, shown, tmp_path, capsys):
    from tests.pipeline.test_configs import CONFIGS

    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "run",
                str(CONFIGS / "demo.yaml"),
                "--set",
                f"run_dir={run_dir}",
                "--set",
                f"detect.params.cdd.n={json.dumps(value)}",
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"detect.params.cdd.n: must be an integer ≥ 1, got {shown}" in err
    assert not (run_dir / "sets.jsonl").exists()


def test_a_second_detector_under_a_taken_name_is_refused():
    """Issue 35, item 4 (lm-evaluation-harness's registry): before, ``register`` silently replaced
    the first class, so a plugin could shadow a built-in detector."""
    from probes.detectors.base import register
    from probes.detectors.likelihood import PPL

    class Shadow(PPL):
        name = "ppl"

    with pytest.raises(ValueError, match="detector name 'ppl' is taken by probes.detectors.likelihood.PPL"):
        register(Shadow)
    assert REGISTRY["ppl"] is PPL


def test_a_detector_that_does_not_say_what_it_computes_is_refused():
    """The docs' table is made from each detector's ``statistic``: a detector without one would
    leave an empty cell, so it cannot register."""
    from probes.detectors.base import Detector, register

    class Unexplained(Detector):
        name = "unexplained"
        raw_column = "x", "higher = member"

    with pytest.raises(ValueError, match="say what it computes in `statistic`"):
        register(Unexplained)
    assert "unexplained" not in REGISTRY


@pytest.mark.parametrize(
    "column, message",
    [(None, "declare its natural statistic as raw_column"), (("x", "up"), "not 'up'")],
)
def test_a_detector_without_a_raw_column_and_its_direction_is_refused(column, message):
    from probes.detectors.base import Detector, register

    class Unoriented(Detector):
        name = "unoriented"
        statistic = "x"

    if column is not None:
        Unoriented.raw_column = column
    with pytest.raises(ValueError, match=message):
        register(Unoriented)
    assert "unoriented" not in REGISTRY


# each sampling detector's sampled answers, from the papers' settings (SPEC §5): budget, T, top-p
SAMPLED = {
    "cdd": (100, 0.8, 1.0),
    "min_knn": (1024, 0.7, 0.95),
    "entropy_temp": (1024, 1.0, 1.0),
    "policy_drift": (1024, 0.7, 0.95),
    "reward_gain": (1024, 0.7, 0.95),
}


@pytest.mark.parametrize("name", sorted(SAMPLED))
def test_a_sampling_detector_samples_with_its_own_declared_parameters(name):
    """The sampling parameters are declared once, as ``Param``s, and read from there (issue 43,
    item 8): the detector's defaults, and a value given at construction, reach the sampler."""
    from probes.responders.base import GenerationParams

    budget, temperature, top_p = SAMPLED[name]
    built = REGISTRY[name](n=12, seed=7)
    assert built.sampling_params() == GenerationParams(budget, temperature, top_p, n=12, seed=7)
    other = REGISTRY[name](temperature=0.3, **{"max_tokens" if name == "cdd" else "max_new_tokens": 9})
    assert other.sampling_params() == GenerationParams(9, 0.3, top_p, n=REGISTRY[name].declared["n"].default)
