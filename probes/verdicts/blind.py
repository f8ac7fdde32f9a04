"""The blind baseline (SPEC §8.8): a confound check for labelled evaluations.

A classifier that sees only the question text — character n-gram TF-IDF and a logistic regression
(scikit-learn), out-of-fold predictions over a stratified 5-fold split — scored by ROC-AUC with a
bootstrap CI. If members and non-members differ in ways visible without the model (source, style,
length, difficulty), detector AUCs near the blind AUC say nothing about contamination.

0.5 is the wrong yardstick in a *matched* design (every member paired with a non-member of its own
kind, as in the testbeds): holding a member out leaves its kind non-member-heavy in training, so
cross-validated predictions are anti-correlated with the labels and the AUC sits far below 0.5
(0.18 on the testbed) — a confound can then lift it to 0.58 with a CI still touching 0.5. The
observed AUC is therefore compared with its **null under label swaps within matched groups**: the
labels are permuted inside each group (a declared ``pair`` or ``template`` field, else clusters of
near-identical texts, numbers masked), freely among the questions in no mixed group, and the same
cross-validation is run again; the null inherits the design's bias. The warning fires when the
observed AUC exceeds the null's 95th percentile, or when its CI lies above 0.5.

The TF-IDF vocabulary and weights are fitted once on every text (no label is used), so a
permutation costs five logistic regressions (~15 ms for 300 questions). The whole result depends
on its inputs alone (texts, labels, groups, folds, seed, bootstrap and permutation counts), so a
process keeps the last few: every model of one run shares its questions and labels, and its
report's blind baseline is computed once, not once per model.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections import OrderedDict
from typing import Any, Hashable, Sequence

import numpy as np

from ..evaluation import evaluate
from ..evaluation.permutation import permuted_labels

WARNING = (
    "the blind baseline (question text only, no model) separates members from non-members beyond what the design "
    "explains: the two sets differ in ways visible without the model, so a detector's AUC near the blind AUC says "
    "nothing about contamination"
)
N_PERMUTATIONS = 200
_KEPT = 4  # blind baselines a process keeps, by the digest of their inputs
_memo: OrderedDict[str, dict[str, Any]] = OrderedDict()


def blind_features(texts: Sequence[str]) -> Any:
    """``[n, vocabulary]`` sparse TF-IDF of character 2–4-grams (within word boundaries, sublinear tf),
    fitted on every text (unsupervised: no label is seen)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True).fit_transform(list(texts))


def blind_classifier(seed: int = 0) -> Any:
    """The logistic regression fitted on each training fold."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=1000, random_state=seed)


def out_of_fold(features: Any, labels: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """``[n]`` out-of-fold P(member): each row scored by a classifier fitted without its fold
    (stratified ``n_folds``-fold split, shuffled with ``seed``)."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(labels).astype(int)
    out = np.empty(len(y))
    for train, test in StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y):
        out[test] = blind_classifier(seed).fit(features[train], y[train]).predict_proba(features[test])[:, 1]
    return out


def blind_predictions(texts: Sequence[str], labels: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """``[n]`` out-of-fold P(member) of each text."""
    return out_of_fold(blind_features(texts), labels, n_folds, seed)


def near_duplicate_clusters(texts: Sequence[str], threshold: float = 0.6) -> np.ndarray:
    """``[n]`` cluster id: connected components of word 1–2-gram TF-IDF cosine ≥ ``threshold``, with
    every number masked (questions of one template fall together: adjusted Rand 0.97 / 0.87 against
    the testbeds' templates)."""
    from scipy.sparse.csgraph import connected_components
    from sklearn.feature_extraction.text import TfidfVectorizer

    masked = [re.sub(r"\d+(\.\d+)?", "0", t) for t in texts]
    x = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True).fit_transform(masked)
    return connected_components((x @ x.T) >= threshold, directed=False)[1]


def matched_groups(texts: Sequence[str], declared: Sequence[Hashable | None] | None = None) -> tuple[np.ndarray, str]:
    """``([n] group id, how)``: the declared groups where every question has one, else near-duplicate
    clusters of the texts."""
    if declared is not None and len(declared) == len(texts) and all(g is not None for g in declared):
        return np.unique([str(g) for g in declared], return_inverse=True)[1], "declared pair/template"
    return near_duplicate_clusters(texts), "clusters of near-identical texts"


