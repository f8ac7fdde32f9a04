"""Detectors, fusion, the verdict and evaluation from Python, over the same library entries
``lara detect`` / ``lara verdict`` / ``lara run`` use."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..detectors.selection import checked_detectors
from ..errors import ConfigError
from ..evaluation import evaluate as evaluate_column
from ..responders.engines import resolve_engine
from ..responders.local import PromptFormat
from ..responders.registry import LOCAL, check_engine_args
from ..responders.store import ResponseStore
from ..scores import CLEAN_SPLIT, ScoreTable
from ..verdicts.modes import VerdictSettings
from .lara import as_questions
from .models import load_model
from .progress import show_progress
from .results import Detection, Verdict


def detect(
    model: Any,
    questions: Any,
    detectors: str | Sequence[str] = "all",
    *,
    reference: Any = None,
    sets: Sequence[Any] | None = None,
    n_controls: int = 3,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    store: str | Path | None = None,
    prompt_format: str = "auto",
    template: str = "{prompt}",
    system_prompt: str | None = None,
    batch_size: int = 16,
    sampling_temperature: float | None = None,
    calibrate: Sequence[str] | None = None,
    progress: bool | None = None,
    engine: str = "auto",
    engine_args: Mapping[str, Any] | None = None,
    decoding: str = "auto",
    **old_engine_keys: Any,
) -> Detection:
    """Score ``questions`` with output-level detectors (SPEC §5), as ``lara detect`` does.

    Args:
        model: anything :func:`probes.load_model` takes.
        questions: strings, dicts (``id``, ``question``, ``answer``, ``label``, ``split``) or
            ``Question`` records; questions of split ``clean_ref`` are the clean set.
        detectors: registry names (``"ppl,min_k"`` or a list); ``all``: every detector whose needs
            are met (those comparing with a reference only with ``reference``, those reading
            answers only when the questions have them).
        reference: the model before RL (anything :func:`probes.load_model` takes), for ``ref``,
            ``policy_drift``, ``reward_gain`` and the verdict's reference mode.
        sets: the questions' perturbation sets (:func:`probes.perturb`): their first
            ``n_controls`` similar questions are scored as controls, for the verdict (the likelihood
            family scores up to 10 of them, for the per-question decisions: `calibration.decision_controls`).
        params: per-detector parameters, ``{"min_knn": {"n": 8}}``.
        store: the response store keeping every answer and score (default: the one ``lara
            detect`` uses, ``~/.cache/lara-probes/responses.sqlite``), so a repeated call is served from it.
        prompt_format, template, system_prompt, batch_size, sampling_temperature, calibrate: as
            the flags of ``lara detect``.
        progress: progress bars of the sampling and scoring; default: on in a notebook or a
            terminal, off in a script whose output goes elsewhere.
        engine: a registered engine (``model`` a checkpoint directory for any but ``hf``) or
            ``auto`` (the faster installed one); ``engine_args``: its arguments, checked against the
            ones it declares (``model.engine_args``; docs/detectors.md, "Engines").
        decoding: the built-in sampler's loop (``dynamic``, ``static``, ``auto``: ``detect.decoding``).
        old_engine_keys: an engine's arguments under their deprecated keyword (``vllm=``), read as
            ``engine_args`` with a warning; any other keyword is refused.
    """
    from ..detectors.on_controls import ControlPlan  # lazy: pulls h5py
    from ..operations.detect import DetectOptions, ModelAccess  # lazy: pulls torch and h5py
    from ..operations.detect import detect as detect_operation  # lazy: pulls torch and h5py
    from ..responders.open import default_store_path  # lazy: pulls h5py

    progress = show_progress(progress)
    records = as_questions(questions)
    # each detector built once, its parameters checked before any model work
    built = checked_detectors(detectors, records, reference is not None, params, sampling_temperature)
    store = ResponseStore(Path(store) if store else default_store_path())
    options = DetectOptions(
        PromptFormat(mode=prompt_format, template=template, system=system_prompt),
        batch_size=batch_size,
        decoding=decoding,
        sampling_temperature=sampling_temperature,
        controls=ControlPlan.from_sets(sets, n_controls, calibrate=calibrate) if sets is not None else None,
        progress=progress,
    )
    audited = ModelAccess(
        lambda: load_model(model), store, engine=_engine_settings(model, engine, engine_args, old_engine_keys)
    )
    ref = ModelAccess(lambda: load_model(reference), store) if reference is not None else None
    summary = detect_operation(records, built, audited, options, ref)
    return Detection(summary, {q.id: q.label for q in records}, {q.id: q.split for q in records})  # type: ignore[arg-type]


def _engine_settings(model: Any, engine: str, engine_args: Any, old_keys: Mapping[str, Any]) -> Any:
    """The audited model's :class:`ModelSettings` when an engine other than hf runs it, else None;
    the engine's arguments checked first, before any model loads."""
    from ..responders.model_settings import ModelSettings, read_old_engine_keys  # lazy: pulls cache's config

    read = read_old_engine_keys({"engine_args": engine_args, **old_keys}, "probes.detect")
    if unexpected := sorted(set(read) - {"engine_args"}):
        raise TypeError(f"detect() got an unexpected keyword argument {unexpected[0]!r}")
    engine_args = check_engine_args(engine, read["engine_args"])  # before any model loads
    source = str(model) if isinstance(model, (str, Path)) else None
    chosen = resolve_engine(engine, source)
    if chosen == LOCAL:
        return None
    if source is None:
        raise ConfigError(
            f"engine {chosen!r} reads a checkpoint directory: pass its path as the model, or use engine {LOCAL!r}"
        )
    return ModelSettings(source=source, engine=chosen, engine_args=engine_args)


