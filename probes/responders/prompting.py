"""How a question becomes a local model's tokens — one rule for every engine that reads a local
checkpoint (the Hugging Face engine and vLLM): the prompt format (chat template or raw template),
the tokenization of generation and scoring alike, and the fitting of long prompts to the context.
Two engines that share it read every prompt and every scored text as the same token ids."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from ..errors import ConfigError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PromptFormat:
    """How a question becomes the model's prompt.

    Attributes:
        mode: ``chat`` (the tokenizer's chat template, user turn + generation prompt), ``raw``
            (``template`` filled with the prompt), or ``auto`` (chat when the tokenizer has a
            template, raw otherwise).
        template: the raw-mode text; ``{prompt}`` is replaced by the prompt.
        system: an optional system turn (chat mode).
    """

    mode: Literal["auto", "chat", "raw"] = "auto"
    template: str = "{prompt}"
    system: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "chat", "raw"):
            raise ValueError(f"prompt mode {self.mode!r}: choose auto, chat or raw")
        if "{prompt}" not in self.template:
            raise ValueError("the raw prompt template must contain {prompt}")


class PromptTokens:
    """The prompt format and tokenization of a local model (a mixin). The class using it sets
    ``tokenizer`` and ``max_positions`` (the model's context, None: unbounded), then calls
    :meth:`use_prompt_format` (``prompt_format``, and ``chat``: whether the chat template is applied)."""

    tokenizer: Any
    prompt_format: PromptFormat
    chat: bool
    max_positions: int | None

    def use_prompt_format(self, prompt_format: PromptFormat) -> None:
        """Set ``prompt_format`` and ``chat`` (auto: the chat template where the tokenizer has one);
        ``chat`` without a template is refused."""
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if prompt_format.mode == "chat" and not has_template:
            raise ConfigError(
                "prompt format 'chat' was asked for but the model's tokenizer has no chat template; use "
                "--prompt-format raw --template '...{prompt}...' (or auto)"
            )
        self.prompt_format = prompt_format
        self.chat = prompt_format.mode == "chat" or (prompt_format.mode == "auto" and has_template)

    def format(self, prompt: str) -> str:
        """The full prompt text the model sees."""
        if not self.chat:
            return self.prompt_format.template.replace("{prompt}", prompt)
        messages = [{"role": "system", "content": self.prompt_format.system}] if self.prompt_format.system else []
        messages.append({"role": "user", "content": prompt})
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode_prompt(self, prompt: str) -> list[int]:
        return self._encode(self.format(prompt))["input_ids"]

    def _encode(self, text: str, offsets: bool = False) -> Any:
        """Token ids (and character offsets) of text as the model reads it: a chat template writes
        its own special tokens (BOS included), raw text gets the tokenizer's (e.g. BOS) — the one
        rule for generation and scoring, so a text is scored exactly as it is read when generating."""
        return self.tokenizer(text, add_special_tokens=not self.chat, return_offsets_mapping=offsets)

    def token_spans(self, text: str) -> list[tuple[int, int, int]]:
        """``(token id, start, end)`` of each token of ``text`` read as plain text (no specials)."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(i), int(a), int(b)) for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"])]

    @functools.cached_property
    def vocabulary_fingerprint(self) -> str:
        """sha256 of the token → id map and the special tokens: two models whose fingerprints match
        read every text as the same tokens (chat templates aside)."""
        vocab = sorted(self.tokenizer.get_vocab().items())
        specials = [self.tokenizer.bos_token_id, self.tokenizer.eos_token_id, self.tokenizer.pad_token_id]
        added = self.tokenizer("Probe 12 words, [BLANK] and $x^2$.")["input_ids"]  # which specials it adds (BOS…)
        return hashlib.sha256(json.dumps([vocab, specials, added]).encode()).hexdigest()

    def _fit_prompt(self, ids: list[int]) -> tuple[list[int], int]:
        """The prompt and how many of its first tokens were dropped: a prompt longer than the
        model's context keeps its last ``context − 1`` tokens (so at least one token can be
        generated). Recorded on the generation (``prompt_cut``), not only logged."""
        limit = self.max_positions
        if limit is not None and len(ids) >= limit:
            cut = len(ids) - limit + 1
            logger.warning(
                "a prompt of %d tokens exceeds the model's context of %d; its first %d tokens are dropped "
                "(for that prompt only)",
                len(ids),
                limit,
                cut,
            )
            return ids[cut:], cut
        return ids, 0

    def question_context(self, lead: str = "") -> str:
        """The formatted prompt's text before the question (e.g. ``"Q: "`` or a chat header, then
        ``lead``), so a question is scored the way the model reads it."""
        sentinel = "\u2063\u2063"  # invisible separators that no template contains
        formatted = self.format(lead + sentinel)
        return formatted[: formatted.index(sentinel)] if sentinel in formatted else ""

    def _fit_pair(
        self, context: list[int], text: list[int], limit: int | None = None
    ) -> tuple[list[int], list[int], int, int]:
        """Drop context tokens from the left (then text tokens from the right) to fit the model
        (``limit`` tokens; default its context); returns the pair and how many tokens each lost."""
        limit = self.max_positions if limit is None else limit
        if limit is None or len(context) + len(text) <= limit:
            return context, text, 0, 0
        keep = max(0, limit - len(text))
        logger.warning(
            "context + text of %d tokens exceed the model's context of %d; the context keeps its last %d tokens%s",
            len(context) + len(text),
            limit,
            keep,
            "" if keep else " and the text is cut",
        )
        return (
            (context[len(context) - keep :] if keep else []),
            text[:limit],
            len(context) - keep,
            max(0, len(text) - limit),
        )

    def scored_pairs(self, contexts: Sequence[str], texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """``(context ids, text ids)`` of each text after its context. Context and text are
        tokenized *together*, by the rule generation uses (raw text gets the tokenizer's BOS, a chat
        context carries the template's own), so the tokens at their boundary are the ones the model
        sees; the text's tokens are those ending after the context's last character."""
        pairs = []
        for context, text in zip(contexts, texts, strict=True):
            enc = self._encode(context + text, offsets=True)
            ids, offsets = enc["input_ids"], enc["offset_mapping"]
            split = next((i for i, (_, end) in enumerate(offsets) if end > len(context) and end > 0), len(ids))
            pairs.append((ids[:split], ids[split:]))
        return pairs
