from __future__ import annotations

import pytest

from cache.config import CacheConfig, ExtractionConfig, ModelConfig
from cache.errors import ConfigError
from cache.layers import resolve_layers


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_yaml_round_trip_and_overrides(tmp_path):
    path = write(
        tmp_path, "model:\n  source: /m\n  dtype: bfloat16\nextraction:\n  layers: [embed, 0, -1]\n  batch_size: 8\n"
    )
    config = CacheConfig.from_yaml(path, overrides={"extraction": {"batch_size": 64}})
    assert config.model == ModelConfig(source="/m", dtype="bfloat16")
    assert config.extraction.layers == ("embed", "0", "-1")
    assert config.extraction.batch_size == 64


@pytest.mark.parametrize(
    "body,message",
    [
        ("model:\n  source: /m\n  dtpye: float16\n", "unknown config key 'model.dtpye'; did you mean 'dtype'?"),
        ("model:\n  source: /m\nextraction:\n  batchsize: 3\n", "unknown config key 'extraction.batchsize'"),
        ("modle:\n  source: /m\n", "unknown config key 'modle'; did you mean 'model'?"),
        ("model:\n  source: /m\n  dtype: float8\n", "'model.dtype' must be one of"),
        ("model:\n  source: /m\nextraction:\n  batch_size: '32'\n", "'extraction.batch_size' must be of type int"),
        ("model:\n  source: /m\nextraction:\n  batch_size: 0\n", "extraction.batch_size must be >= 1"),
        ("model:\n  source: /m\n  trust_remote_code: 'yes'\n", "'model.trust_remote_code' must be true or false"),
        ("extraction:\n  backend: hf\n", "missing required config key 'model'"),
        ("model:\n  dtype: auto\n", "missing required config key 'model.source'"),
        ("model:\n  source: /m\n  device: cuda\n  device_map: auto\n", "either model.device or model.device_map"),
        ("- a\n- b\n", "must hold a mapping at top level"),
    ],
)
def test_bad_configs_name_the_key(tmp_path, body, message):
    with pytest.raises(ConfigError) as err:
        CacheConfig.from_yaml(write(tmp_path, body))
    assert message in str(err.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        CacheConfig.from_yaml(tmp_path / "none.yaml")
    with pytest.raises(ConfigError, match="cannot parse"):
        CacheConfig.from_yaml(write(tmp_path, "model: [unclosed\n"))


def test_trust_remote_code_is_off_by_default():
    assert ModelConfig(source="/m").trust_remote_code is False


def test_layer_strings():
    assert ExtractionConfig(layers=("0,5, 10",)).layers == ("0", "5", "10")
    assert ExtractionConfig(layers="all").layers == ("all",)
    with pytest.raises(ConfigError):
        ExtractionConfig(layers=())


def test_resolve_layers():
    sel = resolve_layers(["final_norm", "-1", "0", "embed", "0"], n_blocks=4)
    assert sel.labels == ("embed", "0", "3", "final_norm")
    assert sel.deepest_block == 3 and sel.runs_to_end
    early = resolve_layers(["1"], n_blocks=4)
    assert early.deepest_block == 1 and not early.runs_to_end
    assert resolve_layers(["all"], 3).labels == ("0", "1", "2")
    assert resolve_layers(["embed"], 3).deepest_block == 0
    with pytest.raises(ConfigError, match="layer 4 is out of range: the model has 4 blocks"):
        resolve_layers(["4"], 4)
    with pytest.raises(ConfigError, match="unknown layer 'middle'"):
        resolve_layers(["middle"], 4)
