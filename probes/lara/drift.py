"""Representation drift (SPEC §10): how far RL moved each text's pooled representation, read from
the two activation stores a run with a reference already writes — no forward pass.

Per text and layer l, d_l = 1 − cos(h^A_l, h^R_l) of the audited model's and the reference's
mean-pooled block outputs of the same text. Two readings:

* **a score per question**: its drift against its own matched controls' (the similars its
  perturbation set holds, in both stores), each layer standardised by the controls' median and
  1.4826·MAD (layers whose controls' scale is ≤ ε left out, as LaRA leaves out zero-scale cells),
  averaged over the layers; higher = member (moved more than questions like it). NaN with fewer
  than two controls, counted.
* **a layer map**: per layer, Cohen's d and AUC of members against non-members with LaRA's nulls
  (:mod:`probes.evaluation.layer_null`): the max-|d| permutation null within matched groups,
  placebos on random halves of the non-members; the reference against itself reads 0 on every
  text (checked by ``benchmarks/bench_drift.py`` on its store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..evaluation.layer_null import N_PERMUTATIONS, PLACEBO_SPLITS, layer_null, placebo_splits, placebo_summary
from ..evaluation.roc import auc, roc_points
from ..robust import DEFAULT_TOL, robust_scale, zero_mad

MIN_CONTROLS = 2
MIN_PLACEBO_NON_MEMBERS = 4  # the placebo halves the non-members: each half needs 2
SAME_MODEL_TOL = 1e-9  # a drift below this on every question: the two stores hold the same model


def cosine_drift(audited: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``[n, L]`` 1 − cos of the two models' ``[n, L, d]`` vectors of the same texts (NaN where a
    vector is 0)."""
    a, r = np.asarray(audited, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(r, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms > 0, 1.0 - (a * r).sum(-1) / norms, np.nan)


def pooled_drift(audited: Any, reference: Any, texts: Sequence[str | None], chunk: int = 2048) -> np.ndarray:
    """``[n, L]`` drift of each text between two :class:`cache.store.ActivationStore` (NaN rows for
    a text missing from either, or None; stores that :func:`incomparable` names are refused)."""
    problem = incomparable(audited, reference)
    if problem:
        raise ValueError(problem)
    out = np.full((len(texts), len(audited.layer_labels)), np.nan)
    held = [i for i, t in enumerate(texts) if t is not None and t in audited and t in reference]
    for start in range(0, len(held), chunk):
        rows = held[start : start + chunk]
        chosen = [str(texts[i]) for i in rows]
        out[rows] = cosine_drift(audited.get(chosen), reference.get(chosen))
    return out


@dataclass
class QuestionDrift:
    """Each question's drift and its controls'.

    Attributes:
        ids: ``[N]`` question ids.
        original: ``[N, L]`` the question's drift.
        controls: ``[N, K, L]`` its controls' (NaN where a control is missing).
        layer_labels: the stores' layer labels.
    """

    ids: list[str]
    original: np.ndarray
    controls: np.ndarray
    layer_labels: tuple[str, ...]


def question_drift(sets: Sequence[Any], audited: Any, reference: Any) -> QuestionDrift:
    """The drift of every perturbation set's question and of its similars (its matched controls)."""
    width = max((len(s.similars) for s in sets), default=0)
    texts = [s.question.question for s in sets]
    texts += [t for s in sets for t in list(s.similars) + [None] * (width - len(s.similars))]  # None: NaN rows
    drift = pooled_drift(audited, reference, texts)
    n = len(sets)
    controls = drift[n:].reshape(n, width, drift.shape[1])
    return QuestionDrift([s.question.id for s in sets], drift[:n], controls, tuple(audited.layer_labels))


def drift_scores(original: np.ndarray, controls: np.ndarray, eps: float = DEFAULT_TOL) -> np.ndarray:
    """``[N]`` each question's drift against its controls': per layer (x − median) / (1.4826·MAD + ε)
    of the controls, layers whose controls' MAD is ≤ ε left out, averaged; NaN with fewer than
    :data:`MIN_CONTROLS` controls or no layer left."""
    out = np.full(len(original), np.nan)
    for i, (x, c) in enumerate(zip(original, controls)):
        c = c[np.isfinite(c).all(axis=1)]
        if len(c) < MIN_CONTROLS or not np.isfinite(x).all():
            continue
        scale = robust_scale(c, tol=eps)
        keep = ~zero_mad(scale.mad, eps)
        if keep.any():
            out[i] = float(np.mean(((x - scale.center) / (scale.mad + eps))[keep]))
    return out


def layer_aucs(values: np.ndarray, labels: np.ndarray) -> list[float]:
    """AUC of members against non-members of each column of ``values`` ``[n, L]`` (finite rows)."""
    y = np.asarray(labels).astype(bool)
    return [float(auc(roc_points(y[None], v[None]))[0]) for v in np.asarray(values, dtype=np.float64).T]


def drift_map(
    drift: np.ndarray,
    labels: np.ndarray,
    layer_labels: Sequence[str],
    groups: Sequence[Any] | None = None,
    n_permutations: int = N_PERMUTATIONS,
    seed: int = 0,
    n_placebo: int = PLACEBO_SPLITS,
) -> dict[str, Any]:
    """The layer map of ``drift`` ``[n, L]`` (rows with a non-finite layer left out, counted by
    class): Cohen's d with family-wise-adjusted p per layer (max-|d| permutation null, within
    ``groups``), AUC per layer and, with at least :data:`MIN_PLACEBO_NON_MEMBERS` non-members, the
    placebo over ``n_placebo`` random halves of them (a map that must read null: its share of
    splits with any significant layer ≈ α; None with fewer, as LaRA's map)."""
    y = np.asarray(labels).astype(int)
    keep = np.isfinite(drift).all(axis=1)
    values, yk = drift[keep][:, None, :], y[keep]
    kept_groups = [g for g, k in zip(groups, keep) if k] if groups is not None else None
    null = layer_null(values, yk, kept_groups, n_permutations, seed)
    placebo = (
        placebo_splits(values, yk, n_permutations, seed, n_placebo)
        if (yk == 0).sum() >= MIN_PLACEBO_NON_MEMBERS
        else None
    )
    return {
        "layer_labels": list(layer_labels),
        "n": int(keep.sum()),
        "left_out": {"members": int((~keep & (y == 1)).sum()), "non_members": int((~keep & (y == 0)).sum())},
        "members": int(yk.sum()),
        "non_members": int((1 - yk).sum()),
        "d": null["d"][0].tolist(),
        "p_layer": null["p_layer"].tolist(),
        "auc": layer_aucs(drift[keep], yk),
        "significant_layers": [layer_labels[j] for j in null["significant_layers"]],
        "observed_max": null["observed_max"],
        "null_max": null["null_max"],
        "p_global": null["p_global"],
        "alpha": null["alpha"],
        "permutation": null["permutation"],
        "n_permutations": n_permutations,
        "placebo": None if placebo is None else placebo_summary(placebo, int((yk == 0).sum())),
        "mean_drift": {
            "members": np.nanmean(drift[keep][yk == 1], axis=0).tolist(),
            "non_members": np.nanmean(drift[keep][yk == 0], axis=0).tolist(),
        },
    }


def store_drift_map(
    audited: Any,
    reference: Any,
    texts: Mapping[str, str],
    labels: Mapping[str, int | None],
    groups: Mapping[str, Any] | None = None,
    n_permutations: int = N_PERMUTATIONS,
    seed: int = 0,
) -> dict[str, Any]:
    """The layer map (:func:`drift_map`) of the labelled questions' drift between two activation
    stores, keyed by question id (``texts``: id → the question's text as the stores hold it; labels
    1 / 0, others left out). Questions missing from either store are left out and counted
    (``not_in_stores``), as are labelled ids without a text (``no_text``) and drifts that are not
    finite (``left_out``, a zero vector); groups with an undeclared member permute freely (as
    LaRA's map). Stores that cannot be compared (other layers, width, pooling or prompt format), the
    same model twice, or fewer than 2 members or 2 non-members left: ``{"error": …}`` and the counts."""
    ids = [i for i, v in labels.items() if v in (0, 1) and i in texts]
    counts: dict[str, Any] = {"no_text": sum(v in (0, 1) and i not in texts for i, v in labels.items())}
    mismatch = incomparable(audited, reference)
    if mismatch:
        return {"error": mismatch, "not_in_stores": 0, **counts}
    held = [i for i in ids if texts[i] in audited and texts[i] in reference]
    counts["not_in_stores"] = len(ids) - len(held)
    y = np.array([int(labels[i]) for i in held], dtype=int)
    drift = pooled_drift(audited, reference, [texts[i] for i in held])
    finite = np.isfinite(drift).all(axis=1) if len(held) else np.zeros(0, dtype=bool)
    counts["left_out"] = {"members": int((~finite & (y == 1)).sum()), "non_members": int((~finite & (y == 0)).sum())}
    if min(int(y[finite].sum()), int((1 - y[finite]).sum())) < 2:
        return {
            "error": "the drift map needs at least 2 members and 2 non-members with a finite drift in both stores",
            **counts,
        }
    if float(np.abs(drift[finite]).max()) < SAME_MODEL_TOL:
        return {
            "error": "the two stores hold the same vectors (the audited model is the reference): no drift",
            **counts,
        }
    group_list = [groups.get(i) for i in held] if groups else None
    if group_list is not None and any(g is None for g in group_list):
        group_list = None  # a partial declaration is no design: permute freely
    out = drift_map(drift, y, list(audited.layer_labels), group_list, n_permutations, seed)
    return {**out, **{k: v for k, v in counts.items() if k != "left_out"}}


def incomparable(audited: Any, reference: Any) -> str | None:
    """Why two activation stores' vectors of a text cannot be compared (None: they can): other
    layers, width, pooling or prompt format (the drift would mix formatting with RL)."""
    if tuple(audited.layer_labels) != tuple(reference.layer_labels):
        return (
            f"the activation stores have different layers ({', '.join(audited.layer_labels)} vs "
            f"{', '.join(reference.layer_labels)}): extract both models with the same extraction.layers"
        )
    if audited.d_model != reference.d_model:
        return f"the activation stores have different widths (d_model {audited.d_model} vs {reference.d_model})"
    for field in ("pooling", "prompt"):
        a, r = (getattr(s, "provenance", {}).get(field) for s in (audited, reference))
        if a != r:
            return f"the activation stores were pooled with different {field} settings ({a} vs {r}): extract both alike"
    return None
