"""Everything in a ``lara run`` config checked before stage 1, against the questions it will read:
a misspelled backend, detector, detector parameter or fusion column, or a LaRA score with no
possible clean reference, is refused at once — not after generation and model loading, hours
into a run on a large model. Every problem is named by its config key, all in one message."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from cache.backends import BACKENDS
from cache.errors import ModelLoadError
from cache.gguf import converted_dir, is_converted
from cache.loading import TOKENIZER_FILES
from cache.sources import PACKAGE_PREFIX, resolve_source

from ..detectors import REGISTRY, Detector, check_access, check_reference, get_detector
from ..detectors.checks import unmet_answers
from ..detectors.selection import detector_names, with_sampling_temperature
from ..errors import ConfigError
from ..responders.engines import engine_key
from ..responders.local import LocalResponder
from ..responders.openai_api import OpenAIResponder
from ..responders.registry import engine_entry
from ..scores import AGAINST_REFERENCE, CALIBRATED, CLEAN_SPLIT, derived_column
from .config import RunConfig

logger = logging.getLogger(__name__)

WINDOWS = ("early", "mid", "late")


def validate_run(config: RunConfig, questions: Sequence[Any]) -> dict[str, Detector]:
    """Raise one :class:`ConfigError` listing every problem of ``config`` (by key), if any; else
    return the run's detectors, each built once here with its checked parameters (by name)."""
    labels = [q.label for q in questions]
    splits = {q.split for q in questions}
    answers = [q.answer for q in questions]
    built: dict[str, Detector] = {}
    problems = (
        _sources(config)
        + _generator_model(config)
        + _extraction(config)
        + _engines(config)
        + _detectors(config, answers, built)
        + _chat_templates(config)
        + _lara(config, labels, splits)
        + _fusion(config, labels, splits, answers)
        + _verdict(config, labels, splits, answers)
    )
    if problems:
        raise ConfigError("the config cannot run as it is: " + "; ".join(problems))
    return built


def _sources(config: RunConfig) -> list[str]:
    """Every local model source resolved (SPEC §9): a GGUF architecture transformers cannot load,
    an adapter trained on another base, ``gguf`` or ``peft`` missing — named by model before any
    stage runs. Hub ids are reached when they load."""
    problems = []
    for name, model in config.models():
        if name == config.name and config.detect.endpoint is not None and not config.lara:
            continue  # served: nothing of it is loaded here
        if not _local(model.source) and not (model.base and _local(model.base)):
            continue
        try:
            resolve_source(model.source, model.revision, model.base)
        except ModelLoadError as err:
            problems.append(f"model {name!r}: {err}")
    return problems


def _generator_model(config: RunConfig) -> list[str]:
    """An LLM generator that is the audited model or one of the run's controls (its reference
    among them): it would write and answer its own controls, which the audit then reads as the
    behaviour of questions it never saw — refused, naming both keys."""
    g = config.generation
    if g.backend == "offline":
        return []
    key, wanted = (
        ("generation.local.model", g.local.model)
        if g.backend == "local"
        else ("generation.openai.model", g.openai.model)
    )
    for name, model in config.models():
        role = (
            "the audited model"
            if name == config.name
            else f"the control {name!r}" + (" (the reference)" if name == config.reference_name() else "")
        )
        if _same_model(wanted, model.source) or wanted == name:
            return [
                f"{key}: {wanted!r} is {role}; a generator model must be another model (it would write and "
                "answer the controls it is then audited against)"
            ]
    return []


def _same_model(generator: str, source: str) -> bool:
    """Whether two model specs name the same model: the same string, or the same local path."""
    if generator == source:
        return True
    if _local(generator) and _local(source) and not generator.startswith(PACKAGE_PREFIX):
        return Path(generator).expanduser().resolve() == Path(source).expanduser().resolve()
    return False


def _local(spec: str) -> bool:
    return spec.startswith(PACKAGE_PREFIX) or Path(spec).expanduser().exists() or spec.endswith(".gguf")


def _extraction(config: RunConfig) -> list[str]:
    if config.lara and config.extraction.backend not in BACKENDS:
        return [f"extraction.backend {config.extraction.backend!r}: choose {', '.join(BACKENDS)}"]
    return []


