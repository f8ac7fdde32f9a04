"""Decoding a Hugging Face model under a JSON schema: every token it may emit keeps the output a
prefix of a document the schema accepts (llguidance's token masks, as vLLM's structured outputs).

Small models asked for JSON write JSON-looking text that never parses; under the schema's grammar
the output parses by construction, and whitespace is fixed (none between tokens of the JSON), so a
model cannot loop on spaces until ``max_tokens`` runs out. :class:`SchemaLogitsProcessor` is a
``transformers`` logits processor (one per ``generate()`` call, one matcher per sequence);
:func:`generate_json` runs a chat prompt through it. Used by ``lara serve`` for requests with
``response_format: json_schema`` and by the in-process backend (``generation.backend: local``).
The ``llguidance`` package is imported on first use (``pip install llguidance``).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

# no free whitespace (llguidance's default allows any run of it between tokens: a small model loops on
# newlines until max_tokens); one space after each separator, as models write JSON
COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_TOKENIZERS: dict[int, Any] = {}  # id(hf tokenizer) -> its llguidance tokenizer (built once: a vocabulary scan)


def llguidance_tokenizer(tokenizer: Any, vocab_size: int) -> Any:
    """The llguidance view of a Hugging Face tokenizer (``vocab_size``: the model's logits width)."""
    key = id(tokenizer)
    if key not in _TOKENIZERS:
        try:
            import llguidance.hf
        except ImportError as err:  # pragma: no cover - a dependency of the toolkit
            raise ImportError("constrained decoding needs llguidance: pip install llguidance") from err
        _TOKENIZERS[key] = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
    return _TOKENIZERS[key]


def schema_grammar(schema: dict[str, Any]) -> str:
    """The grammar of ``schema`` (compact JSON: no whitespace between tokens); ValueError when
    llguidance cannot compile it."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=COMPACT)
    failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if failed:
        raise ValueError(f"the JSON schema cannot be compiled to a grammar: {'; '.join(messages)}")
    return grammar


class SchemaLogitsProcessor:
    """Masks each row's logits to the tokens its grammar allows next (a ``transformers``
    ``LogitsProcessor``: ``scores [batch, vocab]``); rows that finished the document may only end."""

    def __init__(self, tokenizer: Any, vocab_size: int, grammar: str, rows: int) -> None:
        import llguidance
        import llguidance.torch

        self._lltok = llguidance_tokenizer(tokenizer, vocab_size)
        self.matchers = [llguidance.LLMatcher(self._lltok, grammar) for _ in range(rows)]
        self._bitmask = llguidance.torch.allocate_token_bitmask(rows, self._lltok.vocab_size)
        self._prompt_length: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import llguidance.torch

        if self._prompt_length is None:
            self._prompt_length = input_ids.shape[1]
        elif input_ids.shape[1] > self._prompt_length:
            for row, matcher in enumerate(self.matchers):
                if not matcher.is_stopped():
                    matcher.consume_token(int(input_ids[row, -1]))
        for row, matcher in enumerate(self.matchers):
            llguidance.torch.fill_next_token_bitmask(matcher, self._bitmask, row)
        width = scores.shape[1]
        llguidance.torch.apply_token_bitmask_inplace(scores, self._bitmask.to(scores.device)[:, : (width + 31) // 32])
        return scores

    def errors(self) -> list[str]:
        """Each row's grammar error, if it hit one (empty when every output kept to the schema)."""
        return [m.get_error() for m in self.matchers if m.is_error()]


def generate_json(
    model: Any,
    tokenizer: Any,
    messages: Sequence[dict[str, str]],
    schema: dict[str, Any],
    *,
    temperature: float = 0.0,
    top_p: float = 1.0,
    n: int = 1,
    seed: int = 0,
    max_new_tokens: int = 512,
) -> list[tuple[str, str, int]]:
    """``n`` completions of the chat ``messages`` that keep to ``schema``: ``(text, finish_reason,
    completion tokens)`` each (``stop`` when the document ended, ``length`` when ``max_new_tokens``
    cut it). ``temperature`` 0 decodes greedily; a ``seed`` gives the same completions again."""
    import torch
    from transformers import LogitsProcessorList

    prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    encoded = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(model.device)
    vocab = model.get_output_embeddings().weight.shape[0]
    processor = SchemaLogitsProcessor(tokenizer, vocab, schema_grammar(schema), n)
    sampling = temperature > 0
    torch.manual_seed(seed)
    with torch.no_grad():
        output = model.generate(
            **encoded,
            logits_processor=LogitsProcessorList([processor]),
            do_sample=sampling,
            temperature=temperature if sampling else None,
            top_p=top_p if sampling else None,
            top_k=None,
            num_return_sequences=n,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        )
    start = encoded["input_ids"].shape[1]
    out = []
    for row in range(n):
        tokens = [t for t in output[row, start:].tolist() if t not in _specials(tokenizer)]
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        finished = processor.matchers[row].is_stopped() or processor.matchers[row].is_accepting()
        out.append((text, "stop" if finished else "length", len(tokens)))
    return out


def _specials(tokenizer: Any) -> set[int]:
    ids = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    return {i for i in ids if i is not None}
