"""The house rules, read from the source: which package may import which, and the size of the
command modules (one small module per command, its parser beside its handler)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path, run_time: bool = False) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved); with
    ``run_time``, not those under ``if TYPE_CHECKING`` (which never run)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(sub)
        for node in ast.walk(tree)
        if run_time and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package.replace(".", "/")).rglob("*.py"))


def test_the_resolver_reads_relative_imports():
    names = imported_modules(ROOT / "probes" / "responders" / "openai_api.py")
    assert "probes.token_distributions" in names and "probes.responders.base" in names


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("lara_core", ("cache", "generation", "probes")),
        ("cache", ("generation", "probes")),
        ("generation", ("cache", "probes")),
        ("probes.responders", ("probes.detectors",)),
    ],
)
def test_layers_import_only_downwards(package, forbidden):
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources(package)
        for name in imported_modules(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]
    assert offenders == []


# The floors inside probes/ (issue 35, item 7): a module imports only its own unit and units on its
# floor or below, so the next upward arrow (a reader importing its writer's module, the front door
# imported from below) fails here. A unit is a sub-package or a top-level module of probes/.
FLOORS = {
    0: {"errors", "scores", "robust", "token_distributions", "accuracy"},
    1: {"evaluation", "lara", "responders", "questions", "testbed", "scorefiles"},
    2: {"detectors", "fusion", "verdicts"},
    4: {"report", "operations"},
    5: {"pipeline"},
    6: {"commands", "api"},
    7: {"cli", "cli_reference", "__init__"},  # __init__: the package itself, the lazy API front door
}
FLOOR = {unit: floor for floor, units in FLOORS.items() for unit in units}


def probes_unit(module: str) -> str | None:
    """``probes.verdicts.modes`` → ``verdicts``; ``probes`` → ``__init__``; None outside probes/."""
    parts = module.split(".")
    if parts[0] != "probes":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def probes_edges() -> set[tuple[str, str, str]]:
    """``(importing unit, imported unit, file)`` for every import between two units of probes/."""
    edges = set()
    for path in sources("probes"):
        unit = probes_unit(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for name in imported_modules(path):
            target = probes_unit(name)
            if target and target != unit and target in FLOOR:
                edges.add((unit, target, str(path.relative_to(ROOT))))
    return edges


def test_every_unit_of_probes_has_a_floor():
    units = {probes_unit(".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in sources("probes")}
    assert units - set(FLOOR) == set()


def test_no_module_of_probes_imports_a_higher_floor():
    upward = sorted(
        f"{f}: {a} (floor {FLOOR[a]}) imports {b} (floor {FLOOR[b]})"
        for a, b, f in probes_edges()
        if FLOOR[b] > FLOOR[a]
    )
    assert upward == []


def test_the_units_of_probes_import_each_other_in_no_cycle():
    graph: dict[str, set[str]] = {}
    for a, b, _ in probes_edges():
        graph.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph.get(start, ()))

    assert sorted(a for a in graph if reaches(a, a, {a})) == []


def test_command_modules_are_small_and_cli_only_assembles():
    long_functions = []
    for path in sources("probes.commands"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, path
        long_functions += [
            f"{path.name}:{n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 80
        ]
    assert long_functions == []
    cli = (ROOT / "probes" / "cli.py").read_text(encoding="utf-8")
    assert "add_parser(" not in cli and len(cli.splitlines()) <= 120


def test_every_package_is_in_the_wheel():
    """``pyproject.toml`` lists the packages explicitly: a package missing from the list is absent
    from a fresh install (a renamed or new subpackage once was)."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed, mapped = set(setuptools["packages"]), setuptools.get("package-dir", {})
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("lara_core", "cache", "generation", "probes")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set()
    assert all(
        (ROOT / mapped.get(name, name.replace(".", "/"))).is_dir() for name in listed - found
    )  # data-only (prompts)


def test_one_error_root_and_one_config_validator():
    """Every user-facing error of every package is a ``LaraError`` (the CLI prints each in one
    line), ``ConfigError`` / ``InputError`` are one class whichever package raises them, and the
    only code that checks config keys against a dataclass is ``lara_core.configio``."""
    import importlib
    import inspect

    from lara_core.errors import ConfigError, InputError, LaraError

    for package in ("cache", "generation", "probes"):
        errors = importlib.import_module(f"{package}.errors")
        assert errors.ConfigError is ConfigError and errors.InputError is InputError
        for name, cls in inspect.getmembers(errors, inspect.isclass):
            if issubclass(cls, Exception):
                assert issubclass(cls, LaraError), f"{package}.errors.{name}"
    validators = [
        str(path.relative_to(ROOT))
        for top in ("lara_core", "cache", "generation", "probes")
        for path in sources(top)
        if "unknown config key" in path.read_text(encoding="utf-8")
    ]
    assert validators == ["lara_core/configio.py"]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_modules_import_each_other_not_even_inside_functions():
    """Issue 35: ``generation/identity.py`` and ``offline.py`` / ``llm_backend.py`` imported each
    other (hidden inside functions). Issue 43: the test read module-level imports only, and
    ``responders/engines.py`` ⇄ ``responders/vllm_engine.py`` and ``cache/sources.py`` ⇄
    ``cache/adapters.py`` imported each other through function-local imports; every import counts
    now, but those under ``if TYPE_CHECKING`` (never run)."""
    paths = [p for package in ("lara_core", "cache", "generation", "probes") for p in sources(package)]
    known = {module_name(p) for p in paths}
    graph = {
        module_name(p): {n for n in imported_modules(p, run_time=True) if n in known and n != module_name(p)}
        for p in paths
    }
    for module in graph:  # a package imports its own submodules through its __init__: not a cycle
        graph[module] = {n for n in graph[module] if not n.startswith(module + ".")}
    cycles = []

    def visit(module: str, trail: list[str]) -> None:
        for nxt in sorted(graph[module]):
            if nxt in trail:
                cycles.append(" -> ".join(trail[trail.index(nxt) :] + [nxt]))
            elif nxt not in done:
                visit(nxt, trail + [nxt])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert cycles == []


def test_no_function_of_the_packages_takes_more_than_ten_parameters():
    """Settings objects instead of argument lists (issue 43): ``run_detectors`` took 14,
    ``detect_questions`` 13, ``build_report`` 17. The Python API (``probes/api/``) keeps its keyword
    arguments as a thin front."""
    long = []
    for package in ("probes", "cache", "generation", "lara_core"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if (ROOT / "probes" / "api") in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                    count = len(names) - (names[:1] in (["self"], ["cls"]))
                    if count > 10:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({count})")
    assert not long, long


def test_an_engine_is_named_by_its_own_module_and_the_registry_alone():
    """Issue 43: ``"vllm"`` was a branch in about eight files; issue 57: the model settings had a
    field per engine too. Now only the registry and the engine's own module name it, and the
    activation package's model config knows no engine."""
    import dataclasses

    from cache.config import ModelConfig
    from probes.responders.registry import ENGINES, LOCAL

    for name, entry in ENGINES.items():
        if name == LOCAL:
            continue
        own = {"probes/responders/registry.py", entry.opener.partition(":")[0].replace(".", "/") + ".py"}
        pattern = re.compile(rf"[\"']{name}[\"']")
        found = {
            str(path.relative_to(ROOT))
            for package in ("lara_core", "cache", "generation", "probes")
            for path in sources(package)
            if pattern.search(path.read_text(encoding="utf-8"))
        }
        assert found <= own, (name, found - own)
    assert not {f.name for f in dataclasses.fields(ModelConfig)} & {"engine", "engine_args", *ENGINES}


def test_a_function_local_import_of_the_toolkit_says_why():
    """Issue 57: seven function-local imports of the toolkit's own modules carried no reason, and
    a reader could not tell a cycle broken from an import delayed for speed; each one now has its
    reason on its line (``# lazy: …``), or moved to the module's top."""
    silent = []
    for package in ("lara_core", "cache", "generation", "probes"):
        for path in sources(package):
            lines = path.read_text(encoding="utf-8").splitlines()
            for function in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(function):
                    own = isinstance(node, ast.ImportFrom) and (
                        node.level
                        or (node.module or "").split(".")[0] in ("lara_core", "cache", "generation", "probes")
                    )
                    if own and not any("#" in lines[i - 1] for i in range(node.lineno, node.end_lineno + 1)):
                        silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert sorted(set(silent)) == []


def test_no_name_is_re_exported_from_an_old_home():
    """A name imported where it used to live, for old importers ("its old home"), kept two ways in;
    every importer now uses the one home."""
    kept = [
        f"{path.relative_to(ROOT)}:{i}"
        for package in ("lara_core", "cache", "generation", "probes")
        for path in sources(package)
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if "noqa: F401" in line and ("old home" in line or "home is" in line)
    ]
    assert kept == []


def test_question_files_are_read_in_the_questions_room():
    """Issue 57: ``probes/scores.py`` held score tables and also the readers of a questions file's
    labels, splits, texts and groups; these live in ``probes/questions/reading.py`` now, and a JSONL
    reader anywhere else in probes/ (but the perturbation sets' own) fails here."""
    readers = {
        str(path.relative_to(ROOT))
        for path in sources("probes")
        if re.search(r"\bjsonl_lines\b", path.read_text(encoding="utf-8"))
    }
    assert readers == {"probes/questions/reading.py", "probes/lara/sets.py"}
