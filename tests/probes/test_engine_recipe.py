"""docs/development.md's recipe for an engine, followed: a module whose ``open_engine`` builds a
responder, and the page's one ``EngineEntry`` in the registry, declaring its arguments. The real
config loader, ``lara detect``'s flags, the responder stack, the detectors and the hf fallback
take it through the registry, with no other edit (issue 57, item 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from generation.records import Question
from lara_core.params import COUNT, Flag
from probes.cli import main
from probes.detectors.run import run_detectors
from probes.errors import ConfigError
from probes.pipeline import load_run_config
from probes.responders import engines
from probes.responders.base import Access
from probes.responders.local import PromptFormat
from probes.responders.model_settings import ModelSettings
from probes.responders.open import open_responder
from probes.responders.registry import EngineEntry
from tests.docs_recipes import recipe_blocks
from tests.toy_engines import install_engine

TOY_ENGINE = '''
from cache.loading import load_model
from probes.responders.local import LocalResponder

OPENED = []


def open_engine(model, prompt_format):
    """A toy engine: the hf responder, named by its argument ``workers``."""
    responder = LocalResponder(load_model(model), prompt_format)
    responder.identity = {**responder.identity, "kind": f"myengine-{model.engine_args.get('workers', 1)}"}
    responder.access = frozenset(a for a in responder.access if a.value != "full_distribution")
    OPENED.append(model.source)
    return responder


def version():
    return "0.0.1"
'''


def page_entry() -> EngineEntry:
    """The ``EngineEntry`` docs/development.md writes, as the page writes it."""
    (code,) = recipe_blocks("## Adding an engine").values()
    namespace = {"EngineEntry": EngineEntry, "Access": Access, "COUNT": COUNT, "Flag": Flag}
    (entry,) = eval("{" + code + "}", namespace).values()
    return entry


@pytest.fixture()
def toy_engine(tmp_path, monkeypatch):
    """The page's entry, its module a toy (the page's ``package`` is not installed here)."""
    entry = page_entry()
    fields = {k: getattr(entry, k) for k in ("supplies", "exact", "install", "title", "parameters")}
    return install_engine(monkeypatch, tmp_path, "myengine", TOY_ENGINE, entry.name, **fields)


def test_an_engine_added_by_the_recipe_runs_the_detectors(toy_engine, loaded_models, tmp_path):
    source = loaded_models["gpt2"].config.source
    config = ModelSettings(source=source, device="cpu", dtype="float32", engine="myengine", engine_args={"workers": 2})
    assert engines.resolve_engine("myengine") == "myengine"
    assert engines.engine_key(config) == {"engine": "myengine", "version": "0.0.1", "args": {"workers": 2}}
    prompt = PromptFormat(mode="raw", template="Q: {prompt}\nA:")
    toy = open_responder(lambda: loaded_models["gpt2"], prompt, tmp_path / "toy.sqlite", engine=config)
    hf = open_responder(loaded_models["gpt2"], prompt, tmp_path / "hf.sqlite")
    questions = [Question(f"q{i}", q) for i, q in enumerate(["What is 2 + 3?", "Ann has 4 pens. How many?"])]
    params = {"ppl": {"max_new_tokens": 6}, "policy_drift": {"n": 2, "max_new_tokens": 6}}
    got = run_detectors(["ppl", "policy_drift"], questions, toy, params=params, reference=hf)
    want = run_detectors(["ppl"], questions, hf, params=params)
    assert toy_engine.OPENED == [source] and got.info["responder"]["kind"] == "myengine-2"
    np.testing.assert_allclose(got.table.columns["ppl"], want.table.columns["ppl"], rtol=1e-6)
    # policy drift needs whole distributions, which the toy engine does not supply: it ran on the hf fallback
    assert any("policy_drift: runs on the hf engine" in note for note in got.info["notes"])


def test_the_real_config_loader_reads_the_engine_and_its_declared_arguments(toy_engine, tmp_path):
    path = tmp_path / "audit.yaml"
    path.write_text("questions: q.jsonl\nmodel: {source: m, engine: myengine, engine_args: {workers: 4}}\n")
    model = load_run_config(path).model
    assert (model.engine, model.engine_args) == ("myengine", {"workers": 4})
    assert engines.engine_key(model) == {"engine": "myengine", "version": "0.0.1", "args": {"workers": 4}}
    for override, message in [
        (
            "model.engine_args.worker=3",
            "model.engine_args: engine 'myengine' has no argument 'worker'; did you mean 'workers'?",
        ),
        ("model.engine_args.workers=0", "model.engine_args.workers: must be an integer ≥ 1, got 0"),
        ("model.engine_args.eager=yes please", 'model.engine_args.eager: must be true or false, got "yes please"'),
        ("model.engine=myengin", "model.engine 'myengin': choose auto, hf, vllm, myengine"),
    ]:
        with pytest.raises(ConfigError) as err:
            load_run_config(path, [override])
        assert message in str(err.value) and "\n" not in str(err.value)


def test_lara_detect_runs_an_engine_added_by_the_recipe_with_its_arguments(toy_engine, toy_dirs, tmp_path, capsys):
    source = str(toy_dirs["gpt2"])
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "What is 2 + 3?"}\n{"id": "b", "question": "Ann has 4 pens."}\n')
    argv = ["detect", "ppl", str(questions), "--model", source, "--device", "cpu", "--prompt-format", "raw"]
    argv += ["--param", "ppl.max_new_tokens=4", "--store", str(tmp_path / "s.sqlite"), "--no-progress"]
    out = tmp_path / "scores.csv"
    assert main([*argv, "--engine", "myengine", "--engine-arg", "workers=3", "-o", str(out)]) == 0
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert toy_engine.OPENED == [source] and meta["responder"]["kind"] == "myengine-3"
    capsys.readouterr()
    assert main([*argv, "--engine", "myengine", "--engine-arg", "worker=3", "-o", str(out)]) == 2
    assert "has no argument 'worker'; did you mean 'workers'?" in capsys.readouterr().err
    assert main([*argv, "--engine", "myengine", "--engine-arg", "workers", "-o", str(out)]) == 2
    assert "--engine-arg 'workers': expected KEY=VALUE" in capsys.readouterr().err
    assert toy_engine.OPENED == [source]  # each refused before the engine opened


def test_the_old_vllm_block_is_read_as_engine_args_with_a_deprecation_warning(tmp_path, caplog):
    """A config written before engines were named by name and arguments keeps working, with the
    same detect key (its arguments were and are the key's ``args``)."""
    path = tmp_path / "audit.yaml"
    path.write_text("questions: q.jsonl\nmodel: {source: m, engine: hf, vllm: {}}\n")
    with caplog.at_level("WARNING"):
        model = load_run_config(path, ["model.engine=auto", "model.vllm.tensor_parallel_size=2"]).model
    assert model.engine_args == {"tensor_parallel_size": 2}
    assert "model.vllm is deprecated: write model.engine_args" in caplog.text
    with pytest.raises(ConfigError, match="both set: keep engine_args alone"):
        load_run_config(path, ["model.engine_args.tensor_parallel_size=2"])
    with pytest.raises(ConfigError, match="model.engine_args: engine 'hf' has no argument 'tensor_parallel_size'"):
        load_run_config(path, ["model.vllm.tensor_parallel_size=2"])  # hf takes no arguments
