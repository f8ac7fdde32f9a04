"""A text-memorisation testbed: a tiny GPT-2 trained (CPU, seconds, seeded) to memorise short Q→A
texts whose answers are arbitrary, so members can only be known by memory; non-members are unseen
texts of the same form. It is where the detectors of pre-training/SFT contamination are seen to
work (the tests and ``benchmarks/bench_memorised.py``); the RL testbed is :mod:`.build`.
The training is an LM loss on the whole text (``question\nA: answer``); the weights before it are
kept as a reference model."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

ADJECTIVES = [
    "red",
    "blue",
    "green",
    "silver",
    "golden",
    "quiet",
    "hidden",
    "broken",
    "ancient",
    "tiny",
    "frozen",
    "bright",
]
NOUNS = [
    "lantern",
    "river",
    "tower",
    "garden",
    "mirror",
    "bridge",
    "compass",
    "violin",
    "harbor",
    "forest",
    "engine",
    "clock",
]
WORDS = [
    "apple",
    "storm",
    "pepper",
    "marble",
    "canyon",
    "velvet",
    "rocket",
    "meadow",
    "copper",
    "falcon",
    "glacier",
    "orchid",
    "thunder",
    "saddle",
    "pebble",
    "lemon",
    "cobalt",
    "willow",
    "ember",
    "quartz",
]
TEMPLATE = "{prompt}\nA:"
# the question first, so a member's text can be continued from its beginning as plain text (partial-prompt
# completion); the first 60 % of its tokens ("Beside the a b, the c") name it, the rest (" d hides …") is memory
QUESTION = "Beside the {a} {b}, the {c} {d} hides which secret word?"


@dataclass(frozen=True)
class MemorisedModel:
    path: Path
    members: list[tuple[str, str]]  # (question, answer)
    non_members: list[tuple[str, str]]
    reference: Path  # the same model before its memorisation training (same tokenizer)


def make_pairs(n: int, seed: int, answer_words: int = 32) -> list[tuple[str, str]]:
    """Distinct questions (two random adjective–noun pairs) with answers of random words."""
    rng = random.Random(seed)
    pairs = [(a, b) for a in ADJECTIVES for b in NOUNS]
    subjects = rng.sample(pairs, n)
    out = []
    for a, b in subjects:
        c, d = rng.choice(pairs)
        answer = " " + " ".join(rng.choice(WORDS) for _ in range(answer_words)) + "."
        out.append((QUESTION.format(a=a, b=b, c=c, d=d), answer))
    return out


def build_memorised_model(
    out_dir: Path,
    n_members: int = 24,
    n_non_members: int = 24,
    n_fillers: int = 48,
    steps: int = 200,
    seed: int = 0,
    arch: str = "gpt2",
) -> MemorisedModel:
    """Train on the members plus ``n_fillers`` further texts that are never evaluated: with more
    than a handful of texts the model learns that answers to an unseen question are uncertain,
    instead of copying the answer of the nearest member with full confidence."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from cache.toymodels import BOS, EOS, PAD, train_tokenizer  # lazy: pulls h5py

    pairs = make_pairs(n_members + n_non_members + n_fillers, seed)
    members, non_members = pairs[:n_members], pairs[n_members : n_members + n_non_members]
    trained = members + pairs[n_members + n_non_members :]
    # a tokenizer of the texts' shared vocabulary (the word lists and the template), so a word is
    # about one token: short sequences, fast training, one sampling decision per word
    shape = TEMPLATE.format(prompt=QUESTION.format(a="", b="", c="", d=""))
    vocabulary = [shape + " " + " ".join(ADJECTIVES + NOUNS + WORDS) + "."] * 20
    tokenizer = train_tokenizer(700, texts=vocabulary)
    special = {
        "bos_token_id": tokenizer.convert_tokens_to_ids(BOS),
        "eos_token_id": tokenizer.convert_tokens_to_ids(EOS),
        "pad_token_id": tokenizer.convert_tokens_to_ids(PAD),
    }
    torch.manual_seed(seed)
    if arch == "gpt2":
        config = GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=96, n_layer=2, n_head=4, **special)
        model = GPT2LMHeadModel(config)
    else:
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=96,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=512,
            **special,
        )
        model = LlamaForCausalLM(config)
    reference = out_dir.parent / f"{out_dir.name}-before-training"
    model.save_pretrained(reference)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(reference)
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
    tokenizer.save_pretrained(out_dir)
    return MemorisedModel(out_dir, members, non_members, reference)
