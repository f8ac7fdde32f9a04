"""The blind baseline (SPEC §8.8): a confound check for labelled evaluations.

A classifier that sees only the question text — character n-gram TF-IDF and a logistic regression
(scikit-learn), out-of-fold predictions over a stratified 5-fold split — scored by ROC-AUC with a
bootstrap CI. If its CI lies above 0.5, members and non-members differ in ways visible without
the model (source, style, length, difficulty), so detector AUCs near the blind AUC say nothing
about contamination.

A CI *below* 0.5 is the signature of an exactly matched design (every member paired with a
non-member of its own kind, as in the testbed): holding a member out leaves its kind
non-member-heavy in training, so cross-validated predictions are anti-correlated with the labels.
It shows no confound (``matched_design``), and the warning is one-sided: it never fires there.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..evaluation import evaluate

WARNING = ("the blind baseline (question text only, no model) separates members from non-members: the two sets differ "
           "in ways visible without the model, so a detector's AUC near the blind AUC says nothing about contamination")


def blind_pipeline(seed: int = 0) -> Any:
    """Character 2–4-gram TF-IDF (within word boundaries, sublinear tf) + logistic regression."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True),
                         LogisticRegression(max_iter=1000, random_state=seed))


def blind_predictions(texts: Sequence[str], labels: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """``[n]`` out-of-fold P(member) of each text: a model fitted without the text's fold."""
    from sklearn.model_selection import StratifiedKFold

    texts = np.asarray(list(texts), dtype=object)
    y = np.asarray(labels).astype(int)
    out = np.empty(len(y))
    for train, test in StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(texts, y):
        out[test] = blind_pipeline(seed).fit(texts[train], y[train]).predict_proba(texts[test])[:, 1]
    return out


def blind_baseline(texts: Sequence[str], labels: np.ndarray, n_folds: int = 5, seed: int = 0,
                   n_bootstrap: int = 1000) -> dict[str, Any]:
    """The blind baseline's AUC (stratified-bootstrap CI) and, when its CI lies above 0.5, the warning.

    Args:
        texts: ``[n]`` question texts of the labelled questions.
        labels: ``[n]`` 1 = member, 0 = non-member.
    """
    y = np.asarray(labels).astype(int)
    folds = min(n_folds, int(y.sum()), int((1 - y).sum()))
    if folds < 2:
        return {"error": "the blind baseline needs at least 2 members and 2 non-members"}
    scores = blind_predictions(texts, y, folds, seed)
    result = evaluate(y.astype(bool), scores, n_bootstrap=n_bootstrap, seed=seed)
    auc = result["auc"]
    confounded = bool(auc["ci"][0] is not None and auc["ci"][0] > 0.5)
    return {"name": "blind (text only)", "auc": auc, "folds": folds, "features": "char 2-4-gram TF-IDF + logistic regression",
            "confounded": confounded, "warning": WARNING if confounded else None,
            "matched_design": bool(auc["ci"][1] is not None and auc["ci"][1] < 0.5)}
