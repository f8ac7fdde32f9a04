"""What makes two models' score files comparable (the verdict's rules): the same detector settings,
the same prompt format, the same control texts. The bundle itself (writing, reading, binding by
sha256) is :mod:`probes.scorefiles`.
"""

from __future__ import annotations

from typing import Any

from ..errors import MismatchError


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
    :class:`~probes.verdicts.modes.ScoredSet`. Returns notes when something could not be
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