def _engines(config: RunConfig) -> list[str]:
    """An engine that is not installed (vLLM), or an argument its library does not take, refused
    before stage 1."""

    if not config.detect.names:
        return []
    for name, model in config.models():
        if name == config.name and config.detect.endpoint is not None:
            continue
        try:
            key = engine_key(model)
        except ConfigError as err:
            return [f"model.engine: {err}"]
        if key is None:
            if model.engine_args:
                logger.warning(
                    "%s: model.engine auto runs the hf engine here, which takes no arguments: model.engine_args "
                    "(%s) is not used",
                    name,
                    ", ".join(model.engine_args),
                )
            continue
        try:
            engine_entry(key["engine"]).check_further_args(model.engine_args)
        except ConfigError as err:
            return [str(err)]
    return []


def _detectors(config: RunConfig, answers: Sequence[Any], built: dict[str, Detector]) -> list[str]:
    """Problems of the detect section; ``built`` gains each detector, built once."""

    d = config.detect
    names = detector_names(d.names, reference=config.reference_name() is not None, answers=answers)
    problems = [f"detect.names: {_unknown(n, REGISTRY)}" for n in names if n not in REGISTRY]
    problems += [
        f"detect.names: {n!r} compares answers with each question's known answer, and {why}"
        for n in names
        if n in REGISTRY and (why := unmet_answers(REGISTRY[n], answers)) is not None
    ]
    problems += [f"detect.params.{n}: {_unknown(n, REGISTRY)}" for n in d.params if n not in REGISTRY]
    params = with_sampling_temperature(d.params, [n for n in names if n in REGISTRY], d.sampling_temperature)
    for name in (n for n in names if n in REGISTRY):
        try:
            detector = get_detector(
                name, params_key="detect.params.", **params.get(name, {})
            )  # one line naming the key
        except ConfigError as err:
            problems.append(str(err))
            continue
        built[name] = detector
        if d.endpoint is not None:
            problems += _served(name, detector, config.reference_name() is not None)
    problems += [
        f"calibration.detectors: {_unknown(n, REGISTRY)}"
        for n in config.calibration.detectors or ()
        if n not in REGISTRY
    ]
    return problems


def _served(name: str, detector: Any, has_reference: bool) -> list[str]:
    """A detector the served audited model cannot feed: full-vocabulary logits, or log-probs of the
    same tokens as the (always local) reference model's."""

    class _Served:  # what an OpenAI-compatible server offers, without contacting it
        access = OpenAIResponder.access
        identity = {"kind": "openai"}

    class _Local:  # a local reference model, without loading it
        access = LocalResponder.access
        identity = {"kind": "local"}
        vocabulary_fingerprint = "local"

    try:
        check_access(detector, _Served())
        if has_reference:
            check_reference(detector, _Served(), _Local())
    except ConfigError as err:
        return [f"detect.endpoint: {err}"]
    return []


def _chat_templates(config: RunConfig) -> list[str]:
    """``detect.prompt_format: chat`` for a local model whose tokenizer has no chat template (read
    from its directory; a hub id is checked when it loads)."""
    if config.detect.prompt_format != "chat" or not config.detect.names:
        return []
    from transformers import AutoTokenizer

    problems = []
    for name, model in config.models():
        if name == config.name and config.detect.endpoint is not None:
            continue  # the server applies its own template
        directory = _tokenizer_dir(model)
        if directory is not None:
            tokenizer = AutoTokenizer.from_pretrained(
                directory, local_files_only=True, trust_remote_code=model.trust_remote_code
            )
            if not getattr(tokenizer, "chat_template", None):
                problems.append(
                    f"detect.prompt_format 'chat': model {name!r} ({model.source}) has no chat template; use "
                    "prompt_format raw with a template, or auto"
                )
    return problems


