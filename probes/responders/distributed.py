"""A responder split across the ranks of a ``torch.distributed`` job (``lara detect`` under torchrun).

Every rank runs the same detectors on the same questions in the same order, so every rank makes
the same responder calls. Each batch call (generate, complete, score, score_ids) is split — the
longest items first, each to the least-loaded rank, ties broken by a hash of the item, the same
split on every rank — each rank computes its share through its own (cached) responder, and the
results are gathered on every rank, which then carries on exactly as one process would.
Completion j of a prompt depends on (seed, prompt, j) only, so which rank computes it does not
change it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Callable, Sequence

from cache.distributed import Ranks, assign

from .base import Generation, GenerationParams, Rollout, TextScore

if TYPE_CHECKING:
    from .base import Responder


class DistributedResponder:
    """Wraps a rank's responder; everything but the batch calls is the wrapped responder's own."""

    def __init__(self, responder: Responder, ranks: Ranks) -> None:
        self.responder = responder
        self.ranks = ranks

    def __getattr__(self, name: str) -> Any:
        return getattr(self.responder, name)

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        return self._split(
            list(prompts),
            [len(p) for p in prompts],
            lambda idx: self.responder.generate([prompts[i] for i in idx], params),
        )

    def complete(self, texts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        return self._split(
            list(texts), [len(t) for t in texts], lambda idx: self.responder.complete([texts[i] for i in idx], params)
        )

    def score(self, contexts: Sequence[str], texts: Sequence[str]) -> list[TextScore]:
        items = [f"{c}\x00{t}" for c, t in zip(contexts, texts, strict=True)]
        return self._split(
            items,
            [len(x) for x in items],
            lambda idx: self.responder.score([contexts[i] for i in idx], [texts[i] for i in idx]),
        )

    def score_ids(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[TextScore]:
        items = [f"{a}\x00{b}" for a, b in pairs]
        return self._split(
            items, [len(a) + len(b) for a, b in pairs], lambda idx: self.responder.score_ids([pairs[i] for i in idx])
        )

    def divergence(self, rollouts: Sequence[Rollout], reference: Responder) -> list[Any]:
        return self._split(
            [r.key() for r in rollouts],
            [len(r.prompt) + len(r.token_ids) for r in rollouts],
            lambda idx: self.responder.divergence(
                [rollouts[i] for i in idx], getattr(reference, "responder", reference)
            ),
        )

    def _split(self, items: list[str], weights: list[int], run: Callable[[list[int]], list[Any]]) -> list[Any]:
        """``run`` on this rank's share of ``items`` (indices), gathered into one list in item order on
        every rank. Repeated items are computed once, by one rank, as one process computes them once."""
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            first.setdefault(item, i)
        distinct = list(first.values())
        keys = [hashlib.sha256(items[i].encode("utf-8")).hexdigest() for i in distinct]
        owner = assign([weights[i] for i in distinct], keys, self.ranks.world_size)
        mine = [i for i, rank in zip(distinct, owner) if rank == self.ranks.rank]
        local = run(mine) if mine else []
        results: dict[int, Any] = {}
        for part in self.ranks.gather(list(zip(mine, local))):
            results.update(part)
        return [results[first[item]] for item in items]


def on_ranks(responder: Responder, ranks: Ranks | None) -> Responder:
    """``responder``, split across the ranks of a launched job when there is one."""
    return responder if ranks is None else DistributedResponder(responder, ranks)


def sum_counts_over_ranks(info: dict[str, Any], ranks: Ranks) -> None:
    """Every rank's counts (completions, scores, store hits, requests) summed into ``info``, and how the job ran."""
    for key in ("counts", "reference_counts"):
        parts = ranks.gather(info.get(key))
        if info.get(key) is not None:
            info[key] = {name: sum(p[name] for p in parts) for name in parts[0]}
    info["distributed"] = {"world_size": ranks.world_size}
