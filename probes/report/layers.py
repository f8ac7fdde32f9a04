"""The report's layer analysis (SPEC §7, §4.5 item 5): per (metric, layer) Cohen's d and class
profiles of m̃, the early/mid/late window table — and the nulls every layer-wise figure is read
against: the max-|d| permutation null (family-wise-adjusted p per cell and layer), a placebo on a
random split of the non-members, the reference checkpoint's own map with the depth-profile
contrast (audited − reference), and the clean reference's size relative to the audited set."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..evaluation.effect import cohens_d, cohens_d_ci, group_means_ci, window_means
from ..evaluation.layer_null import N_PERMUTATIONS, PLACEBO_SPLITS, layer_null, placebo_splits, placebo_summary
from ..lara.geometry import METRIC_NAMES
from ..lara.layers import available_windows
from ..lara.metrics_file import MetricsFile
from ..lara.protocol import compress
from ..scores import align_labels

MIN_CONTROL_RATIO = 2.0  # "Excess Separability": a control set at least twice the suspect set
CONTROL_WARNING = (
    "the clean reference is smaller than twice the audited set: the level of layer-wise statistics is then "
    "unreliable (read only the permutation-null figures)"
)


def layer_analysis(
    metrics: MetricsFile,
    labels: Mapping[str, int | None],
    n_bootstrap: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    *,
    groups: Mapping[str, str | None] | None = None,
    reference: MetricsFile | None = None,
    n_permutations: int = N_PERMUTATIONS,
    lara_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Per (metric, layer) Cohen's d and class profiles of m̃, the window table, and their nulls.

    Args:
        metrics: the audited model's metrics file (``[N, 3, L]``).
        labels: question id → 1 / 0 / None.
        groups: question id → matched group (labels are permuted within groups holding both).
        reference: the reference (pre-RL) checkpoint's metrics file of the same questions (placebo
            map and depth-profile contrast).
        lara_info: the LaRA scoring's meta (``n_reference``, ``n_audited``) for the control-set size.
    """
    y, _ = align_labels(metrics.ids, labels)
    finite = np.isfinite(metrics.metrics).all(axis=(1, 2))
    keep = (y >= 0) & finite
    values = compress(metrics.metrics[keep])  # [n, 3, L]
    yk = y[keep].astype(bool)
    out: dict[str, Any] = {
        "layer_labels": list(metrics.layer_labels),
        "metric_names": list(METRIC_NAMES),
        "values": "sign(m)·log(1+|m|)",
        "n": int(keep.sum()),
        "members": int(yk.sum()),
        "non_members": int((~yk).sum()),
        # SPEC §7: labelled questions with a non-finite metric are left out, and counted
        "n_nonfinite": {"members": int(((y == 1) & ~finite).sum()), "non_members": int(((y == 0) & ~finite).sum())},
    }
    if lara_info:
        out["control_set"] = control_set(lara_info)
    if yk.sum() < 2 or (~yk).sum() < 2:
        out["error"] = "layer analysis needs at least 2 members and 2 non-members with finite metrics"
        return out
    d, lo, hi = cohens_d_ci(values, yk, n_resamples=n_bootstrap, seed=seed, level=ci)
    out["cohens_d"] = {
        m: {"value": d[i].tolist(), "ci_low": lo[i].tolist(), "ci_high": hi[i].tolist()}
        for i, m in enumerate(METRIC_NAMES)
    }
    profiles = group_means_ci(values, yk, n_resamples=n_bootstrap, seed=seed, level=ci)
    out["profiles"] = {
        m: {group: {k: np.asarray(v)[i].tolist() for k, v in stats.items()} for group, stats in profiles.items()}
        for i, m in enumerate(METRIC_NAMES)
    }
    out["windows"] = _windows(metrics, values, yk, n_bootstrap, seed, ci)
    kept_ids = [i for i, k in zip(metrics.ids, keep) if k]
    group_of = [groups.get(i) for i in kept_ids] if groups else None
    if group_of is not None and any(g is None for g in group_of):
        group_of = None  # a partial declaration is no design: permute freely
    out["null"] = _null_record(layer_null(values, yk, group_of, n_permutations, seed), metrics.layer_labels)
    if (~yk).sum() >= 4:
        out["placebo_split"] = _placebo_splits(values, yk, metrics.layer_labels, n_permutations, seed)
    if reference is not None:
        out["reference"] = _against_reference(values, yk, kept_ids, group_of, reference, n_permutations, seed)
    return out


