"""A model's score files as a verdict reads them: ``SCORES.csv``, the ``SCORES.controls.csv`` that
belongs to it, and what ``SCORES.meta.json`` says about both.

``lara detect`` writes the meta last and records in it the sha256 of the controls file it wrote
(or that it wrote none), and each detector's settings digest. A controls file is therefore used
only when the meta binds it to these scores: a file left beside them by another run (another
model, another ``--sets``) is never picked up, and one given explicitly that the meta does not
bind is refused in one line.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lara_core.files import file_sha256

from ..errors import InputError, MismatchError
from ..scores import ScoreTable
from .controls import ControlTable

logger = logging.getLogger(__name__)


@dataclass
class ScoredFiles:
    """What was read: the scores, their controls (None without), each detector's settings digest
    (``{}`` when no meta says), and notes for the output."""

    scores: ScoreTable
    controls: ControlTable | None
    settings: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    prompt_format: dict[str, Any] | None = (
        None  # how the questions were prompted (a local model's; None: unknown or served)
    )


def bound_settings(meta: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any] | None]:
    """From a scores meta (``lara detect``'s ``.meta.json``, or ``DetectSummary.info``): each
    detector's settings digest and the prompt format (``{}`` and None without one)."""
    settings = {
        n: d["settings_digest"] for n, d in (meta or {}).get("detectors", {}).items() if d.get("settings_digest")
    }
    return settings, ((meta or {}).get("responder") or {}).get("prompt_format")


def read_scored(
    scores_path: str | Path, controls_path: str | Path | None = None, use_controls: bool = True
) -> ScoredFiles:
    """``scores_path`` and its controls (``controls_path``, default the bound file beside it).

    ``use_controls=False`` reads the scores alone (a run whose calibration is off).

    Raises:
        MismatchError: the controls file is not the one the scores' meta binds.
        InputError: a bound controls file is missing, or a file is unreadable.
    """
    scores_path = Path(scores_path)
    table = ScoreTable.read_csv(scores_path)
    meta = _read_meta(scores_path.with_suffix(".meta.json"))
    stale_meta = meta is not None and not _meta_describes(meta, scores_path)
    if stale_meta:
        meta = None
    settings, prompt = bound_settings(meta)
    out = ScoredFiles(table, None, settings, prompt_format=prompt)
    if stale_meta:
        out.notes.append(
            f"{scores_path.with_suffix('.meta.json').name} was written with other scores than {scores_path.name} "
            "(an interrupted write, or another run's file): it is not used"
        )
    if not use_controls:
        return out
    beside = scores_path.with_suffix(".controls.csv")
    given = Path(controls_path) if controls_path is not None else None
    if meta is None or "controls_file" not in meta or not _meta_describes(meta, scores_path):
        return _unbound(out, scores_path, given, beside)
    bound = meta["controls_file"]
    if bound is None:
        if given is not None:
            raise MismatchError(
                f"{scores_path} was scored without controls ({scores_path.with_suffix('.meta.json').name} "
                f"says so), so {given} belongs to another run; rerun lara detect with --sets to score controls"
            )
        if beside.exists():
            out.notes.append(f"ignored {beside.name}: it belongs to an earlier run (these scores have no controls)")
        return out
    path = given or scores_path.with_name(bound["name"])
    if not path.is_file():
        raise InputError(
            f"{scores_path.with_suffix('.meta.json').name} records the controls file {bound['name']}, which is "
            f"missing; rerun lara detect --sets to the same -o"
        )
    digest = file_sha256(path)
    if digest != bound["sha256"]:
        raise MismatchError(
            f"{path} does not belong to {scores_path}: the scores' meta records controls with sha256 "
            f"{bound['sha256'][:12]}…, this file has {digest[:12]}… (written by another lara detect run); "
            "rerun lara detect --sets to the same -o, or give the right file with --controls"
        )
    out.controls = ControlTable.read_csv(path)
    return out


def _meta_describes(meta: dict[str, Any], scores_path: Path) -> bool:
    """Whether the meta was written with these very scores (its recorded sha256 of SCORES.csv)."""
    bound = meta.get("scores_file")
    return bound is None or bound.get("sha256") == file_sha256(scores_path)


def _unbound(out: ScoredFiles, scores_path: Path, given: Path | None, beside: Path) -> ScoredFiles:
    """Scores without a meta that binds controls (made by hand, or by an earlier version): only an
    explicitly given controls file is used, and the output says it was not checked."""
    if given is not None:
        out.controls = ControlTable.read_csv(given)
        out.notes.append(
            f"{given.name} was given with scores that do not record their controls; that they belong "
            f"together was not checked"
        )
    elif beside.exists():
        out.notes.append(
            f"ignored {beside.name}: {scores_path.name} does not record which controls it was scored "
            "with (no lara detect meta); name the file with --controls to use it"
        )
    return out


def _read_meta(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg}); rerun lara detect, or delete it") from None
    return meta if isinstance(meta, dict) else None


def check_settings(audited: Any, other: Any, names: list[str], role: str) -> list[str]:
    """Refuse a reference or clean set scored with other detector parameters, or (both being local
    models) another prompt format, than the audited scores; notes for what could not be compared."""
    notes = []
    for name in names:
        ours, theirs = audited.settings.get(name), other.settings.get(name)
        if ours and theirs and ours != theirs:
            raise MismatchError(
                f"the {role} scored {name!r} with other detector settings than the audited model (settings "
                f"digest {theirs[:12]}… vs {ours[:12]}…): rerun both with the same detector parameters and "
                "sampling temperature"
            )
        if not (ours and theirs):
            notes.append(
                f"{name}: the {role}'s detector settings were not compared with the audited model's (a score file "
                "has no lara detect meta)"
            )
    a, b = audited.prompt_format, other.prompt_format
    if a is not None and b is not None and a != b:
        raise MismatchError(
            f"the {role} read its questions in another prompt format than the audited model ({b} vs {a}); "
            "score both with the same --prompt-format, --template and --system-prompt"
        )
    if names and (a is None) != (b is None):
        notes.append(
            f"the prompt formats of the audited model and the {role} were not compared (one is a served model)"
        )
    return notes


def check_aligned(audited: Any, reference: Any, names: list[str]) -> list[str]:
    """Refuse a reference that did not score the audited model's control texts with the same settings
    (SPEC §8.7: differences are taken control by control). ``audited`` / ``reference``:
    :class:`~probes.calibration.verdict.ScoredSet`. Returns notes when something could not be
    checked (tables built in code carry no text hashes)."""
    notes = check_settings(audited, reference, names, "reference")
    a, r = (s.controls.hashes() if s.controls is not None else None for s in (audited, reference))
    if a is None or r is None:
        return notes + ["the two models' control texts were not compared (a control table carries no text hashes)"]
    wanted = set(audited.ids)
    for key, digest in sorted(a.items()):
        if key[0] in wanted and key in r and r[key] != digest:
            raise MismatchError(
                f"the reference's control {key[1]} of question {key[0]!r} is another text than the audited "
                "model's: the two were scored on different perturbation sets; score both with the same "
                "--sets file"
            )
    return notes
