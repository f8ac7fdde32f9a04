"""Tiny causal LMs built locally: the built-in default model, test fixtures, benchmarks.

Nothing is downloaded. A byte-level BPE tokenizer is trained offline with ``tokenizers`` on a
built-in corpus of maths questions; a GPT-2, Llama or Qwen2 config gets random weights (seeded),
with the norm weights perturbed away from 1 so that a backend that folded or skipped a norm
would show; both are saved with ``save_pretrained`` and meant to be loaded back through the real
``from_pretrained(local_dir)`` path.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

Arch = Literal["gpt2", "llama", "qwen2"]
TOY_FORMAT_VERSION = 1

BOS, EOS, PAD, IM_START, IM_END = "<|bos|>", "<|eos|>", "<|pad|>", "<|im_start|>", "<|im_end|>"


def chat_template(add_bos: bool) -> str:
    """A ChatML-style Jinja chat template (BOS first when the tokenizer adds one)."""
    return (
        ("{{ bos_token }}" if add_bos else "")
        + "{% for message in messages %}"
        + IM_START
        + "{{ message['role'] }}\n{{ message['content'] }}"
        + IM_END
        + "\n"
        + "{% endfor %}{% if add_generation_prompt %}"
        + IM_START
        + "assistant\n{% endif %}"
    )


@dataclass(frozen=True)
class ToyModelSpec:
    """Shape of a toy model.

    Attributes:
        arch: ``gpt2`` (absolute positions, no BOS added), ``llama`` (rotary, BOS added) or
            ``qwen2`` (rotary, attention biases, no BOS added).
        n_layers / d_model / n_heads: transformer size.
        vocab_size: model vocabulary (≥ the tokenizer's; extra ids are never produced).
        tokenizer_vocab: BPE vocabulary size to train.
        max_positions: context length.
        seed: seed of the weights.
        norm_noise: std of the noise added to every norm weight and bias.
        init_std: std of the random weights (``initializer_range``); larger values give O(1)
            activations, which makes absolute parity tolerances meaningful.
    """

    arch: Arch = "llama"
    n_layers: int = 4
    d_model: int = 64
    n_heads: int = 4
    vocab_size: int = 512
    tokenizer_vocab: int = 512
    max_positions: int = 256
    seed: int = 0
    norm_noise: float = 0.3
    init_std: float = 0.02

    def slug(self) -> str:
        return (
            f"{self.arch}-L{self.n_layers}-d{self.d_model}-v{self.vocab_size}-t{self.tokenizer_vocab}-p{self.max_positions}"
            f"-s{self.seed}-i{self.init_std:g}-f{TOY_FORMAT_VERSION}"
        )


def default_home() -> Path:
    """Where the toolkit keeps built artefacts: ``$LARA_HOME`` or ``~/.cache/lara-probes``."""
    home = os.environ.get("LARA_HOME")
    if home:
        return Path(home).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lara-probes"


def ensure_toy_model(spec: ToyModelSpec = ToyModelSpec(), root: str | Path | None = None) -> Path:
    """Directory of the toy model ``spec`` under ``root`` (default :func:`default_home`), built on
    first use. Building goes to a temporary directory renamed into place, so a half-built model
    is never seen."""
    root = Path(root) if root is not None else default_home() / "toy-models"
    target = root / spec.slug()
    if (target / "toy_spec.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.slug()}-", dir=root))
    try:
        build_toy_model(tmp, spec)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "toy_spec.json").is_file():  # lost a race against another builder: fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def build_toy_model(out_dir: str | Path, spec: ToyModelSpec = ToyModelSpec()) -> Path:
    """Train the tokenizer, initialise the model and save both to ``out_dir``."""
    import torch

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(spec.tokenizer_vocab, add_bos=spec.arch == "llama")
    if len(tokenizer) > spec.vocab_size:
        raise ValueError(f"vocab_size {spec.vocab_size} is smaller than the tokenizer's {len(tokenizer)} tokens")
    config = model_config(spec, tokenizer)
    from transformers import AutoModelForCausalLM

    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(config)
    generator = torch.Generator().manual_seed(spec.seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or ".ln_" in name or name.startswith("ln_"):
                param.add_(torch.randn(param.shape, generator=generator) * spec.norm_noise)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "toy_spec.json").write_text(json.dumps(asdict(spec), indent=2))
    return out_dir


def train_tokenizer(
    vocab_size: int = 512, add_bos: bool = False, texts: list[str] | None = None, split_digits: bool = False
):
    """A byte-level BPE tokenizer trained on ``texts`` (default :func:`corpus`), as a transformers
    fast tokenizer with BOS/EOS/PAD and ChatML turn markers (BOS prepended when ``add_bos``).
    ``split_digits`` makes every digit its own token (as Llama 3 and Qwen do)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS, PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus() if texts is None else texts, trainer)
    if add_bos:
        core.post_processor = processors.TemplateProcessing(
            single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, core.token_to_id(BOS))]
        )
    else:
        core.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[IM_START, IM_END],
    )
    tokenizer.chat_template = chat_template(add_bos)
    return tokenizer


