"""A tiny GPT-2 trained (CPU, seconds, seeded) to memorise short Q→A texts whose answers are
arbitrary, so members can only be known by memory; non-members are unseen texts of the same form."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

ADJECTIVES = ["red", "blue", "green", "silver", "golden", "quiet", "hidden", "broken", "ancient", "tiny", "frozen", "bright"]
NOUNS = ["lantern", "river", "tower", "garden", "mirror", "bridge", "compass", "violin", "harbor", "forest", "engine", "clock"]
WORDS = ["apple", "storm", "pepper", "marble", "canyon", "velvet", "rocket", "meadow", "copper", "falcon", "glacier",
         "orchid", "thunder", "saddle", "pebble", "lemon", "cobalt", "willow", "ember", "quartz"]
TEMPLATE = "Q: {prompt}\nA:"


@dataclass(frozen=True)
class MemorisedModel:
    path: Path
    members: list[tuple[str, str]]  # (question, answer)
    non_members: list[tuple[str, str]]


def make_pairs(n: int, seed: int, answer_words: int = 32) -> list[tuple[str, str]]:
    """Distinct questions (two random adjective–noun pairs) with answers of random words."""
    rng = random.Random(seed)
    pairs = [(a, b) for a in ADJECTIVES for b in NOUNS]
    subjects = rng.sample(pairs, n)
    out = []
    for a, b in subjects:
        c, d = rng.choice(pairs)
        answer = " " + " ".join(rng.choice(WORDS) for _ in range(answer_words)) + "."
        out.append((f"What is the secret word of the {a} {b} beside the {c} {d}?", answer))
    return out


def build_memorised_model(out_dir: Path, n_members: int = 24, n_non_members: int = 24, n_fillers: int = 48,
                          steps: int = 200, seed: int = 0) -> MemorisedModel:
    """Train on the members plus ``n_fillers`` further texts that are never evaluated: with more
    than a handful of texts the model learns that answers to an unseen question are uncertain,
    instead of copying the answer of the nearest member with full confidence."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from cache.toymodels import BOS, EOS, PAD, train_tokenizer

    pairs = make_pairs(n_members + n_non_members + n_fillers, seed)
    members, non_members = pairs[:n_members], pairs[n_members : n_members + n_non_members]
    trained = members + pairs[n_members + n_non_members :]
    # a tokenizer of the texts' shared vocabulary (the word lists and the template), so a word is
    # about one token: short sequences, fast training, one sampling decision per word
    vocabulary = [TEMPLATE.format(prompt="What is the secret word of the beside?") + " " + " ".join(ADJECTIVES + NOUNS + WORDS) + "."] * 20
    tokenizer = train_tokenizer(700, texts=vocabulary)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=96, n_layer=2, n_head=4,
                        bos_token_id=tokenizer.convert_tokens_to_ids(BOS), eos_token_id=tokenizer.convert_tokens_to_ids(EOS),
                        pad_token_id=tokenizer.convert_tokens_to_ids(PAD))
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    texts = [TEMPLATE.format(prompt=q) + a for q, a in trained]
    encoded = [tokenizer(t)["input_ids"] + [config.eos_token_id] for t in texts]
    width = max(len(x) for x in encoded)
    ids = torch.tensor([x + [config.pad_token_id] * (width - len(x)) for x in encoded])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in encoded])
    labels = ids.masked_fill(mask == 0, -100)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(out_dir)
    return MemorisedModel(out_dir, members, non_members)
