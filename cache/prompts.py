"""Turn texts into token ids plus a mask of the tokens to pool (SPEC §0, pooling).

The pooled span is always the text itself: with ``prompt_format: raw`` the text is tokenized as
is (with whatever BOS the tokenizer adds); with ``chat`` it becomes the user turn of the
tokenizer's chat template. Either way, a token is pooled when its character offsets overlap the
text inside the formatted prompt and it is not a special token, so BOS, EOS and the template's
wrapper are excluded unless ``pool_span: all`` is asked for.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import ConfigError, InputError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncodedText:
    """One tokenized text.

    Attributes:
        input_ids: ``[n]`` int64 token ids of the formatted prompt (after truncation).
        pool_mask: ``[n]`` bool, True on the tokens that are averaged.
        truncated: whether tokens were cut to fit ``max_length``.
    """

    input_ids: np.ndarray
    pool_mask: np.ndarray
    truncated: bool

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_pooled(self) -> int:
        return int(self.pool_mask.sum())


class PromptEncoder:
    """Formats and tokenizes texts, computing each text's pool mask.

    Args:
        tokenizer: a Hugging Face tokenizer (fast tokenizers give exact spans; slow ones
            support ``raw`` formatting only, pooling every non-special token).
        prompt_format: ``raw`` or ``chat``.
        pool_span: ``text`` or ``all``.
        max_length: token limit per formatted prompt (``None``: no limit).
        on_long: ``truncate`` or ``error`` for prompts over ``max_length``.
        system_prompt / add_generation_prompt: chat formatting options.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        prompt_format: str = "raw",
        pool_span: str = "text",
        max_length: int | None = None,
        on_long: str = "truncate",
        system_prompt: str | None = None,
        add_generation_prompt: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.prompt_format = prompt_format
        self.pool_span = pool_span
        self.max_length = max_length
        self.on_long = on_long
        self.system_prompt = system_prompt
        self.add_generation_prompt = add_generation_prompt
        if prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                "prompt_format is 'chat' but the tokenizer has no chat template; use prompt_format 'raw' "
                "or a checkpoint whose tokenizer_config.json defines chat_template"
            )

    def describe(self) -> dict[str, Any]:
        """Everything about formatting that changes the pooled numbers (for provenance)."""
        template = getattr(self.tokenizer, "chat_template", None) if self.prompt_format == "chat" else None
        return {
            "prompt_format": self.prompt_format,
            "pool_span": self.pool_span,
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()
            if isinstance(template, str)
            else None,
            "system_prompt": self.system_prompt if self.prompt_format == "chat" else None,
            "add_generation_prompt": self.add_generation_prompt if self.prompt_format == "chat" else None,
            "max_length": self.max_length,
            "on_long": self.on_long,
        }

    def format(self, text: str) -> tuple[str, int, int]:
        """The prompt for ``text`` and the character span ``[start, end)`` of the text inside it."""
        if self.prompt_format == "raw":
            return text, 0, len(text)
        messages = []
        if self.system_prompt is not None:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": text})
        prompt = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=self.add_generation_prompt
        )
        for needle in (text, text.strip()):
            start = prompt.rfind(needle)
            if needle and start >= 0:
                return prompt, start, start + len(needle)
        raise InputError(
            f"the chat template rewrote the text, so its tokens cannot be located in the prompt: {_preview(text)}"
        )

    def encode(self, texts: Sequence[str]) -> list[EncodedText]:
        """Tokenize ``texts``; raises :class:`InputError` naming the offending text."""
        formatted = [self.format(text) for text in texts]
        prompts = [p for p, _, _ in formatted]
        add_special = self.prompt_format == "raw"
        try:
            enc = self.tokenizer(
                prompts,
                add_special_tokens=add_special,
                return_offsets_mapping=True,
                return_special_tokens_mask=True,
            )
            offsets = enc["offset_mapping"]
        except NotImplementedError:
            if self.prompt_format == "chat" and self.pool_span == "text":
                raise ConfigError(
                    "this tokenizer cannot report character offsets (not a fast tokenizer), so the text's span "
                    "inside a chat prompt cannot be found; use prompt_format 'raw' or pool_span 'all'"
                ) from None
            enc = self.tokenizer(prompts, add_special_tokens=add_special, return_special_tokens_mask=True)
            offsets = None
        out = []
        n_truncated = 0
        for i, (text, (_, start, end)) in enumerate(zip(texts, formatted)):
            ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
            special = np.asarray(enc["special_tokens_mask"][i], dtype=bool)
            if self.pool_span == "all":
                mask = np.ones(ids.shape[0], dtype=bool)
            elif offsets is None:
                mask = ~special
            else:
                spans = np.asarray(offsets[i], dtype=np.int64).reshape(-1, 2)
                mask = (spans[:, 0] < end) & (spans[:, 1] > start) & (spans[:, 1] > spans[:, 0]) & ~special
            truncated = self.max_length is not None and ids.shape[0] > self.max_length
            if truncated:
                if self.on_long == "error":
                    raise InputError(
                        f"text {i} is {ids.shape[0]} tokens long, over the limit of {self.max_length}: "
                        f"{_preview(text)} (set on_long: truncate to cut it, or shorten the text)"
                    )
                ids, mask = ids[: self.max_length], mask[: self.max_length]
                n_truncated += 1
            if not mask.any():
                raise InputError(f"text {i} has no token to pool after formatting and truncation: {_preview(text)}")
            out.append(EncodedText(input_ids=ids, pool_mask=mask, truncated=bool(truncated)))
        if n_truncated:
            logger.warning(
                "%d of %d texts exceeded %d tokens and were truncated (flagged in the store's 'truncated' column)",
                n_truncated,
                len(texts),
                self.max_length,
            )
        return out


def _preview(text: str, width: int = 60) -> str:
    short = text if len(text) <= width else text[: width - 1] + "…"
    return repr(short)
