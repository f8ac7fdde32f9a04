"""Every shipped config loads and validates; config errors name the bad key in one line."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from cache.config import CacheConfig
from generation.config import GenerationConfig
from probes.cli import main
from probes.errors import ConfigError
from probes.pipeline import load_run_config
from probes.pipeline.config import RunConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RUN_CONFIGS = ["demo.yaml", "demo-gsm.yaml", "demo-smollm.yaml", "eurus-2-7b-prime.yaml", "eurus-2-7b-prime.vllm.yaml"]


def test_every_shipped_config_is_covered():
    shipped = {p.name for p in CONFIGS.glob("*.yaml")}
    covered = set(RUN_CONFIGS) | {
        "cache.example.yaml",
        "generation.local-vllm.yaml",
        "generation.openrouter.yaml",
        "vllm-serve.eurus-2-7b-prime.yaml",
    }
    assert shipped == covered


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_run_configs_validate(name):
    config = load_run_config(CONFIGS / name)
    assert isinstance(config, RunConfig)
    assert Path(config.run_dir).is_absolute()
    assert Path(config.questions).is_absolute()


def test_the_demo_config_points_at_the_shipped_checkpoints():
    config = load_run_config(CONFIGS / "demo.yaml")
    for _, model in config.models():
        assert (Path(model.source) / "model.safetensors").is_file(), model.source
    assert Path(config.questions).is_file()
    assert [n for n, _ in config.models()] == ["rl", "sft_control"]
    assert config.generation.backend == "offline"


def test_the_paper_config_reproduces_the_papers_setup():
    config = load_run_config(CONFIGS / "eurus-2-7b-prime.yaml")
    g = config.generation
    assert (g.similars, g.paraphrases, g.blanks) == (5, 5, 1)
    assert g.openai.model == "openai/gpt-4o-mini" and "openrouter.ai" in g.openai.base_url
    assert config.model.dtype == "bfloat16" and config.extraction.layers == ("all",)
    assert config.score.metric_set == ("zRSM", "DC", "zRSI") and config.score.layers == "all"
    assert "self_critique" in config.detect.names
    assert config.fusion[0].detectors == ("self_critique", "lara")
    assert config.model.source.count("/") == 1  # a hub id is left alone, not made a path


def test_the_vllm_server_config_matches_the_run_config_that_uses_it():
    serve = yaml.safe_load((CONFIGS / "vllm-serve.eurus-2-7b-prime.yaml").read_text())
    run = load_run_config(CONFIGS / "eurus-2-7b-prime.vllm.yaml")
    endpoint = run.detect.endpoint
    assert endpoint is not None
    assert serve["served-model-name"] == endpoint.model
    url = urlparse(endpoint.base_url)
    assert url.port == serve["port"] and url.hostname == serve["host"]
    assert serve["max-logprobs"] >= endpoint.top_logprobs
    assert serve["model"] == run.model.source


def test_other_shipped_configs_validate():
    CacheConfig.from_yaml(CONFIGS / "cache.example.yaml")
    for name in ("generation.local-vllm.yaml", "generation.openrouter.yaml"):
        GenerationConfig.from_yaml(CONFIGS / name)


def test_a_misspelled_key_is_named_with_the_valid_ones(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("questions: q.jsonl\nmodel: {source: m}\nscore: {clean_reff: split}\n")
    with pytest.raises(
        Exception, match=r"unknown config key 'score.clean_reff'; did you mean 'clean_ref'\?.*Valid keys:"
    ):
        load_run_config(path)
    with pytest.raises(Exception, match="unknown config key 'generation.similar'"):
        load_run_config(CONFIGS / "demo.yaml", ["generation.similar=3"])


def test_set_overrides_and_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_run_config(
        CONFIGS / "demo.yaml",
        ["generation.similars=3", "detect.names=[ppl, cdd]", "run_dir=here", "score.clean_ref=crossfit"],
    )
    assert config.generation.similars == 3 and config.detect.names == ("ppl", "cdd")
    assert Path(config.run_dir) == tmp_path / "here"  # --set paths are relative to the current directory
    assert config.score.clean_ref == "crossfit"
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_run_config(CONFIGS / "demo.yaml", ["generation.similars"])


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    return err


def test_cli_errors_are_one_line(tmp_path, capsys):
    err = _one_line_error(capsys, ["run", str(tmp_path / "missing.yaml")])
    assert "not found" in err and "missing.yaml" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("questions: q.jsonl\nmodel: {source: m}\ndetcet: {}\n")
    err = _one_line_error(capsys, ["run", str(bad)])
    assert "'detcet'" in err and "did you mean 'detect'" in err
    err = _one_line_error(
        capsys,
        [
            "run",
            str(CONFIGS / "demo.yaml"),
            "--set",
            f"questions={tmp_path / 'none.jsonl'}",
            "--set",
            f"run_dir={tmp_path / 'run'}",
        ],
    )
    assert "questions file not found" in err


def test_a_model_that_is_not_a_causal_lm_is_one_line(tmp_path, capsys):
    from transformers import BertConfig, BertModel

    from cache.toymodels import train_tokenizer

    bert = tmp_path / "bert"
    BertModel(
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=128)
    ).save_pretrained(bert)
    train_tokenizer(128).save_pretrained(bert)
    q = tmp_path / "q.jsonl"
    q.write_text(
        '{"id": "a", "question": "What is 12 + 7?", "label": 1}\n{"id": "b", "question": "What is 3 + 4?", "label": 0}\n'
    )
    err = _one_line_error(
        capsys,
        [
            "run",
            str(CONFIGS / "demo.yaml"),
            "--set",
            f"model.source={bert}",
            "--set",
            "controls=[]",
            "--set",
            "detect.names=[ppl]",  # without controls, ref has no reference model
            "--set",
            "lara=false",
            "--set",
            "fusion=[]",  # two questions: no clean reference
            "--set",
            f"questions={q}",
            "--set",
            f"run_dir={tmp_path / 'run'}",
            "--no-progress",
        ],
    )
    assert "not a causal language model" in err
    err = _one_line_error(capsys, ["detect", "ppl", str(q), "--model", str(bert), "-o", str(tmp_path / "s.csv")])
    assert "not a causal language model" in err


def test_the_generate_stage_key_follows_template_content_and_generator_code(tmp_path, monkeypatch):
    """Before, the key held template *file names* only: a template edited in place, or an upgrade of
    the offline generator, left the old sets "up to date" (issue 21, item 9)."""
    import shutil

    import generation.source_digest
    from generation.config import default_prompts_dir
    from probes.pipeline import stages
    from probes.pipeline.config import config_from_dict
    from probes.pipeline.ledger import stage_key

    templates = tmp_path / "templates"
    shutil.copytree(default_prompts_dir(), templates)
    llm = config_from_dict(
        {
            "questions": "q.jsonl",
            "model": {"source": "m"},
            "detect": {"names": ["ppl"]},
            "generation": {
                "backend": "openai",
                "openai": {
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "x",
                    "templates": {"similars": str(templates / "similar_questions.v1.txt")},
                },
            },
        }
    )
    before = stage_key(stages.generate_inputs(llm, "q"))
    assert stage_key(stages.generate_inputs(llm, "q")) == before  # deterministic
    path = templates / "similar_questions.v1.txt"
    path.write_text(path.read_text() + "\nBe concise.\n")  # edited in place, same file name
    assert stage_key(stages.generate_inputs(llm, "q")) != before

    offline = config_from_dict({"questions": "q.jsonl", "model": {"source": "m"}, "detect": {"names": ["ppl"]}})
    before = stage_key(stages.generate_inputs(offline, "q"))
    monkeypatch.setattr(generation.source_digest, "_CODE_DIGEST", "0123456789abcdef")  # the generator's code changed
    assert stage_key(stages.generate_inputs(offline, "q")) != before


@pytest.mark.parametrize(
    "override,key",
    [
        ("extraction.backend=hff", "extraction.backend 'hff'"),
        ("detect.names=[ppl,cdd,min_knnn]", "detect.names: unknown detector 'min_knnn' (did you mean 'min_knn'?)"),
        ("detect.params.cdd.nn=20", "detect.params.cdd: detector 'cdd' has no parameter nn"),
        ("fusion=[{detectors: [ppl, self_critque]}]", "fusion[0].detectors: no score column 'self_critque'"),
        ("score.clean_ref=crossfit", "score.clean_ref 'crossfit': no question is labelled 0"),
    ],
)
def test_a_bad_key_is_refused_before_stage_one_naming_the_key(override, key, tmp_path, capsys):
    """Before: each of these failed only when its stage was reached — after generation and model
    loading, hours on a 70B model (issue 21, item 13)."""
    import json

    questions = tmp_path / "q.jsonl"
    rows = [
        {"id": f"m{i}", "question": f"Ann has {i + 2} pens and buys {i + 3} more. How many pens?", "label": 1}
        for i in range(6)
    ]
    questions.write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )  # members only: no clean reference for LaRA's crossfit
    run_dir = tmp_path / "run"
    argv = [
        "run",
        str(CONFIGS / "demo.yaml"),
        "--set",
        f"questions={questions}",
        "--set",
        f"run_dir={run_dir}",
        "--set",
        "verdict.subsets=[members]",
        "--set",
        override,
        "--no-progress",
    ]
    if "clean_ref" not in override:  # give LaRA its clean reference so only the key under test is wrong
        rows.append({"id": "c0", "question": "Bo has 4 cups and 5 plates. How many things?", "split": "clean_ref"})
        questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    err = _one_line_error(capsys, argv)
    assert key in err and " --" not in err  # config keys, not CLI flags
    assert not (run_dir / "sets.jsonl").exists() and "loaded" not in (run_dir / "run.log").read_text()


def test_a_bad_score_aggregation_is_refused_when_the_config_is_read(tmp_path, capsys):
    """Before: ``score.metric_set: [bogus]`` passed loading and validation and was refused only at
    the score stage, after generation, caching and the metrics."""
    run_dir = tmp_path / "run"
    err = _one_line_error(
        capsys,
        [
            "run",
            str(CONFIGS / "demo.yaml"),
            "--set",
            f"run_dir={run_dir}",
            "--set",
            "score.metric_set=[zRSM,bogus]",
            "--no-progress",
        ],
    )
    assert "score: metric set ['zRSM', 'bogus']: choose from zRSM, DC, zRSI" in err and not run_dir.exists()


def test_unusual_valid_configs_pass_validation(tmp_path):
    """A fusion of an earlier fusion's column, a LaRA variant in the verdict, and an audit without
    labels asking for label subsets (said in the log, not refused)."""
    import json

    from generation.records import read_questions
    from probes.pipeline.validate import validate_run

    questions = tmp_path / "q.jsonl"
    rows = [
        {"id": f"q{i}", "question": f"Ann has {i + 2} pens. How many?", "split": "clean_ref" if i < 3 else None}
        for i in range(8)
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = load_run_config(
        CONFIGS / "demo.yaml",
        [
            f"questions={questions}",
            "controls=[]",
            "detect.names=[ppl,cdd]",
            "fusion=[{detectors: [ppl, cdd], name: out}, {detectors: [out, lara]}]",
            "verdict.detectors=[ppl, lara_zrsm]",
        ],
    )
    validate_run(config, read_questions(questions))


@pytest.mark.parametrize(
    "override,message",
    [
        # issue 35: one line naming the key, from each parameter's declared type and range
        (
            "detect.params.ppl.target=answer",
            'detect.params.ppl.target: must be one of response, question, got "answer"',
        ),
        ("detect.params.min_k.k=20", "detect.params.min_k.k: must be a number in (0, 1], got 20"),
        ("detect.params.cdd.n=0", "detect.params.cdd.n: must be an integer ≥ 1, got 0"),
        (
            "detect.params.min_knn.k=40",
            "detect.params.min_knn: detector 'min_knn': k = 40, but it must be between 1 and n = 8",
        ),
        # issue 33: the testbed's GPT-2 has no chat template (before: a traceback from the local reference at the detect stage)
        ("detect.prompt_format=chat", "detect.prompt_format 'chat': model 'rl'"),
        # issue 33: a served audited model cannot share tokens with the local reference (before: refused after stage 1)
        (
            "detect.endpoint={base_url: 'http://127.0.0.1:9/v1', model: x}",
            "detect.endpoint: detector 'ref' compares log-probs",
        ),
        # issue 33: an engine that is not installed (skipped where the vllm extra is)
        pytest.param(
            "model.engine=vllm",
            "model.engine: model.engine 'vllm' needs vLLM, which is not installed",
            marks=pytest.mark.skipif(
                __import__("importlib").util.find_spec("vllm") is not None, reason="vllm installed"
            ),
        ),
    ],
)
def test_detector_parameter_values_are_checked_before_stage_one(override, message, tmp_path, capsys):
    err = _one_line_error(
        capsys,
        ["run", str(CONFIGS / "demo.yaml"), "--set", f"run_dir={tmp_path / 'run'}", "--set", override, "--no-progress"],
    )
    assert message in err and not (tmp_path / "run" / "sets.jsonl").exists()


def test_the_resolved_config_reloads_to_the_same_prompt_texts(tmp_path):
    """config.resolved.yaml is read again with the prompt-text rule: a backslash must survive it."""
    from probes.pipeline.config import dump_config

    config = load_run_config(CONFIGS / "demo.yaml", ["detect.template='\\\\neq Q: {prompt}\\nA:'"])
    assert config.detect.template == "\\neq Q: {prompt}\nA:"
    (tmp_path / "resolved.yaml").write_text(dump_config(config))
    assert load_run_config(tmp_path / "resolved.yaml").detect.template == config.detect.template


def test_chunks_of_a_detector_pass_are_whole_batches_when_small():
    from probes.responders.store import prompts_per_chunk

    assert prompts_per_chunk(16, 50) == 8 and prompts_per_chunk(64, 20) == 16 and prompts_per_chunk(64, 8) == 8
    assert prompts_per_chunk(16, 1) == 16 and prompts_per_chunk(64, 49) == 1 and prompts_per_chunk(8, 50) == 4


def test_a_comma_separated_list_on_the_command_line_is_a_list():
    """Issue 35, item 8: ``--set detect.names=ppl,min_k`` was read as one detector named "ppl,min_k"
    (refused as unknown); the CLI writes lists with commas, so a string for a list field is split."""
    config = load_run_config(CONFIGS / "demo.yaml", ["detect.names=ppl,min_k", "calibration.detectors=ppl, min_k"])
    assert config.detect.names == ("ppl", "min_k") and config.calibration.detectors == ("ppl", "min_k")
    assert load_run_config(CONFIGS / "demo.yaml", ["detect.names=[ppl,cdd]"]).detect.names == ("ppl", "cdd")


def test_three_wrong_values_are_named_in_one_pass(tmp_path, capsys):
    """Issue 35, item 8: three wrong values took three runs (each refusal naming the first only),
    while docs/run.md promises every problem at once."""
    run_dir = tmp_path / "run"
    err = _one_line_error(
        capsys,
        [
            "run",
            str(CONFIGS / "demo.yaml"),
            "--set",
            f"run_dir={run_dir}",
            "--set",
            "extraction.batch_size=0",
            "--set",
            "generation.similars=-1",
            "--set",
            "detect.batch_size=x",
            "--no-progress",
        ],
    )
    for part in (
        "extraction.batch_size must be >= 1, got 0",
        "'similars' (K) must be at least 2",
        "'detect.batch_size' must be of type int, got 'x'",
    ):
        assert part in err
    assert not run_dir.exists()


def test_a_detector_whose_answers_none_can_use_is_refused_before_stage_one_and_left_out_of_all(tmp_path):
    """Answers the verifier cannot read are no answers to reward gain: ``lara run`` names the key
    before any stage (it was refused only at the detect stage, after generation, caching and
    scoring), and ``all`` leaves reward gain out while gold_shift, which reads the text, stays."""
    import json

    from generation.records import read_questions
    from probes.detectors.selection import detector_names
    from probes.errors import ConfigError
    from probes.pipeline.validate import validate_run

    questions = tmp_path / "q.jsonl"
    rows = [{"id": f"q{i}", "question": f"Ann has {i + 2} pens. How many?", "answer": "a=\\"} for i in range(4)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = load_run_config(CONFIGS / "demo.yaml", [f"questions={questions}", "detect.names=[ppl,reward_gain]"])
    with pytest.raises(
        ConfigError,
        match="detect.names: 'reward_gain' compares answers .* no answer given is one the verifier can read",
    ):
        validate_run(config, read_questions(questions))
    chosen = detector_names("all", reference=True, answers=[r["answer"] for r in rows])
    assert "reward_gain" not in chosen and "gold_shift" in chosen
    assert "reward_gain" in detector_names("all", reference=True, answers=["5"])


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["generation.backend=local", "generation.local.model=../probes/testbed/checkpoints/cpu-seed0/rl"],
            "the audited model",
        ),
        (
            ["generation.backend=local", "generation.local.model=../probes/testbed/checkpoints/cpu-seed0/sft"],
            "(the reference)",
        ),
        (["generation.backend=openai", "generation.openai.model=sft_control"], "(the reference)"),
    ],
)
def test_a_generator_model_that_is_the_audited_model_or_its_reference_is_refused(overrides, message, tmp_path):
    """The LLM generator would write and answer the controls it is audited against: refused before
    any stage, naming the key and which model it is."""
    from generation.records import read_questions
    from probes.pipeline.validate import validate_run

    resolved = [o.replace("=../", f"={CONFIGS.parent}/") for o in overrides]
    config = load_run_config(CONFIGS / "demo.yaml", [f"run_dir={tmp_path}", *resolved])
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        validate_run(config, read_questions(config.questions))
    assert overrides[1].split("=")[0] in str(err.value) and "must be another model" in str(err.value)
    fine = load_run_config(
        CONFIGS / "demo.yaml",
        [f"run_dir={tmp_path}", "generation.backend=local", "generation.local.model=/elsewhere/m"],
    )
    validate_run(fine, read_questions(fine.questions))
