"""Representation drift from Python (SPEC §10): how far RL moved each question's pooled vector,
read from two activation stores of the same texts — no forward pass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .lara import as_questions
from .models import open_store


@dataclass
class Drift:
    """Each question's drift and, with labels, the layer map.

    Attributes:
        values: ``pandas.DataFrame`` ``[N questions, L layers]``: 1 − cos of the audited model's and
            the reference's mean-pooled vectors (NaN: the text is missing from a store).
        map: the layer map (:func:`probes.lara.drift.store_drift_map`: per layer Cohen's d, AUC,
            family-wise-adjusted p, members' and non-members' mean drift, the placebo; ``"error"``
            when it cannot be drawn), None without labels.
    """

    values: Any
    map: dict[str, Any] | None

    def __repr__(self) -> str:
        if self.map is None:
            return f"Drift({len(self.values)} questions × {self.values.shape[1]} layers; no labels: no map)"
        if "error" in self.map:
            return f"Drift({len(self.values)} questions; no map: {self.map['error']})"
        found = ", ".join(self.map["significant_layers"]) or "none"
        return f"Drift({self.map['members']} members, {self.map['non_members']} non-members; layers beyond the null: {found})"


def drift(
    audited: str | Path | Any,
    reference: str | Path | Any,
    questions: Any,
    *,
    labels: Mapping[str, int | None] | None = None,
    groups: Mapping[str, Any] | None = None,
    n_permutations: int = 1000,
    seed: int = 0,
) -> Drift:
    """The drift of each question between the audited model's activation store and the
    reference's (paths or :func:`probes.open_store` stores, the same layers), and with labels
    (``labels``, or the questions' own ``label``) the layer map with LaRA's nulls: the max-|d|
    permutation null (within ``groups``: id → matched group) and non-member placebos — what
    ``lara evaluate --activations … --reference-activations …`` shows beside LaRA's map."""
    import pandas as pd

    from ..lara.drift import pooled_drift, store_drift_map  # lazy: with the store readers, pulls h5py

    a = open_store(audited) if isinstance(audited, (str, Path)) else audited
    r = open_store(reference) if isinstance(reference, (str, Path)) else reference
    records = as_questions(questions)
    values = pooled_drift(a, r, [q.question for q in records])
    frame = pd.DataFrame(values, index=pd.Index([q.id for q in records], name="id"), columns=list(a.layer_labels))
    if labels is None:
        labels = {q.id: q.label for q in records if q.label is not None}
    layer_map = (
        store_drift_map(a, r, {q.id: q.question for q in records}, labels, groups, n_permutations, seed)
        if labels
        else None
    )
    return Drift(frame, layer_map)
