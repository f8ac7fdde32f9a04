"""Which detectors a run builds, with which parameters: names (``all``: those whose needs are met),
``--param`` values, the sampling temperature given to the detectors that sample, every value checked
against the detectors' declarations, and each detector built once."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from .base import REGISTRY, Detector, get_detector


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


def detector_names(spec: str | Sequence[str], reference: bool = False, answers: Sequence[Any] = ()) -> list[str]:
    """Registry names from ``"a,b"`` / ``["a", "b"]``; ``all`` is every detector whose needs can be
    met (those comparing with a reference model only when one is given, those reading answers
    only when some of ``answers``, the questions' known answers, is one they can use)."""
    items = [n.strip() for n in spec.split(",")] if isinstance(spec, str) else [str(n).strip() for n in spec]
    items = [n for n in items if n]
    if items == ["all"]:
        return [
            n for n, cls in REGISTRY.items() if (reference or not cls.requires_reference) and cls.answers_met(answers)
        ]
    return items


def checked_detectors(
    spec: str | Sequence[str],
    questions: Sequence[Any],
    reference: bool,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sampling_temperature: float | None = None,
) -> list[Detector]:
    """The detectors ``spec`` names for these questions (``all``: those whose needs are met), each
    built once with its parameters (and ``sampling_temperature`` where it samples and sets none),
    every name and value checked before any model work (ConfigError)."""
    names = detector_names(spec, reference=reference, answers=[q.answer for q in questions])
    chosen: dict[str, dict[str, Any]] = {n: {} for n in names}
    for name, values in (params or {}).items():
        if name not in chosen:
            raise ConfigError(f"params for {name!r}, which is not being run ({', '.join(names)})")
        chosen[name].update(values)
    return build_detectors(names, chosen, sampling_temperature)


def build_detectors(
    names: Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sampling_temperature: float | None = None,
    params_key: str = "",
) -> list[Detector]:
    """Each named detector built once: its parameters, with ``sampling_temperature`` given to those
    that sample and set none, checked against its declarations (``params_key``: how the user wrote
    them, for the message) and its cross-parameter rules."""
    chosen = with_sampling_temperature(dict(params or {}), names, sampling_temperature)
    return [get_detector(n, params_key=params_key, **chosen[n]) for n in names]


def with_sampling_temperature(
    params: Mapping[str, Mapping[str, Any]], names: Sequence[str], temperature: float | None
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
