"""A Hugging Face causal LM as a responder: batched generation with a KV cache and left padding,
per-step entropy and chosen-token log-prob recorded as it goes, teacher-forced scoring.

Memory: generation keeps one ``[batch, vocab]`` logits row per step (never ``[steps, vocab]``);
scoring materialises ``[batch, tokens, vocab]`` logits only up to ``score_budget_mib``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError
from .base import Access, CallCounter, Generation, GenerationParams, Responder, Rollout, TextScore, sample_seed
from .counter_sampler import SAMPLER_VERSION
from .decoding import DecodeJob, decode_dynamic, decode_static
from .divergence import policy_kl
from .forward_scoring import prefix_order, score_batch
from .prompting import PromptFormat, PromptTokens

__all__ = ["LocalResponder", "PromptFormat"]

DECODING = ("auto", "dynamic", "static")

logger = logging.getLogger(__name__)


class LocalResponder(PromptTokens):
    """Generation and scoring on a loaded model (``cache.loading.load_model``); its prompts and
    scored texts are tokenized by :class:`~.prompting.PromptTokens`.

    Args:
        loaded: the model and tokenizer.
        prompt_format: how prompts are formatted.
        batch_size: rows (prompt × completion) generated together.
        score_budget_mib: float32 logits materialised per scoring batch.
        decoding: ``dynamic`` (a growing KV cache, finished rows leave the batch), ``static`` (a
            pre-allocated cache and a fixed-shape step, captured on a GPU) or ``auto``.
    """

    access = frozenset(Access)
    sampler_version = SAMPLER_VERSION  # part of a sampled answer's key in the response store

    def __init__(
        self,
        loaded: Any,
        prompt_format: PromptFormat = PromptFormat(),
        batch_size: int = 16,
        score_budget_mib: float = 512,
        decoding: str = "auto",
    ) -> None:
        if decoding not in DECODING:
            raise ConfigError(f"decoding {decoding!r}: choose {', '.join(DECODING)}")
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.max_positions = loaded.max_positions
        self.use_prompt_format(prompt_format)
        self.batch_size = batch_size
        self.score_budget_mib = score_budget_mib
        self.decoding = decoding
        self._compiled: Any = None
        self._static_caches: dict[tuple[int, int], Any] = {}  # one pre-allocated cache per static bucket
        self.counter = CallCounter()
        self.eos_ids = eos_ids(getattr(self.model, "generation_config", None), self.tokenizer)
        self._cache_checked = False
        self.identity = {
            "kind": "local",
            "weights": loaded.weights_fingerprint,
            "tokenizer": loaded.tokenizer_fingerprint,
            "dtype": str(loaded.dtype),
            "prompt_format": {**asdict(prompt_format), "chat": self.chat},
            # 2: each row its own budget and prompt cut (SPEC §5); the store never serves completions
            # made under the earlier batch-wide budget, which depended on batch-mates
            "decoding_rule": 2,
        }
        source = getattr(loaded, "source", None)
        if getattr(source, "kind", "checkpoint") in ("gguf", "adapter"):  # named by digest (SPEC §9); others as before
            self.identity["source"] = source.weights_identity()

    @property
    def commit_rows(self) -> int:
        """Completions a response store runs and commits together: one batch."""
        return self.batch_size

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """``params.n`` completions of each prompt (formatted), in order."""
        return self._generate([self.encode_prompt(p) for p in prompts], prompts, params)

    def complete(self, texts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """``params.n`` plain-text continuations of each text: no template, the tokenizer's own
        special tokens (e.g. BOS) as for any raw text."""
        return self._generate([self.tokenizer(t)["input_ids"] for t in texts], texts, params)

    def generate_some(
        self, prompts: Sequence[str], params: GenerationParams, wanted: Sequence[Sequence[int]]
    ) -> list[list[Generation]]:
        """Completions ``wanted[i]`` (indices j < ``params.n``) of prompt i, in that order: completion j
        depends on (prompt, parameters, seed, j) alone, so a store holding the others is completed
        exactly (a larger n draws only the new samples)."""
        return self._generate([self.encode_prompt(p) for p in prompts], prompts, params, wanted)

    def complete_some(
        self, texts: Sequence[str], params: GenerationParams, wanted: Sequence[Sequence[int]]
    ) -> list[list[Generation]]:
        """:meth:`complete`'s continuations ``wanted[i]`` of text i only (as :meth:`generate_some`)."""
        return self._generate([self.tokenizer(t)["input_ids"] for t in texts], texts, params, wanted)

    def _generate(
        self,
        encoded: list[list[int]],
        prompts: Sequence[str],
        params: GenerationParams,
        wanted: Sequence[Sequence[int]] | None = None,
    ) -> list[list[Generation]]:
        """Completions of token-id prompts (all n, or the indices ``wanted[i]`` of prompt i). Each
        prompt is fitted to the context on its own (:meth:`_fit_prompt`) and each row has its own
        budget, so a completion depends only on (prompt, decoding parameters, seed, j) — never on
        its batch-mates (SPEC §5)."""
        import torch

        fitted = [self._fit_prompt(ids) for ids in encoded]
        if fitted and not self._cache_checked:
            self._check_cached_decoding(fitted[0][0])
        indices = [range(params.n)] * len(prompts) if wanted is None else wanted
        rows = [(p, j) for p in range(len(prompts)) for j in indices[p]]
        order = sorted(range(len(rows)), key=lambda r: -len(fitted[rows[r][0]][0]))  # similar lengths together
        results: list[Generation | None] = [None] * len(rows)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                seeds = [sample_seed(params.seed, prompts[rows[r][0]], rows[r][1]) for r in batch]
                outs = self._generate_batch([fitted[rows[r][0]][0] for r in batch], params, seeds)
                for r, out in zip(batch, outs):
                    out.prompt_cut = fitted[rows[r][0]][1]
                    results[r] = out
        self.counter.generated += len(rows)
        grouped: list[list[Generation]] = [[] for _ in prompts]
        for (p, _), gen in zip(rows, results):
            grouped[p].append(gen)  # type: ignore[arg-type]
        return grouped

    def _check_cached_decoding(self, prompt_ids: list[int], steps: int = 8) -> None:
        """Refuse a model that decodes differently with its KV cache than without (a wrapper
        whose rewired modules mishandle the cache would feed every detector garbage): the log-probs
        of a short greedy decode must equal the same tokens' teacher-forced ones (no cache) within
        1e-3 in float32 (0.1 in half precision)."""
        import torch

        self._cache_checked = True
        with torch.inference_mode():
            decoded = self._generate_batch([prompt_ids], GenerationParams(max_new_tokens=steps), [0], static=False)[0]
            if not decoded.token_ids:
                return
            forced = self._score_batch([(prompt_ids, decoded.token_ids)])[0]
        gap = float(np.abs(forced.logprobs - decoded.logprobs).max())
        tolerance = 1e-3 if self.loaded.dtype == torch.float32 else 0.1
        if gap > tolerance:
            raise ConfigError(
                f"this model ({type(self.model).__name__}) decodes differently with its KV cache than without "
                f"(log-probs differ by {gap:.3g}), so its answers would be wrong; for generation pass the Hugging "
                "Face model itself: load_model(AutoModelForCausalLM.from_pretrained(DIR), tokenizer)"
            )
        logger.debug("cached decoding checked against teacher forcing (max log-prob gap %.2g)", gap)

    def _generate_batch(
        self, prompt_ids: list[list[int]], params: GenerationParams, seeds: list[int], static: bool | None = None
    ) -> list[Generation]:
        """One batch of rows (:mod:`.decoding`): row i's budget is its own, min(max_new_tokens,
        context − len(prompt_i)); the static loop where :attr:`decoding` asks for it."""
        limit = self.max_positions
        budgets = [
            params.max_new_tokens if limit is None else min(params.max_new_tokens, limit - len(x)) for x in prompt_ids
        ]
        job = DecodeJob(prompt_ids, params, seeds, budgets, self.tokenizer.pad_token_id, frozenset(self.eos_ids), limit)
        if self.static_decoding if static is None else static:
            steps = decode_static(self.model, job, self.loaded.device, self._captured_step(), self._static_caches)
        else:
            steps = decode_dynamic(self.model, job, self.loaded.device)
        return [step.generation(self.tokenizer) for step in steps]

    @property
    def static_decoding(self) -> bool:
        """Whether batches decode with a static cache: ``static`` asks for it; ``auto`` is dynamic
        everywhere until a GPU measurement shows where static pays (docs/performance.md)."""
        return self.decoding == "static"

    def _captured_step(self) -> Any:
        """The fixed-shape decoding step: compiled with CUDA graphs (``torch.compile``,
        reduce-overhead) on a CUDA device, recompiled once per static bucket; the eager model elsewhere."""
        import torch

        if self.loaded.device.type != "cuda":
            return None
        if self._compiled is None:
            limit = getattr(torch._dynamo.config, "recompile_limit", None)
            if limit is not None and limit < 64:  # one graph per bucket (rows x length): more than the default 8
                torch._dynamo.config.recompile_limit = 64
            self._compiled = torch.compile(self.model, mode="reduce-overhead", dynamic=False)
        return self._compiled

    # ------------------------------------------------------------------ scoring

    def score(self, contexts: Sequence[str], texts: Sequence[str]) -> list[TextScore]:
        """Teacher-forced log-probs (and vocabulary μ, σ) of each text after its context.

        Context and text are tokenized *together*, by the rule generation uses (raw text gets the
        tokenizer's BOS, a chat context carries the template's own), so the tokens at their
        boundary are the ones the model sees; the text's tokens are those ending after the
        context's last character (:meth:`scored_pairs`). A text whose first token follows nothing
        (an empty context and no BOS) leaves that token unscored, as an API's prompt log-probs do.
        """
        return self.score_ids(self.scored_pairs(contexts, texts))

    def divergence(self, rollouts: Sequence[Rollout], reference: Responder) -> list[np.ndarray]:
        """Per-position KL(this model ‖ ``reference``) along each rollout (:mod:`.divergence`)."""
        self.counter.scored += len(rollouts)
        return policy_kl(self, reference, rollouts)

    def score_ids(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[TextScore]:
        """Like :meth:`score` on token ids: ``(context_ids, text_ids)`` pairs."""
        import torch

        fitted = [self._fit_pair(list(c), list(t)) for c, t in pairs]
        pairs = [(c, t) for c, t, _, _ in fitted]
        if len(pairs) > 1 and not self._cache_checked:  # a shared prefix is scored through the KV cache
            first = pairs[0][0] or pairs[0][1]
            self._check_cached_decoding(self._fit_prompt(list(first))[0])
        vocab = self.model.get_output_embeddings().weight.shape[0]
        budget_tokens = max(1, int(self.score_budget_mib * 2**20 // (vocab * 4)))
        order = prefix_order([len(c) + len(t) for c, t in pairs], [c for c, _ in pairs])  # shared prefixes together
        results: list[TextScore | None] = [None] * len(pairs)
        with torch.inference_mode():
            batch: list[int] = []
            for i in order + [None]:  # type: ignore[list-item]
                if i is not None:
                    width = len(pairs[i][0]) + len(pairs[i][1])
                    longest = max([width] + [len(pairs[j][0]) + len(pairs[j][1]) for j in batch])
                    if not batch or longest * (len(batch) + 1) <= budget_tokens:
                        batch.append(i)
                        continue
                for j, result in zip(batch, self._score_batch([pairs[j] for j in batch])):
                    result.context_cut, result.text_cut = fitted[j][2], fitted[j][3]
                    results[j] = result
                batch = [i] if i is not None else []
        self.counter.scored += len(pairs)
        return results  # type: ignore[return-value]

    def _score_batch(self, pairs: list[tuple[list[int], list[int]]]) -> list[TextScore]:
        return score_batch(self.model, self.tokenizer.pad_token_id, self.loaded.device, pairs)


def eos_ids(generation_config: Any, tokenizer: Any) -> set[int]:
    """The ids generation stops at: the generation config's, the tokenizer's, and chat end tokens."""
    ids: set[int] = set()
    configured = getattr(generation_config, "eos_token_id", None)
    for value in configured if isinstance(configured, list) else [configured]:
        if value is not None:
            ids.add(int(value))
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    for token in ("<|im_end|>", "<|eot_id|>", "<|end|>"):
        tid = tokenizer.convert_tokens_to_ids(token) if token in tokenizer.get_vocab() else None
        if tid is not None:
            ids.add(int(tid))
    return ids