def control_set(lara_info: Mapping[str, Any]) -> dict[str, Any]:
    """The clean reference's size relative to the questions it judges, with a warning below 2×."""
    n_ref = int(lara_info.get("n_reference") or 0)
    n_audited = int(lara_info.get("n_questions") or 0) - int(lara_info.get("n_cross_fitted") or 0)
    ratio = n_ref / n_audited if n_audited > 0 else None
    return {
        "n_reference": n_ref,
        "n_audited": n_audited,
        "ratio": ratio,
        "warning": CONTROL_WARNING if ratio is not None and ratio < MIN_CONTROL_RATIO else None,
    }


def _windows(
    metrics: MetricsFile, values: np.ndarray, yk: np.ndarray, n_bootstrap: int, seed: int, ci: float
) -> dict[str, Any]:
    columns = available_windows(metrics.layer_labels, metrics.n_blocks)
    windows: dict[str, Any] = {w: {"layers": [metrics.layer_labels[c] for c in cols]} for w, cols in columns.items()}
    if columns:
        wd, wlo, whi = cohens_d_ci(
            window_means(values, list(columns.values())), yk, n_resamples=n_bootstrap, seed=seed, level=ci
        )
        for j, window in enumerate(windows):
            windows[window]["cohens_d"] = {
                m: {"value": float(wd[i, j]), "ci": [float(wlo[i, j]), float(whi[i, j])]}
                for i, m in enumerate(METRIC_NAMES)
            }
    return windows


def _placebo_splits(
    values: np.ndarray,
    yk: np.ndarray,
    layer_labels: Sequence[str],
    n_permutations: int,
    seed: int,
    n_splits: int = PLACEBO_SPLITS,
) -> dict[str, Any]:
    """The same map on random halves of the non-members (a map that must read null): the first
    split's record, and over ``n_splits`` splits the fraction with any layer significant (≈ α)."""
    runs = placebo_splits(values, yk, n_permutations, seed, n_splits)
    return {**_null_record(runs[0], layer_labels), **placebo_summary(runs, int((~yk).sum()))}


def _null_record(result: dict[str, Any], layer_labels: Sequence[str]) -> dict[str, Any]:
    """A :func:`layer_null` result as report JSON: per-metric lists, layers by label."""
    return {
        "d": {m: result["d"][i].tolist() for i, m in enumerate(METRIC_NAMES)},
        "p_adjusted": {m: result["p_adjusted"][i].tolist() for i, m in enumerate(METRIC_NAMES)},
        "p_layer": result["p_layer"].tolist(),
        "significant_layers": [layer_labels[j] for j in result["significant_layers"]],
        "layer_labels": list(layer_labels),
        **{k: result[k] for k in ("null_max", "observed_max", "p_global", "n_permutations", "alpha", "permutation")},
    }


def _against_reference(
    values: np.ndarray,
    yk: np.ndarray,
    kept_ids: list[str],
    group_of: list | None,
    reference: MetricsFile,
    n_permutations: int,
    seed: int,
) -> dict[str, Any]:
    """The reference checkpoint's own map (the placebo), the audited map minus it, and the
    depth-profile contrast: the map of per-question differences audited − reference."""
    row = {i: k for k, i in enumerate(reference.ids)}
    both = np.array([i in row and bool(np.isfinite(reference.metrics[row[i]]).all()) for i in kept_ids])
    labels = reference.layer_labels
    if both.sum() < 4 or min(yk[both].sum(), (~yk[both]).sum()) < 2:
        return {"error": "the reference checkpoint's metrics cover too few of these questions", "n": int(both.sum())}
    ref_values = compress(np.stack([reference.metrics[row[i]] for i, b in zip(kept_ids, both) if b]))
    if ref_values.shape[1:] != values.shape[1:]:
        return {"error": f"the reference's metrics have layers {', '.join(labels)}, not the audited model's"}
    groups = [g for g, b in zip(group_of, both) if b] if group_of is not None else None
    placebo = layer_null(ref_values, yk[both], groups, n_permutations, seed)
    contrast = layer_null(values[both] - ref_values, yk[both], groups, n_permutations, seed)
    audited = cohens_d(values[both].reshape(int(both.sum()), -1), yk[both]).reshape(values.shape[1:])
    return {
        "n": int(both.sum()),
        "n_missing": int((~both).sum()),
        "placebo": _null_record(placebo, labels),
        "audited_minus_placebo": {m: (audited[i] - placebo["d"][i]).tolist() for i, m in enumerate(METRIC_NAMES)},
        "contrast": _null_record(contrast, labels),
    }
