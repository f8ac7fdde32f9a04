"""LaRA from Python: perturbation sets of questions, the per-layer metrics zRSM / DC / zRSI of
each question from activations pooled in memory, and S_LaRA against a clean reference."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from generation.config import GenerationConfig
from generation.pipeline import make_generator
from generation.records import Question, parse_question

from .models import layer_tokens, load_model, pool


def as_questions(questions: Any) -> list[Any]:
    """``generation.records.Question`` records from a list of strings (ids ``q0``, ``q1``…), of
    dicts (``id``, ``question``, optional ``answer``, ``label``, ``split``…) or of records; a
    plain string is one question."""

    if isinstance(questions, (str, Mapping, Question)):
        questions = [questions]
    out = []
    for i, q in enumerate(questions):
        if isinstance(q, Question):
            out.append(q)
        elif isinstance(q, str):
            out.append(Question(id=f"q{i}", question=q))
        elif isinstance(q, Mapping):
            out.append(parse_question(json.dumps(dict(q), default=str), f"questions[{i}]"))
        else:
            raise TypeError(
                f"questions[{i}] is a {type(q).__name__}: give strings, dicts with 'id' and 'question', or Question records"
            )
    return out


def perturb(questions: Any, *, similars: int = 5, paraphrases: int = 5, blanks: int = 1, seed: int = 0) -> list[Any]:
    """The perturbation set of each question (SPEC §1) by the offline deterministic generator:
    ``similars`` similar questions, the ``[BLANK]``ed variant of the original and of each similar,
    ``paraphrases`` paraphrases of each. Returns ``generation.records.PerturbationSet`` records
    (a part that could not be made is None, with its reason in ``.failures``)."""

    generator = make_generator(GenerationConfig(seed=seed, similars=similars, paraphrases=paraphrases, blanks=blanks))
    return [generator.generate(q) for q in as_questions(questions)]


@dataclass
class LaraMetrics:
    """Per-layer LaRA metrics of N questions.

    Attributes:
        ids: ``[N]`` question ids.
        values: ``[N, 3, L]`` float64, rows zRSM, DC, zRSI (NaN for a question whose set is unusable).
        layers: ``[L]`` layer labels.
        reasons: why a question is unusable (``{id: reason}``).
        question_hashes: ``[N]`` sha256 of each original question (the cross-fitting folds' keys).
        n_blocks: the model's decoder blocks (for the ``early`` / ``mid`` / ``late`` windows).
    """

    ids: list[str]
    values: np.ndarray
    layers: tuple[str, ...]
    reasons: dict[str, str]
    question_hashes: list[str]
    n_blocks: int | None = None

    def __repr__(self) -> str:
        return (
            f"LaraMetrics({len(self.ids)} questions × 3 metrics × {len(self.layers)} layers; "
            f"{len(self.reasons)} unusable)"
        )

    def to_frame(self) -> Any:
        """A long ``pandas.DataFrame``: one row per (id, metric, layer) with its ``value``."""
        import pandas as pd

        n, _, n_layers = self.values.shape
        return pd.DataFrame(
            {
                "id": np.repeat(self.ids, 3 * n_layers),
                "metric": np.tile(np.repeat(["zRSM", "DC", "zRSI"], n_layers), n),
                "layer": np.tile(list(self.layers), 3 * n),
                "value": self.values.reshape(-1),
            }
        )


def lara_metrics(
    model: Any,
    sets: Sequence[Any],
    *,
    layers: Any = "all",
    eps: float = 1e-8,
    min_paraphrases: int = 2,
    **extraction: Any,
) -> LaraMetrics:
    """zRSM, DC and zRSI of each set's question at each layer (SPEC §3), from the activations of
    every text of the sets pooled in memory by :func:`probes.pool` (arguments as there) — the
    same numbers ``lara metrics`` computes from a store."""
    from ..lara.metrics_chunks import metrics_of_chunk, read_chunk  # lazy: pulls h5py
    from ..lara.sets import distinct_texts, layout  # lazy: pulls h5py

    loaded = load_model(model)
    layouts = [layout(record, min_paraphrases) for record in sets]
    texts = distinct_texts(list(sets))
    rows = pool(loaded, texts, layers=layers, **extraction).numpy()
    from cache.config import ExtractionConfig  # lazy: pulls h5py
    from cache.pool import layer_selection  # lazy: pulls h5py

    labels = tuple(layer_selection(loaded, ExtractionConfig(layers=layer_tokens(layers))).labels)
    memory = _Rows(dict(zip(texts, rows)), rows.shape[2])
    k1 = max(lay.k for lay in layouts) + 1
    m = max(lay.m for lay in layouts)
    chunk, index = read_chunk(layouts, memory, labels, k1, m)
    values = metrics_of_chunk(chunk, index, eps)["metrics"]
    reasons = {lay.id: lay.reason for lay in layouts if lay.reason}
    for lay, row in zip(layouts, values):
        if lay.id not in reasons and not np.isfinite(row).all():
            reasons[lay.id] = (
                f"non_finite_values: {int((~np.isfinite(row)).sum())} of {row.size} metric values are NaN/inf"
            )
    from cache.fingerprint import text_hash  # lazy: pulls h5py

    return LaraMetrics(
        [lay.id for lay in layouts],
        values,
        labels,
        reasons,
        [text_hash(r.question.question) for r in sets],
        loaded.layout.n_blocks,
    )


def lara_score(
    metrics: LaraMetrics, clean: LaraMetrics | Sequence[str], *, folds: int = 5, seed: int = 0, **options: Any
) -> Any:
    """S_LaRA of each question (SPEC §4; higher = more likely trained on) against a clean
    reference, exactly as ``lara score`` computes it: another :class:`LaraMetrics`, or the ids of
    clean questions among ``metrics`` — those are scored cross-fitted (``folds`` folds keyed by
    question, ``seed``), never against a reference holding themselves. Layers are named by the
    metrics' own labels (``layers="3"`` is block 3; windows count the model's blocks).
    ``options``: fields of ``probes.lara.protocol.ScoreOptions``. Returns a ``pandas.Series``
    indexed by id."""
    import pandas as pd

    from ..lara.protocol import ScoreOptions, score_against_pool  # lazy: pulls h5py

    opts = ScoreOptions(**options)
    if isinstance(clean, LaraMetrics):
        if clean.layers != metrics.layers:
            raise ValueError(
                f"the clean metrics have layers {clean.layers}, these {metrics.layers}: compute both alike"
            )
        pool, pool_keys = clean.values, clean.question_hashes
    else:
        where = {q: i for i, q in enumerate(metrics.ids)}
        missing = [q for q in clean if q not in where]
        if missing:
            raise KeyError(f"{len(missing)} clean id(s) are not among the metrics' questions, e.g. {missing[:3]}")
        rows = [where[q] for q in clean]
        pool, pool_keys = metrics.values[rows], [metrics.question_hashes[i] for i in rows]
    scoring = score_against_pool(
        metrics.values,
        metrics.question_hashes,
        pool,
        pool_keys,
        opts,
        n_folds=folds,
        seed=seed,
        layer_labels=metrics.layers,
    )
    values = scoring.scores(opts, metrics.layers, metrics.n_blocks)
    return pd.Series(values, index=pd.Index(metrics.ids, name="id"), name="lara")


class _Rows:
    """Activation rows held in memory, read as a store reads them: ``get(texts, layers)``."""

    def __init__(self, rows: dict[str, np.ndarray], d_model: int) -> None:
        self.rows, self.d_model = rows, d_model

    def get(self, texts: Sequence[str], layers: Any = None) -> np.ndarray:
        return np.stack([self.rows[t] for t in texts]).astype(np.float32)
