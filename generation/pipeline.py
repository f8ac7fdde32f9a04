"""Run a generation job: questions in, one perturbation set per question out, resumably.

A backend is an object with ``provenance()``, ``run(questions, finish)`` (calls ``finish`` with
each finished set), ``close()`` and ``stats`` (request counters, or None offline).

Finished sets are appended to a journal (``SETS.jsonl.partial``, first line: the job's
settings fingerprint) as soon as they are done, so a killed run loses at most the questions in
flight, and the LLM's answers to those are in the response cache. At the end the output is
written in input order to a temporary file and renamed over ``SETS.jsonl``, so the output is
the same whatever the completion order, interruptions or concurrency; then the journal is
removed. A re-run reuses every set of the output or journal whose settings and question text
match, so a finished job costs nothing; sets made with other settings are refused, not mixed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from lara_core.files import atomic_path

from .answers import RESOLVER_VERSION, attach_answers
from .config import GenerationConfig
from .errors import OutputMismatchError
from .identity import build_generator
from .llm import ChatClient, ResponseCache
from .records import PerturbationSet, Question

logger = logging.getLogger(__name__)

JOURNAL_SUFFIX = ".partial"


@dataclass
class JobSummary:
    """What a job did; :meth:`describe` is the CLI's summary line."""

    output: Path
    questions: int = 0
    generated: int = 0
    reused: int = 0
    complete: int = 0
    failures: Counter = field(default_factory=Counter)
    incomplete_questions: int = 0
    api_calls: int | None = None
    cache_hits: int | None = None
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    controls: int = 0  # further similars per question drawn only as matched controls
    controls_valid: int = 0
    answered: int = 0  # similars and controls with a re-solved answer
    answerable: int = 0  # similars and controls of questions with a worked solution
    unsolved: Counter = field(default_factory=Counter)  # why a question's worked solution could not be read

    def describe(self) -> str:
        parts = [
            f"{self.questions} questions: {self.complete} complete sets, {self.incomplete_questions} incomplete "
            f"({self.generated} generated, {self.reused} reused) in {self.seconds:.1f} s -> {self.output}"
        ]
        if self.controls:
            per = f", {1000 * self.seconds / self.generated:.1f} ms per question generated" if self.generated else ""
            parts.append(
                f"further similars drawn as controls only: {self.controls_valid} valid of {self.controls * self.questions} "
                f"({self.controls} per question{per})"
            )
        if self.answerable:
            why = "; ".join(f"{reason} ({n})" for reason, n in self.unsolved.most_common(3))
            parts.append(
                f"answers re-solved from the worked solutions: {self.answered} of {self.answerable} similars and controls"
                + (f"; {sum(self.unsolved.values())} solution(s) not readable, e.g. {why}" if self.unsolved else "")
            )
        if self.failures:
            parts.append(
                "failures by reason: " + ", ".join(f"{reason} {n}" for reason, n in sorted(self.failures.items()))
            )
        if self.api_calls is not None:
            calls = f"API calls: {self.api_calls} made"
            if self.failed_calls:
                calls += f" ({self.failed_calls} failed)"
            calls += f", {self.cache_hits} served from cache"
            if self.prompt_tokens or self.completion_tokens:
                calls += f"; tokens {self.prompt_tokens} prompt + {self.completion_tokens} completion"
            parts.append(calls)
        return "\n".join(parts)


