"""A response store shared by the detectors, so nothing is generated or scored twice.

A completion is keyed by the responder's identity (weights and tokenizer fingerprints, prompt
format; or endpoint and model), the prompt, the decoding parameters except ``n``, the seed and
its index j: completion j depends only on those, so asking for 50 samples after 32 generates the
18 missing ones. A scored text is keyed by identity, context and text. Detectors therefore share
work by construction: PPL on the greedy answer reuses Self-Critique's first answer, CDD and
Min-kNN reuse each other's samples when their parameters match.

The store is SQLite (WAL mode, one committed row per response), safe to interrupt: a call is
run and committed chunk by chunk (about one batch of the wrapped responder each), so an
interrupted detector pass keeps every chunk it finished and the next run generates only the rest.

A sampled answer's key also holds the version of the sampler that drew it (a local model's:
:data:`~.counter_sampler.SAMPLER_VERSION`), and the store records, per responder kind, the
version its sampled answers were drawn with: a store never holds the sampled answers of two
versions (SPEC §10). A store written before versions were recorded holds the per-row generator
sampler's answers (:data:`~.counter_sampler.LEGACY_SAMPLER`) and is refused for sampling.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import MismatchError
from .base import CallCounter, Generation, GenerationParams, Rollout, TextScore
from .checks import check_answer_counts, check_generations, check_scores
from .counter_sampler import LEGACY_SAMPLER

if TYPE_CHECKING:
    from .base import Responder


class ResponseStore:
    """Responses on disk (``path``), or in memory with ``path=None``."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path) if self.path else ":memory:", check_same_thread=False, timeout=30)
        self._set_up()

    def _set_up(self, wait_s: float = 60.0) -> None:
        """WAL mode and the table. Several processes (the ranks of a torchrun job) may open a new
        store at once: switching it to WAL takes a lock SQLite's busy handler does not wait for, so
        a clash is retried here."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
                self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
                if self._db.execute("SELECT 1 FROM responses LIMIT 1").fetchone() is None:
                    # a new (empty) store records the samplers of the answers it will hold
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (_RECORDED, "1"))
                self._db.commit()
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = list(keys[start : start + 500])
                marks = ",".join("?" * len(part))
                for key, value in self._db.execute(f"SELECT key, value FROM responses WHERE key IN ({marks})", part):
                    found[key] = json.loads(value)
        return found

    def put_many(self, kind: str, items: dict[str, dict[str, Any]]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?)",
                [(k, kind, json.dumps(v)) for k, v in items.items()],
            )
            self._db.commit()

    def claim_sampler(self, kind: str, version: str) -> None:
        """Record that ``kind``'s sampled answers here are drawn by sampler ``version``; refuse a
        store whose sampled answers of that kind come from another version."""
        name = f"sampler/{kind}"
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            held = row[0] if row is not None else None
            if held is None and self._db.execute("SELECT 1 FROM meta WHERE name = ?", (_RECORDED,)).fetchone() is None:
                answers = "SELECT 1 FROM responses WHERE kind IN ('generate', 'complete') LIMIT 1"
                held = LEGACY_SAMPLER if self._db.execute(answers).fetchone() is not None else None
            if held is not None and held != version:
                where = self.path if self.path is not None else "this response store"
                raise MismatchError(
                    f"{where} holds answers sampled by the {held} sampler and this toolkit samples with {version}; "
                    "the two never mix in one store: move the store aside (or delete it) and the answers are drawn again"
                )
            if row is None:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, version))
                self._db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (_RECORDED, "1"))
                self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        self._db.close()


_RECORDED = "samplers_recorded"  # set in a store made since sampler versions are recorded


def prompts_per_chunk(batch_rows: int, n: int) -> int:
    """Prompts run and committed together: chunks of whole batches where that stays small (n
    completions per prompt, ``batch_rows`` per batch: lcm(batch, n) rows if at most 32 batches),
    else about one batch's worth (at least one prompt)."""
    import math

    whole = batch_rows // math.gcd(batch_rows, n)
    return whole if whole * n <= 32 * batch_rows else max(1, batch_rows // n)


def indexed_method(responder: Any, kind: str) -> Any:
    """The responder's ``<kind>_some`` (draw only the wanted indices), where the class that defines
    it also defines ``<kind>``: a subclass that overrides ``generate`` alone (a wrapping engine) is
    run through its own ``generate``, never around it. None otherwise."""
    mro = type(responder).__mro__
    owner = {name: next((c for c in mro if name in vars(c)), None) for name in (kind, f"{kind}_some")}
    if owner[f"{kind}_some"] is None or owner[kind] is not owner[f"{kind}_some"]:
        return None
    return getattr(responder, f"{kind}_some")


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class CachedResponder:
    """A responder whose generations and scores go through a :class:`ResponseStore`.

    ``counter`` counts what really ran (``generated``, ``scored``, and the ``requests`` a served
    model was sent) and what came from the store (``cache_hits``).

    Args:
        responder: the wrapped responder.
        store: where responses are kept.
        progress: show a bar of the completions (texts) done within each call that needs more
            than one chunk.
        chunk_rows: completions (or texts) run and committed together (default: the wrapped
            responder's ``commit_rows``, else 16).
    """

    def __init__(
        self, responder: Responder, store: ResponseStore, progress: bool = False, chunk_rows: int | None = None
    ) -> None:
        self.responder = responder
        self.store = store
        self.access = responder.access
        self.identity = responder.identity
        self.counter = CallCounter()
        self.progress = progress
        self.chunk_rows = max(1, chunk_rows or getattr(responder, "commit_rows", 16))

    @property
    def vocabulary_fingerprint(self) -> str | None:
        return getattr(self.responder, "vocabulary_fingerprint", None)

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        return self._generations("generate", prompts, params, self.responder.generate)

    def complete(self, texts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        return self._generations("complete", texts, params, self.responder.complete)

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        key = _key("token_spans", self.identity, text)
        found = self.store.get_many([key])
        if key not in found:
            found[key] = {"spans": [list(x) for x in self._counting_requests(self.responder.token_spans, text)]}
            self.store.put_many("token_spans", found)
        return [tuple(x) for x in found[key]["spans"]]  # type: ignore[misc]

    def _generations(
        self, kind: str, prompts: Sequence[str], params: GenerationParams, run: Any
    ) -> list[list[Generation]]:
        decoding = {k: v for k, v in asdict(params).items() if k != "n"}
        sampler = getattr(self.responder, "sampler_version", None)
        if sampler is not None and not params.greedy:  # greedy decoding is the same under every sampler
            self.store.claim_sampler(str(self.identity.get("kind", "local")), sampler)
            decoding["sampler"] = sampler
        keys = [[_key(kind, self.identity, p, decoding, j) for j in range(params.n)] for p in prompts]
        found = self.store.get_many([k for row in keys for k in row])
        self.counter.cache_hits += len(found)
        missing = {(i, j) for i, row in enumerate(keys) for j, k in enumerate(row) if k not in found}
        # completion j of a prompt depends on (seed, prompt, j) only, so running just the missing
        # indices (a responder with ``<kind>_some``), or the prompts that miss any and keeping the
        # missing ones, in chunks, is exact
        first = {prompts[i]: i for i, _ in sorted(missing, reverse=True)}  # a prompt asked for twice is run once
        todo = sorted(first.values(), key=lambda i: (-len(prompts[i]), i))  # similar lengths together
        missing = {(i, j) for i, j in missing if first[prompts[i]] == i}
        some = indexed_method(self.responder, kind)
        wanted = {i: [j for j in range(params.n) if (i, j) in missing] for i in todo}
        rows_each = max((len(js) for js in wanted.values()), default=1) if some is not None else params.n
        per_chunk = prompts_per_chunk(self.chunk_rows, rows_each)
        with self._bar(len(missing), kind, len(todo) > per_chunk) as bar:
            for start in range(0, len(todo), per_chunk):
                chunk = todo[start : start + per_chunk]
                texts = [prompts[i] for i in chunk]
                # nothing an engine failed to send is stored: as many answers per prompt as asked
                if some is not None:
                    fresh = self._counting_requests(some, texts, params, [wanted[i] for i in chunk])
                    check_answer_counts(fresh, [len(wanted[i]) for i in chunk], self.identity)
                else:
                    whole = self._counting_requests(run, texts, params)
                    check_answer_counts(whole, [params.n] * len(chunk), self.identity)
                    fresh = [[gens[j] for j in wanted[i]] for i, gens in zip(chunk, whole)]
                check_generations(fresh, self.identity)
                new = {keys[i][j]: gen.to_dict() for i, gens in zip(chunk, fresh) for j, gen in zip(wanted[i], gens)}
                self.store.put_many(kind, new)  # committed: an interruption after this keeps it
                self.counter.generated += len(new)
                found.update(new)
                bar.update(len(new))
        return [[Generation.from_dict(found[k]) for k in row] for row in keys]

    def score(self, contexts: Sequence[str], texts: Sequence[str]) -> list[TextScore]:
        keys = [_key("score", self.identity, c, t) for c, t in zip(contexts, texts, strict=True)]
        sizes = [len(t.split()) for t in texts]  # two words or more: at least one token scored
        return self._scored(
            keys, sizes, lambda idx: self.responder.score([contexts[i] for i in idx], [texts[i] for i in idx])
        )

    def score_ids(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[TextScore]:
        keys = [_key("score_ids", self.identity, c, t) for c, t in pairs]
        return self._scored(
            keys, [len(t) for _, t in pairs], lambda idx: self.responder.score_ids([pairs[i] for i in idx])
        )

    def divergence(self, rollouts: Sequence[Rollout], reference: Responder) -> list[np.ndarray]:
        """Per-position KL(this model ‖ ``reference``) along each rollout, kept in the store (keyed
        by both models' identities, the prompt, the answer's ids and whether it stopped)."""
        keys = [
            _key("divergence", self.identity, reference.identity, r.prompt, list(r.token_ids), r.stopped)
            for r in rollouts
        ]
        found = self.store.get_many(keys)
        self.counter.cache_hits += len(found)
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in found:
                first.setdefault(k, i)
        todo = list(first.values())
        with self._bar(len(todo), "score", len(todo) > self.chunk_rows) as bar:
            for start in range(0, len(todo), self.chunk_rows):
                chunk = todo[start : start + self.chunk_rows]
                values = self.responder.divergence([rollouts[i] for i in chunk], reference)
                new = {keys[i]: {"kl": v.tolist()} for i, v in zip(chunk, values)}
                self.store.put_many("divergence", new)
                self.counter.scored += len(new)
                found.update(new)
                bar.update(len(chunk))
        return [np.array(found[k]["kl"], dtype=np.float64) for k in keys]

    def _scored(self, keys: list[str], sizes: list[int], run: Any) -> list[TextScore]:
        """Scores of ``keys`` from the store, the rest from ``run(indices)``, checked and committed
        chunk by chunk (``sizes``: each text's words or tokens; two or more must score a token)."""
        found = self.store.get_many(keys)
        self.counter.cache_hits += len(found)
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in found:
                first.setdefault(k, i)  # a text asked for twice is scored once
        todo = list(first.values())
        with self._bar(len(todo), "score", len(todo) > self.chunk_rows) as bar:
            for start in range(0, len(todo), self.chunk_rows):
                chunk = todo[start : start + self.chunk_rows]
                fresh = self._counting_requests(run, chunk)
                check_scores(fresh, [sizes[i] for i in chunk], self.identity)
                new = {keys[i]: s.to_dict() for i, s in zip(chunk, fresh)}
                self.store.put_many("score", new)
                self.counter.scored += len(new)
                found.update(new)
                bar.update(len(chunk))
        return [TextScore.from_dict(found[k]) for k in keys]

    def _bar(self, total: int, kind: str, shown: bool) -> Any:
        """A progress bar of one call's work (a no-op unless ``progress`` and the call needs more than one chunk)."""
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            unit="text" if kind == "score" else "completion",
            desc=kind,
            leave=False,
            disable=not (self.progress and shown),
            dynamic_ncols=True,
        )

    def _counting_requests(self, run: Any, *args: Any) -> Any:
        """``run(*args)``, adding the requests the wrapped responder sent to this counter."""
        inner = getattr(self.responder, "counter", None)
        before = inner.requests if inner is not None else 0
        try:
            return run(*args)
        finally:
            if inner is not None:
                self.counter.requests += inner.requests - before

    def format(self, prompt: str) -> str:
        return self.responder.format(prompt)

    def question_context(self, lead: str = "") -> str:
        return self.responder.question_context(lead)
