"""The blind baseline (SPEC §8.8): equal to a plain scikit-learn pipeline; at chance on the
testbed's template-matched split; far above it, with the warning, on a confounded split."""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import Pipeline

from probes.calibration.blind import blind_baseline, blind_predictions
from probes.testbed.problems import make_splits


def test_out_of_fold_predictions_equal_a_plain_scikit_learn_pipeline():
    splits = make_splits(200, 40, 10, seed=1)
    texts = [p.question for p in splits.members + splits.non_members]
    y = np.r_[np.ones(40, int), np.zeros(40, int)]
    plain = Pipeline([("tfidf", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True)),
                      ("logreg", LogisticRegression(max_iter=1000, random_state=0))])
    expected = cross_val_predict(plain, np.array(texts, dtype=object), y, cv=StratifiedKFold(5, shuffle=True, random_state=0),
                                 method="predict_proba")[:, 1]
    np.testing.assert_allclose(blind_predictions(texts, y), expected, rtol=1e-12)


def test_no_warning_without_a_confound_and_a_warning_on_a_confounded_split():
    splits = make_splits(500, 150, 10, seed=0)
    pool = splits.members + splits.non_members
    texts = [p.question for p in pool]
    # labels independent of the text (members and non-members drawn alike): at chance, rarely a warning
    runs = [blind_baseline(texts, np.random.default_rng(s).permutation(np.r_[np.ones(150), np.zeros(150)]), n_bootstrap=200)
            for s in range(12)]
    assert 0.44 < np.mean([r["auc"]["value"] for r in runs]) < 0.53
    assert sum(r["confounded"] for r in runs) <= 1 and sum(r["auc"]["ci"][0] < 0.5 < r["auc"]["ci"][1] for r in runs) >= 9
    # members from half of the templates, non-members from the other half
    templates = sorted({p.template for p in pool})
    first = set(templates[: len(templates) // 2])
    members = [p for p in pool if p.template in first]
    non_members = [p for p in pool if p.template not in first]
    y = np.r_[np.ones(len(members)), np.zeros(len(non_members))]
    confounded = blind_baseline([p.question for p in members + non_members], y)
    assert confounded["auc"]["value"] >= 0.8 and confounded["confounded"] and "visible without the model" in confounded["warning"]
    assert roc_auc_score(y, blind_predictions([p.question for p in members + non_members], y)) == confounded["auc"]["value"]


def test_an_exactly_matched_split_is_anti_predictable_under_cross_validation():
    """Pinned finding: the testbed pairs every member with a non-member of its own template, so each
    template is exactly balanced. Holding a member out leaves its template non-member-heavy in
    training (and vice versa), so out-of-fold predictions are anti-correlated with the labels:
    the blind AUC falls far *below* 0.5. The check warns only above 0.5, so it never flags this."""
    splits = make_splits(500, 150, 10, seed=0)
    matched = blind_baseline([p.question for p in splits.members + splits.non_members], np.r_[np.ones(150), np.zeros(150)])
    assert matched["auc"]["ci"][1] < 0.5 and not matched["confounded"] and matched["matched_design"]
