"""The README is a front door and ``docs/`` holds the depth: the CLI reference is the parser's own
(it fails when a flag changes and the page does not), every page is linked, every link lands,
and every command is one click from the README."""

from __future__ import annotations

import re
from pathlib import Path

from probes.cli import build_parser
from probes.cli_reference import anchor, command_parsers, render

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped (underscores kept, as
    GitHub keeps them: ``questions_source`` → ``#questions_source``), spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {
        github_anchor(line.lstrip("#"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }


def test_the_cli_reference_is_generated_from_the_parser():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == render(), "docs/cli.md is stale: python -m probes.cli_reference > docs/cli.md"


def test_the_config_reference_is_generated_from_the_dataclasses():
    from probes.pipeline.config_reference import render as render_configs

    page = (ROOT / "docs" / "configs.md").read_text(encoding="utf-8")
    assert page == render_configs(), (
        "docs/configs.md is stale: python -m probes.pipeline.config_reference > docs/configs.md"
    )
    for key in ("`calibration`", "`verdict`", "`detect.endpoint`", "`fusion[]`", "`generation.openai.temperature`"):
        assert f"## {key}" in page


def test_the_detector_table_is_generated_from_the_detectors_tags():
    """Issue 35, item 4: the page's table of detectors was hand-kept; it is now made from each
    detector's declared tags (statistic, raw direction, needs, family, sampling temperature)."""
    from probes.detectors import REGISTRY
    from probes.detectors.table import detector_table, with_table

    page = (ROOT / "docs" / "detectors.md").read_text(encoding="utf-8")
    assert page == with_table(page), (
        "docs/detectors.md's table is stale: python -m probes.detectors.table docs/detectors.md"
    )
    table = detector_table()
    assert all(f"| `{name}` | {cls.statistic} | {cls.raw_direction} |" in table for name, cls in REGISTRY.items())
    assert "| `cdd` |" in table and table.split("| `cdd` |")[1].split("\n")[0].endswith("| sampling | yes |")


def test_the_engine_table_is_generated_from_the_registry():
    """Issue 57: an engine and the arguments it declares appear in the docs by its registry entry alone."""
    from probes.responders.engine_table import engine_table, with_engine_table
    from probes.responders.registry import ENGINES

    page = (ROOT / "docs" / "detectors.md").read_text(encoding="utf-8")
    assert page == with_engine_table(page), (
        "docs/detectors.md's engine table is stale: python -m probes.responders.engine_table docs/detectors.md"
    )
    table = engine_table()
    assert all(f"| `{name}` |" in table for name in ENGINES)
    assert (
        "`tensor_parallel_size` (an integer ≥ 1)" in table and "`gpu_memory_utilization` (a number in (0, 1])" in table
    )


def test_the_reference_covers_every_flag_of_every_command():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, sub in command_parsers(build_parser()):
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section or f", {flag}" in section, f"{name}: {flag} missing"


def test_the_readme_is_short_and_links_every_page_and_every_command():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 12 * 1024
    links = set(LINK.findall(text))
    for page in DOCS:
        if page.name != "README.md":
            assert any(link.split("#")[0] == f"docs/{page.name}" for link in links), (
                f"README does not link docs/{page.name}"
            )
    for name, _ in command_parsers(build_parser()):
        assert f"docs/cli.md#{anchor(name)}" in links, f"README has no one-click link to {name}"


def test_every_relative_link_lands_on_a_file_and_an_anchor():
    broken = []
    for page in [README, *DOCS]:
        for link in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+://", link) or link.startswith("mailto:"):
                continue
            target, _, fragment = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such file)")
            elif fragment and path.suffix == ".md" and fragment not in anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []
