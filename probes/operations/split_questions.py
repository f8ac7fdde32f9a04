"""Back to the harness (``lara questions split RUN``, issue 44 item 3): a finished run's audited
questions split by its decisions into ``not_flagged.jsonl`` and ``flagged.jsonl`` (questions files,
provenance kept); where they came from an lm-evaluation-harness task (``--lm-eval-task``), also an
lm-eval task per subset — its documents exactly that subset's, written as JSONL, and a task YAML
that includes the original task and reads them — checked by loading it through lm-eval's own
``TaskManager`` before it is reported written.

The task directory moves as a whole (issue 55): every path in it is relative — the documents are
read by a small loader written beside the YAMLs (``custom_dataset``, which lm-eval imports from the
YAML's directory and which reads the files beside itself), and the original task's YAML is
included by a relative path, except a task of the harness's own, included from where it is installed.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from generation.records import Question, read_questions
from lara_core.files import write_text_atomically

from ..errors import InputError
from ..questions.lm_eval_tasks import INSTALL, config_digest
from ..questions.question_files import read_question_meta, write_question_file

logger = logging.getLogger(__name__)


@dataclass
class SplitResult:
    """What was written: each subset's count and questions file (none for an empty subset), and the
    lm-eval tasks (name → YAML)."""

    files: dict[str, Path] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, Path] = field(default_factory=dict)
    include_path: Path | None = None


def split_questions(questions_path: str | Path, decisions: str | Path, output: str | Path, origin: dict) -> SplitResult:
    """Split the questions of ``questions_path`` that ``decisions`` (a run's ``questions.csv``)
    decided into ``output``/{not_flagged,flagged}.jsonl (``origin``: the run and model, recorded in
    each file's provenance), and lm-eval tasks where they came from one."""
    flags = _flags(Path(decisions))
    questions_path = Path(questions_path)
    by_id = {q.id: q for q in read_questions(questions_path)}
    missing = [i for i in flags if i not in by_id]
    if missing:
        raise InputError(
            f"{len(missing)} decided question(s) are not in {questions_path} (e.g. {missing[0]}); rerun the run"
        )
    subsets = {
        "not_flagged": [by_id[i] for i in by_id if flags.get(i) is False],
        "flagged": [by_id[i] for i in by_id if flags.get(i) is True],
    }
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    meta = read_question_meta(questions_path) or {}
    result = SplitResult()
    for name, chosen in subsets.items():
        result.counts[name] = len(chosen)
        if not chosen:  # no file for an empty subset (a questions file holds at least one question)
            continue
        split_from = {**origin, "subset": name, "of": len(flags)}
        result.files[name], _ = write_question_file(
            chosen, out / f"{name}.jsonl", {"provenance": meta.get("provenance", []), "split_from": split_from}
        )
    if any("lm_eval" in q.extra for qs in subsets.values() for q in qs):
        result.include_path = out / "lm_eval"
        result.tasks = _lm_eval_tasks(subsets, meta.get("provenance", []), result.include_path)
    return result


def _flags(path: Path) -> dict[str, bool]:
    """``questions.csv``'s decisions: id → flagged; refused where the run decided nothing."""
    if not path.is_file():
        raise InputError(f"no decisions at {path}: the run has no verdict for this model (see its report)")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or any(r.get("flagged", "") not in ("0", "1") for r in rows):
        raise InputError(
            f"{path} holds no calibrated decisions (no question is flagged or cleared: an uncalibrated verdict "
            "decides nothing); give the run a reference model or clean questions, then split it"
        )
    return {r["id"]: r["flagged"] == "1" for r in rows}


def _lm_eval_tasks(subsets: dict[str, list[Question]], provenance: list[dict], out: Path) -> dict[str, Path]:
    """Per task and subset, the subset's documents (JSONL) and a task YAML reading them."""
    try:
        from lm_eval.tasks import TaskManager  # lazy: the lm-eval extra
    except ImportError:
        raise InputError(
            f"the questions came from lm-eval tasks; writing tasks back needs the extra: {INSTALL}"
        ) from None
    source = next((p for p in provenance if p.get("kind") == "lm_eval_task"), None)
    if source is None:
        raise InputError("the questions carry lm-eval ids but their provenance (questions .meta.json) is missing")
    manager = TaskManager(include_path=source.get("include_path"))
    recorded = {t["task"]: t for t in source["tasks"]}
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    expected: dict[str, list[dict]] = {}
    names = sorted({q.extra["lm_eval"]["task"] for qs in subsets.values() for q in qs})
    for name in names:
        task = manager.load(name)["tasks"][name]
        task.set_config(key="num_fewshot", value=recorded[name]["num_fewshot"])  # as the import dumped it
        if config_digest(task) != recorded[name]["config_sha256"]:
            raise InputError(f"lm-eval task {name!r} has changed since the import (its config digest differs)")
        docs = list(task.eval_docs)
        fewshot = _write_fewshot(task, out / f"{name}.fewshot.jsonl")
        for subset, questions in subsets.items():
            chosen = [docs[q.extra["lm_eval"]["doc_id"]] for q in questions if q.extra["lm_eval"]["task"] == name]
            if not chosen:
                continue
            new = f"{name}_{subset}"
            data = _write_docs(chosen, out / f"{new}.jsonl")
            path = out / f"{new}.yaml"
            config = yaml.safe_dump(_task_yaml(manager, name, new, data, fewshot, out), sort_keys=False)
            write_text_atomically(path, config + f"custom_dataset: !function {LOADER}.load\n")
            written[new], expected[new] = path, chosen
    write_text_atomically(out / f"{LOADER}.py", LOADER_SOURCE)
    _check_loads(out, expected)
    return written


def _write_docs(docs: list[dict], path: Path) -> Path:
    write_text_atomically(path, "".join(json.dumps(dict(d), ensure_ascii=False, default=str) + "\n" for d in docs))
    return path.resolve()


def _write_fewshot(task: Any, path: Path) -> Path | None:
    """The task's few-shot documents (processed, as the harness samples them), when it draws from a split."""
    if getattr(task.config, "fewshot_split", None) is None:
        return None
    return _write_docs(list(task.fewshot_docs()), path)


LOADER = "lara_split_data"  # the module beside the task YAMLs that reads their documents
LOADER_SOURCE = '''"""Reads a task's documents from the files beside this module (written by lara questions split),
so the directory can move as a whole."""

from pathlib import Path

import datasets


def load(data_files, **_):
    here = Path(__file__).resolve().parent
    return datasets.load_dataset("json", data_files={split: str(here / name) for split, name in data_files.items()})
'''


def _task_yaml(manager: Any, name: str, new: str, data: Path, fewshot: Path | None, out: Path) -> dict[str, Any]:
    """The new task: the original's YAML included, its data the subset's documents (file names beside
    it, read by :data:`LOADER`), already processed."""
    yaml_path = manager.task_index[name].yaml_path
    if yaml_path is None:
        raise InputError(f"lm-eval task {name!r} has no YAML file to include (a task defined in Python)")
    files = {"test": data.name} | ({"fewshot": fewshot.name} if fewshot else {})
    config: dict[str, Any] = {
        "include": _include_path(Path(yaml_path).resolve(), out.resolve()),
        "task": new,
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": files},
        "training_split": None,
        "validation_split": None,
        "test_split": "test",
        "process_docs": None,  # the documents were processed before they were written
    }
    if fewshot:
        config["fewshot_split"] = "fewshot"
    return config


def _include_path(yaml_path: Path, out: Path) -> str:
    """The original task's YAML as the new one includes it: relative to the output directory, except
    a task of the installed harness's own (absolute: it lies wherever lm-eval is installed)."""
    import os

    import lm_eval  # lazy: the lm-eval extra

    harness = Path(lm_eval.__file__).resolve().parent
    if harness in yaml_path.parents:
        return str(yaml_path)
    return os.path.relpath(yaml_path, out)


def _check_loads(include_path: Path, expected: dict[str, list[dict]]) -> None:
    """Load every written task through lm-eval's own loader (one index of ``include_path``): each
    one's documents must be exactly those it was written with."""
    from lm_eval.tasks import TaskManager  # lazy: the lm-eval extra

    loaded = TaskManager(include_path=str(include_path)).load(list(expected))["tasks"]
    for name, docs in expected.items():
        got = [json.loads(json.dumps(dict(d), default=str)) for d in loaded[name].eval_docs]
        if got != [json.loads(json.dumps(dict(d), default=str)) for d in docs]:
            raise InputError(
                f"the written lm-eval task {name!r} does not load the documents it should; please report it"
            )
        logger.info("lm-eval task %s: %d documents, loaded back through lm-eval", name, len(got))
