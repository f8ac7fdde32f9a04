"""Config loading, prompt templates, and the package's import boundaries."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from generation.config import GenerationConfig, Templates
from generation.errors import ConfigError
from generation.prompts import load_templates

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("generation.*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load(path: Path) -> None:
    config = GenerationConfig.from_yaml(path)
    assert config.backend == "openai"
    load_templates(config.openai.templates)


def test_defaults_round_trip_through_a_dict() -> None:
    config = GenerationConfig(seed=3, similars=7)
    assert GenerationConfig.from_dict(config.to_dict()) == config


def test_templates_render_and_are_identified_by_content() -> None:
    templates = load_templates(Templates())
    text = templates["paraphrases"].render(question="Q [BLANK]?", count=5, k=1)
    assert "<<<\nQ [BLANK]?\n>>>" in text and "exactly 5 strings" in text
    assert templates["similars"].id == "similar_questions.v1.txt" and len(templates["similars"].sha256) == 64


def test_a_template_with_an_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "mine.txt"
    bad.write_text("Rewrite $question into $count things, $flavour.")
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \$flavour"):
        load_templates(Templates(paraphrases=str(bad)))
    with pytest.raises(ConfigError, match="not found"):
        load_templates(Templates(similars=str(tmp_path / "missing.txt")))


def test_generation_imports_neither_cache_probes_nor_openai() -> None:
    code = "import sys, generation, generation.pipeline, generation.offline; print(sorted(m for m in sys.modules if m.split('.')[0] in ('cache', 'probes', 'openai', 'torch')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"
    pattern = re.compile(r"^\s*(from|import)\s+(cache|probes)\b", re.MULTILINE)
    for path in (REPO / "generation").glob("*.py"):
        assert not pattern.search(path.read_text()), path
