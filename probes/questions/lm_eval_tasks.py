"""lm-evaluation-harness tasks as a question source (``lara questions import --lm-eval-task``, a
run's ``questions: {lm_eval_task: NAME}``): the task's evaluation documents, read through
lm-eval's own ``TaskManager``, one question per document whose text is the prompt the harness
sends for it — ``doc_to_text`` rendered, and the few-shot context the task is evaluated with when
asked — its target (``doc_to_target``; a choice's text for a multiple-choice task) as the answer,
and the task's name, version and config digest as provenance. Needs the ``lm-eval`` extra."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from generation.records import Question

from ..errors import ConfigError, InputError
from .importing import ImportOptions, ImportResult

logger = logging.getLogger(__name__)

INSTALL = "pip install -c constraints.txt -e '.[lm-eval]'"
TABLE_ONLY = ("preset", "fields", "where", "sample", "strip_suffix")  # ImportOptions that read a table
FEWSHOT_SEED = 1234  # lm-eval's default few-shot sampler seed (simple_evaluate's fewshot_random_seed)


@dataclass(frozen=True)
class LmEvalSource:
    """A harness task to import.

    Attributes:
        task: the task's (or group's) name, as ``lm_eval --tasks`` takes it.
        include_path: a directory of further task YAML files (``lm_eval --include_path``).
        num_fewshot: few-shot examples in each prompt: None keeps the task's own setting (what
            ``lm_eval`` evaluates with when ``--num_fewshot`` is not given), 0 the bare
            ``doc_to_text`` prompt.
        fewshot_seed: the few-shot sampler's seed (lm-eval's default: 1234).
    """

    task: str
    include_path: str | None = None
    num_fewshot: int | None = 0
    fewshot_seed: int = FEWSHOT_SEED


def import_lm_eval_task(source: LmEvalSource, options: ImportOptions = ImportOptions()) -> ImportResult:
    """The task's documents as questions (``options``: label, split name and limit set on them; the
    options that read a table — preset, fields, where, sample, strip_suffix — are refused)."""
    table_only = [f"--{k.replace('_', '-')}" for k in TABLE_ONLY if getattr(options, k)]  # every default is empty
    if table_only:
        raise InputError(
            f"--lm-eval-task reads the task's own documents and prompts; {', '.join(table_only)} do not apply"
        )
    questions: list[Question] = []
    records = []
    for name, task in _leaf_tasks(source):
        left = None if options.limit is None else options.limit - len(questions)
        prompts = _prompts(task, source, left) if left != 0 else {}
        questions += [_question(name, task, i, doc, prompt, options) for i, (doc, prompt) in sorted(prompts.items())]
        records.append(_task_record(name, task, len(prompts)))
    rows = sum(r["documents"] for r in records)
    provenance = {
        "source": f"lm-eval:{source.task}",
        "kind": "lm_eval_task",
        "preset": "lm-eval",
        "fields": {"question": "the rendered prompt", "answer": "doc_to_target"},
        "rows": rows,
        "skipped": {"beyond --limit": rows - len(questions)} if rows > len(questions) else {},
        "tasks": records,
        "num_fewshot": source.num_fewshot,
        "fewshot_seed": source.fewshot_seed,
        "lm_eval_version": _version(),
        "include_path": source.include_path,
    }
    return ImportResult(questions, provenance)


def _leaf_tasks(source: LmEvalSource) -> list[tuple[str, Any]]:
    """``[(name, task)]`` of the task, or of every task under a group, in the harness's order."""
    try:
        from lm_eval.tasks import TaskManager  # lazy: the lm-eval extra
    except ImportError:
        raise ConfigError(f"lm-eval tasks need the lm-eval extra: {INSTALL}") from None
    manager = TaskManager(include_path=source.include_path)
    if source.task not in manager.all_tasks:
        where = (
            f" or in {source.include_path}" if source.include_path else " (a directory of task YAMLs: --include-path)"
        )
        raise InputError(f"lm-eval has no task named {source.task!r} among its tasks{where}")
    return list(manager.load(source.task)["tasks"].items())  # a group's every task, flat


def _prompts(task: Any, source: LmEvalSource, limit: int | None) -> dict[int, tuple[dict, str]]:
    """``{doc_id: (document, prompt)}``: the context of each document's first request, as the
    harness builds it (its few-shot setting and seed as ``simple_evaluate`` sets them; ``limit``:
    the first documents only, as ``lm_eval --limit``)."""
    if source.num_fewshot is not None:
        task.set_config(key="num_fewshot", value=source.num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=source.fewshot_seed)
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    prompts: dict[int, tuple[dict, str]] = {}
    for instance in task.instances:
        context = instance.args[0]
        if not isinstance(context, str):
            raise InputError(
                f"lm-eval task {task.config.task!r}: its requests' context is not one text "
                f"({type(context).__name__}; a task with several inputs per document), which an audit cannot score"
            )
        prompts.setdefault(instance.doc_id, (instance.doc, context))
    return prompts


def _question(name: str, task: Any, doc_id: int, doc: dict, prompt: str, options: ImportOptions) -> Question:
    target = task.doc_to_target(doc)
    if isinstance(target, int) and task.config.doc_to_choice is not None:
        target = task.doc_to_choice(doc)[target]  # a multiple-choice task's target is the choice's index
    return Question(
        id=f"{name}-{doc_id}",
        question=prompt,
        label=options.label,
        answer=target if isinstance(target, (str, int, float)) else json.dumps(target),
        source=f"lm-eval:{name}",
        split=options.split_name,
        extra={"lm_eval": {"task": name, "doc_id": doc_id}},
    )


def _task_record(name: str, task: Any, imported: int) -> dict[str, Any]:
    """A task's provenance: its name, version, evaluated split, few-shot count, config digest, and
    how many of its evaluation documents there are and were imported."""
    config = task.dump_config()
    digest = config_digest(task)
    return {
        "task": name,
        "version": (config.get("metadata") or {}).get("version", getattr(task, "VERSION", None)),
        "split": config.get("test_split") or config.get("validation_split"),
        "num_fewshot": config.get("num_fewshot"),
        "output_type": config.get("output_type"),
        "config_sha256": digest,
        "documents": len(task.eval_docs),
        "imported": imported,
    }


def config_digest(task: Any) -> str:
    """sha256 of the task's dumped config (its provenance: a changed task is told apart)."""
    return hashlib.sha256(json.dumps(task.dump_config(), sort_keys=True, default=str).encode()).hexdigest()


def _version() -> str:
    import lm_eval  # lazy: the lm-eval extra

    return str(getattr(lm_eval, "__version__", "unknown"))