def _tokenizer_dir(model: Any) -> str | None:
    """The local directory a model's tokenizer is read from without converting anything: a
    checkpoint, an adapter's own or its base's (None for a hub id or a GGUF file not yet
    converted: checked when it loads)."""
    if not _local(model.source):
        return None
    try:
        source = resolve_source(model.source, model.revision, model.base)
    except ModelLoadError:
        return None  # _sources names it
    while source.kind == "adapter" and source.base is not None:
        if any((Path(source.location) / name).is_file() for name in TOKENIZER_FILES):
            return source.location
        source = source.base
    if source.kind == "gguf":
        converted = converted_dir(str(source.digest))
        return str(converted) if is_converted(converted, str(source.digest)) else None
    return source.location if source.kind == "checkpoint" else None


def _lara(config: RunConfig, labels: list[Any], splits: set[Any]) -> list[str]:
    if not config.lara:
        return []
    mode = config.score.clean_ref
    has_split, has_nonmembers = CLEAN_SPLIT in splits, 0 in labels
    if mode is None and not (has_split or has_nonmembers):
        return [
            "score.clean_ref: LaRA needs a clean reference, and the questions have none — no question has split "
            "'clean_ref' and none is labelled 0; mark known-clean questions, give a file, or set lara: false"
        ]
    if mode == "split" and not has_split:
        return ["score.clean_ref 'split': no question has split 'clean_ref'"]
    if mode == "crossfit" and not has_nonmembers:
        return ["score.clean_ref 'crossfit': no question is labelled 0 (non-member) to cross-fit over"]
    if mode not in (None, "split", "crossfit") and not Path(mode).is_file():
        return [f"score.clean_ref {mode!r}: not 'split', 'crossfit' or an existing file"]
    return []


def _columns(config: RunConfig, answers: Sequence[Any]) -> set[str]:
    """Every score column the run's fusion can read."""
    names = detector_names(config.detect.names, reference=config.reference_name() is not None, answers=answers)
    known = [n for n in names if n in REGISTRY]
    columns = set(names)
    if config.calibrating:
        columns |= {
            derived_column(n, CALIBRATED)
            for n in known
            if config.calibration.detectors is None or n in config.calibration.detectors
        }
    if config.reference_name() is not None:
        columns |= {derived_column(n, AGAINST_REFERENCE) for n in known if not REGISTRY[n].requires_reference}
    if config.lara:
        columns |= {"lara"}
        if config.score.variants:
            columns |= {f"lara_{m.lower()}" for m in config.score.metric_set} | {f"lara_{w}" for w in WINDOWS}
    return columns


def _fusion(config: RunConfig, labels: list[Any], splits: set[Any], answers: Sequence[Any]) -> list[str]:
    columns, problems = _columns(config, answers), []
    for i, spec in enumerate(config.fusion):
        problems += [
            f"fusion[{i}].detectors: no score column {c!r} in this run ({', '.join(sorted(columns))})"
            for c in spec.detectors
            if c not in columns
        ]
        columns.add(spec.column())  # a later fusion may read this one's column
        if spec.method == "stacking" and not any(x is not None for x in labels):
            problems.append(f"fusion[{i}].method stacking learns from labels, and no question has one")
        if spec.method == "robust-z" and spec.clean_ref is None and CLEAN_SPLIT not in splits and 0 not in labels:
            problems.append(
                f"fusion[{i}].clean_ref: robust-z needs a clean reference (split clean_ref or label 0 questions), "
                "or clean_ref: all"
            )
    return problems


def _verdict(config: RunConfig, labels: list[Any], splits: set[Any], answers: Sequence[Any]) -> list[str]:
    names = _columns(config, answers) | {spec.column() for spec in config.fusion}
    problems = [
        f"verdict.detectors: {n!r} is not a score column of this run"
        for n in config.verdict.detectors or ()
        if n not in names
    ]
    for name in config.verdict.subsets:
        if name in ("members", "non_members"):
            if {"members": 1, "non_members": 0}[name] not in labels:  # an audit without labels: said, not refused
                logger.warning(
                    "verdict.subsets: no question is labelled %d, so the %s subset gets no verdict",
                    1 if name == "members" else 0,
                    name,
                )
        elif name not in splits:
            problems.append(f"verdict.subsets: {name!r} is neither members, non_members nor a split of the questions")
    return problems


def _unknown(name: str, known: Any) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return (
        f"unknown detector {name!r}"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f"; known: {', '.join(known)}"
    )
