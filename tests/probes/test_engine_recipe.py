"""docs/development.md's recipe for an engine, followed: a module whose ``open_engine`` builds a
responder, one ``EngineEntry`` in the registry (and, in a real change, its name in
``ModelConfig.engine``'s choices): the responder stack, the detectors and the hf fallback take it
through the registry, with no other edit."""

from __future__ import annotations

import numpy as np
import pytest

from cache.config import ModelConfig
from generation.records import Question
from probes.detectors.run import run_detectors
from probes.responders import engines
from probes.responders.local import PromptFormat
from probes.responders.open import open_responder
from tests.toy_engines import install_engine

TOY_ENGINE = '''
from cache.loading import load_model
from probes.responders.local import LocalResponder

OPENED = []


def open_engine(model, prompt_format):
    """A toy engine: the hf responder, named otherwise, supplying fewer access kinds."""
    responder = LocalResponder(load_model(model), prompt_format)
    responder.identity = {**responder.identity, "kind": "toyengine"}
    responder.access = frozenset(a for a in responder.access if a.value != "full_distribution")
    OPENED.append(model.source)
    return responder


def version():
    return "0.0.1"
'''


@pytest.fixture()
def toy_engine(tmp_path, monkeypatch):
    return install_engine(
        monkeypatch, tmp_path, "toyengine", TOY_ENGINE, "toyengine", install="pip install toyengine", title="Toy"
    )


def test_an_engine_added_by_the_recipe_runs_the_detectors(toy_engine, loaded_models, tmp_path):
    source = loaded_models["gpt2"].config.source
    config = ModelConfig(source=source, device="cpu", dtype="float32", engine="toyengine")
    assert engines.resolve_engine("toyengine") == "toyengine"
    assert engines.engine_key(config) == {"engine": "toyengine", "version": "0.0.1", "args": {}}
    prompt = PromptFormat(mode="raw", template="Q: {prompt}\nA:")
    toy = open_responder(lambda: loaded_models["gpt2"], prompt, tmp_path / "toy.sqlite", engine=config)
    hf = open_responder(loaded_models["gpt2"], prompt, tmp_path / "hf.sqlite")
    questions = [Question(f"q{i}", q) for i, q in enumerate(["What is 2 + 3?", "Ann has 4 pens. How many?"])]
    params = {"ppl": {"max_new_tokens": 6}, "policy_drift": {"n": 2, "max_new_tokens": 6}}
    got = run_detectors(["ppl", "policy_drift"], questions, toy, params=params, reference=hf)
    want = run_detectors(["ppl"], questions, hf, params=params)
    assert toy_engine.OPENED == [source] and got.info["responder"]["kind"] == "toyengine"
    np.testing.assert_allclose(got.table.columns["ppl"], want.table.columns["ppl"], rtol=1e-6)
    # policy drift needs whole distributions, which the toy engine does not supply: it ran on the hf fallback
    assert any("policy_drift: runs on the hf engine" in note for note in got.info["notes"])