def fuse(
    scores: Detection | Any,
    detectors: Sequence[str],
    method: str = "robust-z",
    *,
    clean: Sequence[str] | None = None,
    labels: Mapping[str, int | None] | None = None,
    **options: Any,
) -> Any:
    """Fuse detector columns into one score (SPEC §6): ``robust-z`` (default), ``rank-mix`` or
    ``stacking``. ``scores``: a :class:`Detection` or a ``pandas.DataFrame`` indexed by id;
    ``clean``: the ids of the clean reference (default: the questions of split ``clean_ref``,
    else labelled non-members, cross-fitted). Returns a ``pandas.Series``; how it was fused is in
    its ``.attrs["how"]``."""
    import pandas as pd

    from ..fusion import fuse as fuse_table  # lazy: pulls h5py

    frame = scores.scores if isinstance(scores, Detection) else scores
    splits = dict(scores.splits) if isinstance(scores, Detection) else {}
    labels = dict(labels if labels is not None else scores.labels if isinstance(scores, Detection) else {})
    if clean is not None:
        splits = {i: (CLEAN_SPLIT if i in set(clean) else None) for i in frame.index}
    fused = fuse_table(_table(frame), list(detectors), method, labels=labels, splits=splits, **options)
    series = pd.Series(fused.values, index=frame.index, name="+".join(detectors))
    series.attrs["how"] = fused.describe()
    return series


def verdict(
    audited: Detection,
    *,
    reference: Detection | None = None,
    clean: Detection | None = None,
    subsets: Sequence[str] | None = None,
    **settings: Any,
) -> Verdict:
    """The label-free verdict on ``audited`` (SPEC §8) and its per-question decisions (§8.10), as
    ``lara verdict`` computes them: the reference mode when ``reference`` (the model before RL,
    scored on the same questions and controls) is given, the relative mode against ``clean`` (or
    the audited questions of split ``clean_ref``), else the uncalibrated absolute mode.
    ``settings``: fields of ``probes.verdicts.modes.VerdictSettings`` (``alpha``, ``fdr``,
    ``permutations``…). Labels are never used by the verdict itself: when the questions have
    them, the ``members`` and ``non_members`` subsets get verdicts of their own (``subsets`` picks
    others: a split name, or ``[]`` for none)."""
    from ..verdicts.on_files import audit_verdict  # lazy: pulls scipy

    if subsets is None and any(v is not None for v in audited.labels.values()):
        subsets = ["members", "non_members"]

    record, decisions = audit_verdict(
        audited.files(),
        reference=reference.files() if reference else None,
        clean=clean.files() if clean else None,
        labels=audited.labels,
        splits=audited.splits,
        subsets=subsets,
        settings=VerdictSettings(**settings),
    )
    return Verdict(record, decisions)


def evaluate(scores: Detection | Any, labels: Mapping[str, int | None] | None = None, **options: Any) -> Any:
    """Labelled evaluation of every score column (SPEC §7): ``pandas.DataFrame`` indexed by
    column, with ROC-AUC, TPR at 5 %, 1 % and 0.1 % FPR (NaN where not resolvable: fewer than
    10/FPR non-members, SPEC §7; ``probes.evaluation.evaluate`` gives there the realised FPR of the
    rule's threshold), F1 at the Youden threshold, each with its bootstrap CI (``*_low`` /
    ``*_high``), and the questions used and left out. ``options``: ``n_bootstrap``, ``seed``, ``fpr``, ``strict`` of
    ``probes.evaluation.evaluate``."""
    import pandas as pd

    frame = (
        scores.to_frame()
        if isinstance(scores, pd.Series)
        else scores.scores
        if isinstance(scores, Detection)
        else scores
    )
    labels = dict(labels if labels is not None else scores.labels if isinstance(scores, Detection) else {})
    known = [i for i in frame.index if labels.get(i) is not None]
    if not known:
        raise ValueError(
            "evaluation needs labels (1 member / 0 non-member) for some questions; none of these ids has one"
        )
    y = np.array([int(labels[i]) for i in known])
    rows = {}
    for column in frame.columns:
        figures = evaluate_column(y, frame.loc[known, column].to_numpy(dtype=float), **options)
        rows[column] = _flatten(figures)
    return pd.DataFrame.from_dict(rows, orient="index")


def _flatten(figures: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    named = {k: v for k, v in figures.items() if isinstance(v, dict) and "value" in v}
    named.update(figures.get("low_fpr", {}))
    for key, fig in named.items():
        out[key] = np.nan if fig.get("value") is None else fig["value"]
        if "ci" in fig:
            low, high = fig["ci"]
            out[f"{key}_low"], out[f"{key}_high"] = (np.nan if low is None else low), (np.nan if high is None else high)
    out.update(n_used=figures["n_used"], n_left_out=figures["n_nonfinite"])
    return out


def _table(frame: Any) -> Any:
    return ScoreTable([str(i) for i in frame.index], {c: frame[c].to_numpy(dtype=float) for c in frame.columns})
