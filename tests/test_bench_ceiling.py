"""``benchmarks/bench_ceiling.py`` opens the run's models as the run's detectors do
(:func:`probes.pipeline.stages.model_access`): the audited model through the run's endpoint or
engine, the reference on hf — otherwise the ceiling and the budget table would not find the
samples the run stored, and would draw them again with another engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

bench = pytest.importorskip("bench_ceiling")

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