def settings_fingerprint(provenance: dict[str, Any]) -> str:
    """Hash of the settings that shape a set (the toolkit version excluded)."""
    shaped = {k: v for k, v in provenance.items() if k != "toolkit_version"}
    return hashlib.sha256(json.dumps(shaped, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def make_generator(config: GenerationConfig) -> Any:
    """The configured backend, ready to run (an LLM one with its client and response cache)."""

    def client() -> Any:
        cache = ResponseCache(config.openai.resolved_cache_dir())
        if config.backend == "local":
            from .local_client import LocalChatClient  # lazy: only for backend: local

            return LocalChatClient(config.local, cache)
        return ChatClient(config.openai, cache)

    return build_generator(config, client)


def run_generation(
    questions: list[Question],
    output: str | Path,
    config: GenerationConfig,
    *,
    progress: bool = False,
    overwrite: bool = False,
) -> JobSummary:
    """Generate (or reuse) the set of every question and write ``output`` in input order."""
    started = time.perf_counter()
    output = Path(output)
    journal = output.with_name(output.name + JOURNAL_SUFFIX)
    generator = make_generator(config)
    provenance = generator.provenance()
    resolve = config.answers and generator.name == "offline"  # the LLM backend asks its model (llm_answers)
    if resolve:
        provenance = {**provenance, "answers": RESOLVER_VERSION}
    if overwrite:
        for path in (output, journal):
            path.unlink(missing_ok=True)
    try:
        done = _finished_sets(output, journal, provenance, questions)
        todo = [q for q in questions if q.id not in done]
        summary = JobSummary(
            output=output, questions=len(questions), reused=len(done), generated=len(todo), controls=config.controls
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        if todo:
            logger.info("%d questions to generate, %d reused (%s backend)", len(todo), len(done), generator.name)
            bar = _progress_bar(len(questions), len(done), progress)
            with _Journal(journal, settings_fingerprint(provenance)) as sink:

                def finish(record: PerturbationSet) -> None:
                    if resolve:
                        attach_answers(record)
                    sink.write(record)
                    done[record.question.id] = record
                    bar.update(1)

                try:
                    generator.run(todo, finish)
                finally:
                    bar.close()
    finally:
        generator.close()
    if generator.stats is not None:
        stats = generator.stats
        summary.api_calls, summary.cache_hits, summary.failed_calls = (
            stats.api_calls,
            stats.cache_hits,
            stats.failed_calls,
        )
        summary.prompt_tokens, summary.completion_tokens = stats.prompt_tokens, stats.completion_tokens
    _write_output(output, [done[q.id] for q in questions])
    journal.unlink(missing_ok=True)
    for record in done.values():
        summary.complete += record.complete
        summary.incomplete_questions += not record.complete
        summary.failures.update(record.failure_counts())
        summary.controls_valid += sum(c is not None for c in record.controls)
        _count_answers(summary, record)
    summary.seconds = time.perf_counter() - started
    return summary


def _count_answers(summary: JobSummary, record: PerturbationSet) -> None:
    if record.answers is None:
        return
    texts = [*record.similars, *record.controls]
    values = [*record.answers.get("similars", []), *record.answers.get("controls", [])]
    summary.answerable += sum(t is not None for t in texts)
    summary.answered += sum(t is not None and a is not None for t, a in zip(texts, values))
    if record.answers.get("unavailable"):
        summary.unsolved[record.answers["unavailable"].split(" (")[0]] += 1


class _Journal:
    """Append-only JSONL of finished sets, flushed per set."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.path, self.fingerprint = path, fingerprint

    def __enter__(self) -> "_Journal":
        fresh = not self.path.exists()
        self._handle = open(self.path, "a", encoding="utf-8")
        if fresh:
            self._handle.write(json.dumps({"journal": "lara-probes generation", "settings": self.fingerprint}) + "\n")
            self._handle.flush()
        return self

    def write(self, record: PerturbationSet) -> None:
        self._handle.write(record.to_json() + "\n")
        self._handle.flush()

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


def _finished_sets(
    output: Path, journal: Path, provenance: dict[str, Any], questions: list[Question]
) -> dict[str, PerturbationSet]:
    """Sets of ``output`` and ``journal`` that this job can reuse (same settings and text)."""
    fingerprint = settings_fingerprint(provenance)
    texts = {q.id: q.question for q in questions}
    found: dict[str, PerturbationSet] = {}
    if output.exists():
        for lineno, data in _json_lines(output):
            record = _record(data, output, lineno)
            if settings_fingerprint(record.provenance) != fingerprint:
                raise OutputMismatchError(
                    f"{output} holds sets made with other settings ({_difference(record.provenance, provenance)}); "
                    "write to another -o path, or pass --overwrite to replace it"
                )
            found[record.question.id] = record
    if journal.exists():
        lines = _json_lines(journal)
        header = lines[0][1] if lines else {}
        if header.get("settings") != fingerprint:
            raise OutputMismatchError(
                f"{journal} is an interrupted run with other settings; finish it with those settings, "
                "or pass --overwrite to discard it"
            )
        for lineno, data in lines[1:]:
            record = _record(data, journal, lineno)
            found[record.question.id] = record
    stale = [qid for qid, record in found.items() if texts.get(qid) != record.question.question]
    if stale:
        logger.warning(
            "%d earlier sets belong to questions that are not in the input or changed text; they are regenerated or dropped",
            len(stale),
        )
    return {qid: record for qid, record in found.items() if qid not in stale}


def _json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    out: list[tuple[int, dict[str, Any]]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError:
            if lineno == len(lines):  # cut off by a kill mid-write: that set is redone
                logger.info("%s: ignoring a truncated last line", path)
                continue
            raise OutputMismatchError(
                f"{path}:{lineno}: not valid JSON; this is not a perturbation-set file (use another -o path)"
            ) from None
    return out


def _record(data: dict[str, Any], path: Path, lineno: int) -> PerturbationSet:
    try:
        return PerturbationSet.from_dict(data)
    except (KeyError, TypeError) as err:
        raise OutputMismatchError(f"{path}:{lineno}: not a perturbation set ({err}); use another -o path") from err


def _difference(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    keys = sorted(set(theirs) | set(ours) - {"toolkit_version"})
    changed = [
        f"{k}: {theirs.get(k)!r} there, {ours.get(k)!r} now"
        for k in keys
        if k != "toolkit_version" and theirs.get(k) != ours.get(k)
    ]
    return "; ".join(changed[:4]) or "settings differ"


def _write_output(output: Path, records: Iterable[PerturbationSet]) -> None:
    with atomic_path(output, durable=True) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(record.to_json() + "\n")


def _progress_bar(total: int, initial: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="set", desc="generating", disable=not enabled, dynamic_ncols=True)