def swap_null(
    features: Any, labels: np.ndarray, groups: np.ndarray, n_folds: int, seed: int, n_permutations: int = N_PERMUTATIONS
) -> np.ndarray:
    """``[n_permutations]`` blind AUCs under within-group label swaps (same folds' seed)."""
    from sklearn.metrics import roc_auc_score

    swaps = permuted_labels(labels, groups, n_permutations, seed, stream=88)
    return np.array([roc_auc_score(y, out_of_fold(features, y, n_folds, seed)) for y in swaps])


def blind_baseline(
    texts: Sequence[str],
    labels: np.ndarray,
    n_folds: int = 5,
    seed: int = 0,
    n_bootstrap: int = 1000,
    groups: Sequence[Hashable | None] | None = None,
    n_permutations: int = N_PERMUTATIONS,
) -> dict[str, Any]:
    """The blind baseline's AUC (stratified-bootstrap CI), its within-group swap null and the warning.

    Args:
        texts: ``[n]`` question texts of the labelled questions.
        labels: ``[n]`` 1 = member, 0 = non-member.
        groups: ``[n]`` the matched group of each question (its ``pair`` or ``template``), or None
            to cluster near-identical texts.
    """
    y = np.asarray(labels).astype(int)
    named = [None if g is None else str(g) for g in groups] if groups is not None else None
    key = _inputs_digest(texts, y, named, n_folds, seed, n_bootstrap, n_permutations)
    if key not in _memo:
        _memo[key] = _computed(texts, y, n_folds, seed, n_bootstrap, named, n_permutations)
        while len(_memo) > _KEPT:
            _memo.popitem(last=False)
    _memo.move_to_end(key)
    return copy.deepcopy(_memo[key])


def _inputs_digest(texts: Sequence[str], y: np.ndarray, groups: list[str | None] | None, *numbers: int) -> str:
    """sha256 of everything :func:`blind_baseline`'s result depends on."""
    payload = json.dumps([list(texts), y.tolist(), groups, list(numbers)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _computed(
    texts: Sequence[str],
    y: np.ndarray,
    n_folds: int,
    seed: int,
    n_bootstrap: int,
    groups: list[str | None] | None,
    n_permutations: int,
) -> dict[str, Any]:
    """:func:`blind_baseline`, computed (``y``: ``[n]`` 0/1 ints; ``groups`` as the strings the key
    holds, which :func:`matched_groups` compares)."""
    folds = min(n_folds, int(y.sum()), int((1 - y).sum()))
    if folds < 2:
        return {"error": "the blind baseline needs at least 2 members and 2 non-members"}
    features = blind_features(texts)
    result = evaluate(y.astype(bool), out_of_fold(features, y, folds, seed), n_bootstrap=n_bootstrap, seed=seed)
    auc = result["auc"]
    group_ids, how = matched_groups(texts, groups)
    null = swap_null(features, y, group_ids, folds, seed, n_permutations)
    mixed = [g for g in np.unique(group_ids) if len(set(y[group_ids == g].tolist())) > 1]
    in_mixed = int(np.isin(group_ids, mixed).sum())
    q95 = float(np.quantile(null, 0.95))
    confounded = bool(auc["value"] > q95) or bool(auc["ci"][0] is not None and auc["ci"][0] > 0.5)
    return {
        "name": "blind (text only)",
        "auc": auc,
        "folds": folds,
        "features": "char 2-4-gram TF-IDF + logistic regression",
        "null": {
            "q95": q95,
            "median": float(np.median(null)),
            "p": float((1 + (null >= auc["value"]).sum()) / (1 + len(null))),
            "n_permutations": len(null),
            "groups": how,
            "n_mixed_groups": len(mixed),
            "n_in_mixed_groups": in_mixed,
        },
        "confounded": confounded,
        "warning": WARNING if confounded else None,
        "matched_design": 2 * in_mixed >= len(y),
    }
