"""``lara detect``: run output-level detectors over questions through one (cached) responder."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from cache.fingerprint import text_hash
from lara_core.files import file_sha256, write_text_atomically

from .calibration.controls import ControlTable
from .calibration.stats import calibrated_scores
from .detectors import REGISTRY, check_access, check_reference, get_detector
from .detectors.base import has_answer
from .errors import ConfigError
from .scores import CLEAN_SPLIT, ScoreTable

if TYPE_CHECKING:
    from .responders.base import Responder

logger = logging.getLogger(__name__)


@dataclass
class DetectSummary:
    """What ``run_detectors`` did.

    Attributes:
        table: one oriented score column per detector.
        raw: the raw statistics (and decision rules), one column each.
        info: detector parameters, notes on approximations, counts.
        controls: the detectors' scores on each question's matched controls (SPEC §8.1), if asked.
    """

    table: ScoreTable
    raw: ScoreTable
    info: dict[str, Any] = field(default_factory=dict)
    controls: ControlTable | None = None

    def describe(self) -> str:
        c = self.info["counts"]
        detectors = [n for n in self.table.columns if "@" not in n]  # not the calibrated columns (<det>@cal)
        extra = len(self.table.columns) - len(detectors)
        lines = [
            f"{len(self.table.ids)} questions x {len(detectors)} detector(s)"
            + (f" (+ {extra} calibrated column(s))" if extra else "")
            + f" in {self.info['seconds']:.1f} s: "
            f"{c['generated']} completions generated, {c['scored']} texts scored, {c['cache_hits']} served from the response store"
            + (f"; {c['requests']} requests to the served model" if c.get("requests") else "")
        ]
        if self.info.get("sampling_temperature") is not None:
            lines.append(
                f"sampling temperature {self.info['sampling_temperature']:g} (detectors whose params set none)"
            )
        if self.controls is not None:
            cal = self.info["calibration"]
            lines.append(
                f"controls: {len(self.controls.ids)} similar questions of {cal['n_questions_with_controls']} questions "
                f"scored by {', '.join(self.controls.columns)}; calibrated columns {', '.join(cal['columns'])}"
            )
        if self.info.get("reference_counts"):
            r = self.info["reference_counts"]
            lines.append(
                f"reference model: {r['scored']} texts scored, {r['cache_hits']} served from the response store"
            )
        lines += [f"note: {n}" for n in self.info["notes"]]
        return "\n".join(lines)

    def write(self, output: str | Path) -> list[Path]:
        """SCORES.csv, .raw.csv, .controls.csv (or none: a stale one from an earlier run is removed)
        and, last, .meta.json, which binds both SCORES.csv and the controls file by their sha256
        (the old meta is removed first, so an interrupted write binds nothing)."""
        output = Path(output)
        raw_path, meta_path, controls_path = (
            output.with_suffix(x) for x in (".raw.csv", ".meta.json", ".controls.csv")
        )
        meta_path.unlink(missing_ok=True)  # an interrupted write leaves no meta, so nothing beside it is trusted
        self.table.write_csv(output)
        self.info["scores_file"] = {"name": output.name, "sha256": file_sha256(output)}
        self.raw.write_csv(raw_path)
        written = [output, raw_path]
        if self.controls is not None:
            self.controls.write_csv(controls_path)
            written.append(controls_path)
            self.info["controls_file"] = {"name": controls_path.name, "sha256": file_sha256(controls_path)}
        else:
            if controls_path.exists():
                logger.info("removing %s: it belongs to an earlier run (these scores have no controls)", controls_path)
                controls_path.unlink()
            self.info["controls_file"] = None
        write_text_atomically(meta_path, json.dumps(self.info, indent=1, default=str) + "\n")
        return [*written, meta_path]


def settings_digest(detector: Any) -> str:
    """What makes two models' scores of one text comparable (SPEC §8.6–8.7), the prompt format
    aside (compared on its own, since a served model's is not visible): the detector and its
    parameters, the sampling temperature included."""
    settings = {"detector": detector.name, "params": detector.get_params()}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def parse_params(items: Sequence[str], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["min_knn.k=5", "cdd.n=20"]`` → ``{"min_knn": {"k": 5}, "cdd": {"n": 20}}`` (values parsed as JSON
    when they are, else kept as strings)."""
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for item in items:
        key, sep, value = item.partition("=")
        detector, dot, param = key.partition(".")
        if not sep or not dot or not param:
            raise ConfigError(f"--param {item!r}: expected DETECTOR.PARAMETER=VALUE, e.g. min_knn.k=5")
        if detector not in out:
            raise ConfigError(f"--param {item!r}: detector {detector!r} is not being run ({', '.join(names)})")
        try:
            out[detector][param] = json.loads(value)
        except json.JSONDecodeError:
            out[detector][param] = value
    return out


def capped_notes(detector: Any, result: Any) -> list[str]:
    """SPEC §5: responses that stop at the token budget are counted (in the meta, always) and noted;
    a detector whose responses mostly did says so. Not for detectors whose budget is part of the
    method (CDD compares the first ``max_tokens`` tokens, partial completion the remainder's length)."""
    if not result.n_capped or detector.capped_by_design:
        return []
    budget = detector.get_params().get("max_new_tokens")
    n = int(result.n_responses.sum())
    text = f"{detector.name}: {result.n_capped} of {n} responses stopped at the token budget ({budget})"
    if result.n_capped * 2 > n:
        text += "; most answers are truncated, so their statistics compare prefixes: raise max_new_tokens"
    return [text]


def check_answers(name: str, ids: Sequence[str], answers: Sequence[Any] | None) -> None:
    """Refuse, before any work, a detector that reads answers when no question has one."""
    if answers is None or not any(has_answer(a) for a in answers):
        raise ConfigError(
            f"detector {name!r} compares answers with each question's known answer, and no question has one: "
            "give questions with an 'answer' field (lara questions import extracts it), or drop the detector"
        )


def nan_notes(name: str, result: Any, ids: Sequence[str]) -> list[str]:
    """Questions a detector could not score (NaN) are counted where the scores are shown; every
    statistic downstream leaves them out and counts them again."""
    missing = [i for i, v in zip(ids, result.scores) if np.isnan(v)]
    if not missing:
        return []
    shown = ", ".join(missing[:5]) + (", …" if len(missing) > 5 else "")
    return [f"{name}: {len(missing)} of {len(ids)} questions have no score (NaN: {shown})"]


def cut_notes(name: str, result: Any) -> list[str]:
    """SPEC §5: prompts longer than the model's context are cut for their own row only; say how many."""
    n = int(result.prompt_cut.sum())
    if not n:
        return []
    questions = int((result.prompt_cut > 0).sum())
    return [
        f"{name}: {n} prompt(s) of {questions} question(s) exceeded the model's context and lost their first tokens "
        "(per question in the raw table's _prompt_cut column and the meta's prompt_cut_ids)"
    ]


def detector_names(spec: str | Sequence[str], reference: bool = False, answers: bool = False) -> list[str]:
    """Registry names from ``"a,b"`` / ``["a", "b"]``; ``all`` is every detector whose needs can be
    met (those comparing with a reference model only when one is given, those reading answers
    only when the questions have them)."""
    items = [n.strip() for n in spec.split(",")] if isinstance(spec, str) else [str(n).strip() for n in spec]
    items = [n for n in items if n]
    if items == ["all"]:
        return [
            n
            for n, cls in REGISTRY.items()
            if (reference or not cls.requires_reference) and (answers or not cls.requires_answers)
        ]
    return items


def checked_detectors(
    spec: str | Sequence[str],
    questions: Sequence[Any],
    reference: bool,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The detectors ``spec`` names for these questions (``all``: those whose needs are met) and
    their parameters, every name and parameter checked before any model work (ConfigError)."""
    names = detector_names(spec, reference=reference, answers=any(has_answer(q.answer) for q in questions))
    chosen: dict[str, dict[str, Any]] = {n: {} for n in names}
    for name, values in (params or {}).items():
        if name not in chosen:
            raise ConfigError(f"params for {name!r}, which is not being run ({', '.join(names)})")
        chosen[name].update(values)
    for name in names:
        get_detector(name, **chosen[name])
    return names, chosen


def with_sampling_temperature(
    params: dict[str, dict[str, Any]], names: Sequence[str], temperature: float | None
) -> dict[str, dict[str, Any]]:
    """``params`` with ``temperature`` given to every named detector that declares it samples at a
    temperature (``samples_at_temperature``: CDD, Min-kNN, Entropy-Temp, policy drift, reward
    gain), unless its own parameters set one (SPEC §5: audit at the RL rollouts' temperature when
    it is known)."""
    out = {n: dict(params.get(n, {})) for n in names}
    if temperature is None:
        return out
    for n in names:
        if n in REGISTRY and REGISTRY[n].samples_at_temperature:
            out[n].setdefault("temperature", temperature)
    return out


def _feeding(detector: Any, responder: Responder) -> tuple[Responder, list[str]]:
    """The responder that runs ``detector`` — ``responder``, or its hf ``fallback`` when its engine
    cannot feed the detector (said in a note) — and the approximation notes."""
    try:
        return responder, check_access(detector, responder)
    except ConfigError:
        fallback = getattr(responder, "fallback", None)
        if fallback is None:
            raise
        missing = ", ".join(sorted(a.value for a in set(detector.needs) - set(responder.access)))
        notes = check_access(detector, fallback)
        return fallback, notes + [
            f"{detector.name}: runs on the hf engine ({responder.identity.get('kind')} does not send {missing})"
        ]


def run_detectors(
    names: Sequence[str],
    ids: Sequence[str],
    questions: Sequence[str],
    responder: Responder,
    params: dict[str, dict[str, Any]] | None = None,
    clean_questions: Sequence[str] = (),
    progress: bool = False,
    reference: Responder | None = None,
    sampling_temperature: float | None = None,
    controls: Mapping[str, Sequence[str]] | None = None,
    calibrate: Sequence[str] | None = None,
    answers: Sequence[Any] | None = None,
    sampling_controls: int | None = None,
    control_answers: Mapping[str, Sequence[Any]] | None = None,
) -> DetectSummary:
    """Score ``questions`` with each named detector (registry names) through ``responder``.

    Args:
        reference: a reference model's responder, for the detectors that compare with one.
        sampling_temperature: the temperature of the sampling detectors whose params set none.
        controls: ``{question id: its matched controls}`` (SPEC §8.1): the detectors in
            ``calibrate`` (default: all) also score them, with the same parameters, and the
            table gains their ``<det>@cal`` columns. A detector that reads answers has no
            controls (generated similars have none).
        answers: each question's known answer (None where unknown), for the detectors that
            read one (``reward_gain``).
        sampling_controls: score only each question's first this many controls with the
            detectors that sample (the others score them all: SPEC §8.10's decision controls,
            one forward pass per text); None = all.
        control_answers: ``{question id: its controls' answers}`` aligned with ``controls``
            (None where unknown; :mod:`generation.answers` re-solves them from worked
            solutions): a detector that reads answers scores the controls that have one.
    """
    start = time.perf_counter()
    params = with_sampling_temperature(params or {}, names, sampling_temperature)
    detectors = [get_detector(n, **params.get(n, {})) for n in names]
    notes: list[str] = []
    feeding: dict[str, Responder] = {}
    references: dict[str, Responder | None] = {}
    for detector in detectors:  # refuse before any work
        feeding[detector.name], more = _feeding(detector, responder)
        notes += more
        # a detector moved to the hf engine compares with the reference on the hf engine too
        references[detector.name] = (
            getattr(reference, "fallback", reference) if feeding[detector.name] is not responder else reference
        )
        check_reference(detector, feeding[detector.name], references[detector.name])
        if detector.requires_answers:
            check_answers(detector.name, ids, answers)
    rows = [(qid, c, text) for qid in ids for c, text in enumerate((controls or {}).get(qid, ()), start=1)]
    row_answers = [_control_answer(control_answers, r[0], r[1]) for r in rows]
    answered = any(has_answer(a) for a in row_answers)
    calibrated = [
        d
        for d in detectors
        if controls is not None and (calibrate is None or d.name in calibrate) and (answered or not d.requires_answers)
    ]
    notes += [
        f"{d.name}: not scored on the controls (no control has an answer: give the questions a worked solution, "
        "extra.solution, for the generator to re-solve; generation.answers); it enters the relative mode against a clean "
        "set with answers"
        for d in detectors
        if controls is not None and d.requires_answers and not answered
    ]
    control_table = (
        ControlTable(
            [r[0] for r in rows],
            np.array([r[1] for r in rows], dtype=np.int64),
            text_hash=[text_hash(r[2]) for r in rows],
        )
        if controls is not None
        else None
    )
    table, raw = ScoreTable(list(ids)), ScoreTable(list(ids))
    bar = _progress(progress, len(detectors) + len(calibrated))
    described, calibration = {}, {}
    for detector in detectors:
        if bar is not None:
            bar.set_postfix_str(detector.name)
        detector.fit(clean_questions, reference=references[detector.name], answers=answers)
        result = detector.score(questions, feeding[detector.name])
        table.add(result.name, result.scores)
        raw.add(result.raw_name, result.raw)
        for key, values in result.extra.items():
            raw.add(f"{result.name}_{key}", np.asarray(values, dtype=np.float64))
        raw.add(f"{result.name}_capped", result.capped)  # SPEC §5: per question, answers cut at the budget
        raw.add(f"{result.name}_prompt_cut", result.prompt_cut)  # and prompts cut to fit the context
        notes += (
            result.notes
            + capped_notes(detector, result)
            + cut_notes(detector.name, result)
            + nan_notes(detector.name, result, ids)
        )
        described[detector.name] = {
            "params": detector.get_params(),
            "raw": result.raw_name,
            "raw_direction": detector.raw_direction,
            "n_nonfinite": int((~np.isfinite(result.scores)).sum()),
            "n_nan": int(np.isnan(result.scores).sum()),
            "settings_digest": settings_digest(detector),
            "responses": result.responses_summary(list(ids)),
        }
        if detector in calibrated:
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"{detector.name} on controls")
            limit = sampling_controls if detector.samples_at_temperature and sampling_controls is not None else None
            mine = [k for k, r in enumerate(rows) if limit is None or r[1] <= limit]
            if detector.requires_answers:  # each control judged against its own (re-solved) answer
                eligible, mine = len(mine), [k for k in mine if has_answer(row_answers[k])]
                detector.fit(
                    clean_questions, reference=references[detector.name], answers=[row_answers[k] for k in mine]
                )
                notes.append(
                    f"{detector.name}: scored on the {len(mine)} of {eligible} controls with a re-solved answer"
                )
            on_controls = detector.score([rows[k][2] for k in mine], feeding[detector.name])
            notes += cut_notes(f"{detector.name} on controls", on_controls)
            column = np.full(len(rows), np.nan)
            column[mine] = on_controls.scores
            control_table.columns[detector.name] = column  # type: ignore[union-attr]
            cal, record = calibrated_scores(result.scores, control_table.matrix(detector.name, ids))  # type: ignore[union-attr]
            table.add(f"{detector.name}@cal", cal)
            calibration[detector.name] = {
                "responses": on_controls.responses_summary([f"{rows[k][0]}#{rows[k][1]}" for k in mine]),
                "n_control_texts": len(mine),
                "zero_scale": record.to_dict(),
            }
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    counter = responder.counter
    uses_reference = reference is not None and any(d.requires_reference for d in detectors)
    info = {
        "detectors": described,
        "responder": responder.identity,
        "reference": reference.identity if uses_reference else None,
        "sampling_temperature": sampling_temperature,
        "notes": notes,
        "counts": _counts(counter),
        "reference_counts": _counts(reference.counter) if uses_reference else None,
        "seconds": time.perf_counter() - start,
    }
    if control_table is not None:
        info["calibration"] = {
            "n_controls_max": int(control_table.index.max()) if rows else 0,
            "n_questions_with_controls": len({r[0] for r in rows}),
            "n_control_texts": len(rows),
            "columns": [f"{d.name}@cal" for d in calibrated],
            "detectors": calibration,
        }
    return DetectSummary(table=table, raw=raw, info=info, controls=control_table)


def _control_answer(answers: Mapping[str, Sequence[Any]] | None, qid: str, index: int) -> Any:
    """Control ``index`` (1-based) of question ``qid``'s answer, or None."""
    given = (answers or {}).get(qid) or ()
    return given[index - 1] if index <= len(given) else None


def _progress(progress: bool, total: int) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="pass", desc="detect")


def _counts(counter: Any) -> dict[str, int]:
    return {
        "generated": counter.generated,
        "scored": counter.scored,
        "cache_hits": counter.cache_hits,
        "requests": counter.requests,
    }


def detect_questions(
    questions: Sequence[Any],
    names: Sequence[str],
    responder: Responder,
    *,
    params: dict[str, dict[str, Any]] | None = None,
    reference: Responder | None = None,
    sampling_temperature: float | None = None,
    sets: Sequence[Any] | None = None,
    n_controls: int = 3,
    calibrate: Sequence[str] | None = None,
    progress: bool = False,
    ranks: Any = None,
    decision_controls: int | None = None,
    sampling_controls: int | None = None,
) -> DetectSummary | None:
    """Score ``questions`` (``generation.records.Question``) with the detectors ``names`` — the
    entry ``lara detect``, the ``detect`` stage and the Python API share. ``sets``: the questions'
    perturbation sets, whose first ``n_controls`` similar questions are scored as controls
    (``calibrate``: by these detectors only; ``decision_controls``: the detectors that do not
    sample score this many, ``sampling_controls`` the ones that do, both at least ``n_controls``);
    questions of split ``clean_ref`` are the clean set
    of the detectors that need one; answers are passed to those that need them. Under a launched
    job (``ranks``), the counts are summed over the ranks and only the main rank gets the summary
    (the others get None)."""
    controls = answers_of_controls = None
    if sets is not None:
        from .calibration.controls import control_answers, control_texts

        most = max(n_controls, decision_controls or 0, sampling_controls or 0)
        controls, answers_of_controls = control_texts(list(sets), most), control_answers(list(sets), most)
    sampling = max(n_controls, sampling_controls or 0)
    summary = run_detectors(
        list(names),
        [q.id for q in questions],
        [q.question for q in questions],
        responder,
        params,
        clean_questions=[q.question for q in questions if q.split == CLEAN_SPLIT],
        progress=progress,
        reference=reference,
        sampling_temperature=sampling_temperature,
        controls=controls,
        calibrate=list(calibrate) if calibrate is not None else None,
        answers=[q.answer for q in questions],
        sampling_controls=sampling if (decision_controls or 0) > sampling else None,
        control_answers=answers_of_controls,
    )
    if ranks is not None:
        from .responders.distributed import sum_counts_over_ranks

        sum_counts_over_ranks(summary.info, ranks)
        if not ranks.is_main:
            return None
    return summary