def corpus() -> list[str]:
    """A few hundred short maths questions (arithmetic, geometry, probability, algebra)."""
    names = ["Ava", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana"]
    items = ["apples", "marbles", "books", "pencils", "coins", "stickers", "cookies", "tickets"]
    out = []
    for i in range(240):
        a, b, c = 3 + i % 17, 2 + (i * 7) % 13, 5 + (i * 11) % 29
        n, m, item = names[i % 8], names[(i + 3) % 8], items[i % 8]
        out += [
            f"{n} has {a} {item} and buys {b} more. How many {item} does {n} have now?",
            f"A train travels {a * 10} km in {b} hours. What is its average speed in km/h?",
            f"What is the area of a rectangle with sides {a} cm and {c} cm?",
            f"A fair die is rolled {b} times. What is the probability of getting at least one {1 + i % 6}?",
            f"Solve for $x$: ${a}x + {b} = {c}$.",
            f"If $f(x) = x^2 - {a}x + {b}$, find $f({c})$.",
            f"{n} gives {m} {b} of her {a + b} {item}. What fraction of them did she keep?",
            f"The price of a shirt is ${c}.{b:02d}. After a {a}% discount, what does it cost?",
            f"Compute $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{a + b}}}$ and simplify.",
            f"The temperature fell from {a} degrees to -{b} degrees. By how many degrees did it fall?",
        ]
    return out


def model_config(spec: ToyModelSpec, tokenizer: Any) -> Any:
    """The ``transformers`` config of a model of ``spec``'s shape over ``tokenizer`` (its BOS/EOS/PAD ids)."""
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    ids = {
        "bos_token_id": tokenizer.convert_tokens_to_ids(BOS),
        "eos_token_id": tokenizer.convert_tokens_to_ids(EOS),
        "pad_token_id": tokenizer.convert_tokens_to_ids(PAD),
    }
    if spec.arch == "gpt2":
        return GPT2Config(
            vocab_size=spec.vocab_size,
            n_positions=spec.max_positions,
            n_embd=spec.d_model,
            n_layer=spec.n_layers,
            n_head=spec.n_heads,
            initializer_range=spec.init_std,
            **ids,
        )
    common = dict(
        vocab_size=spec.vocab_size,
        hidden_size=spec.d_model,
        intermediate_size=2 * spec.d_model,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=spec.n_heads,
        num_key_value_heads=max(1, spec.n_heads // 2),
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=False,
        initializer_range=spec.init_std,
        **ids,
    )
    if spec.arch == "llama":
        return LlamaConfig(**common)
    if spec.arch == "qwen2":
        return Qwen2Config(**common)
    raise ValueError(f"unknown toy architecture {spec.arch!r}: use gpt2, llama or qwen2")
