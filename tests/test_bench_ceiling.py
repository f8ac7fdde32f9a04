"""``benchmarks/bench_ceiling.py`` opens the run's models as the run's detectors do
(:func:`probes.pipeline.stages.model_access`): the audited model through the run's endpoint or
engine, the reference on hf — otherwise the ceiling and the budget table would not find the
samples the run stored, and would draw them again with another engine."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_ceiling as bench  # noqa: E402

from probes.operations.detect import opened_responders  # noqa: E402
from probes.pipeline import load_run_config  # noqa: E402


def test_the_audited_model_is_reached_through_the_runs_endpoint_and_the_reference_on_hf(tmp_path):
    endpoint = "detect.endpoint={base_url: 'http://127.0.0.1:9/v1', model: served-rl, api_key_env: null}"
    config = load_run_config(ROOT / "configs" / "demo.yaml", [f"run_dir={tmp_path}", endpoint])
    audited, reference, options = bench.run_access(config, bench.run_models(config))
    assert options.batch_size == config.detect.batch_size and options.decoding == config.detect.decoding
    with opened_responders(audited, reference, options) as (served, local):
        assert served.identity["kind"] == "openai" and served.identity["model"] == "served-rl"
        assert local.identity["kind"] == "local"
        assert Path(served.store.path).parent == tmp_path / config.name  # the run's own stores
        assert Path(local.store.path).parent == tmp_path / config.reference_name()


def test_a_config_without_a_run_dir_keeps_its_stores_where_its_run_would(tmp_path, monkeypatch):
    """A config built in code may leave ``run_dir`` unset: ``lara run`` then writes to runs/run, and
    the models' stores must be found there too (they were a TypeError)."""
    import dataclasses

    from probes.pipeline.stages import config_model_access

    monkeypatch.chdir(tmp_path)
    config = dataclasses.replace(load_run_config(ROOT / "configs" / "demo.yaml"), run_dir=None)
    access = config_model_access(config, config.name, bench.run_models(config)[config.name])
    assert Path(access.store) == Path("runs/run") / config.name / "responses.sqlite"
    assert config.run_path == Path("runs/run")  # where lara run writes (probes.pipeline.run)
