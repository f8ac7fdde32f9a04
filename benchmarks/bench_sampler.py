"""The counter-based sampler against the one it replaced, side by side in one run (not a test;
issue 55): the per-row generators (one ``torch.Generator`` per row and one ``torch.multinomial``
each: ``b`` small kernels a step) against one hash-and-Gumbel-max draw for every row at once.

(a) one step's draw alone, on ``[rows, vocab]`` float32 logits, for the vocabularies the toolkit
    meets (the testbed's, GPT-2's, SmolLM2's, Qwen2.5's), T = 1, top-p 1 and 0.95;
(b) whole sampling through the local responder (T = 1, n samples of each prompt) on the shipped
    testbed's RL checkpoint and on a GPT-2-small-shaped model with random weights, with each sampler;
(c) the same with the counter-based sampler in each decoding loop: dynamic (a growing cache,
    finished rows leave the batch) and static (a pre-allocated cache of bucketed shape; compiled
    with CUDA graphs on a GPU, eager elsewhere);
(d) the dynamic loop prefilling each row's prompt (as before issue 56's tenth session, and as HF
    ``generate`` with ``num_return_sequences`` does) against one prefill per distinct prompt, its
    cache copied to the prompt's n rows: on (b)'s models and, with the smollm extra, on the
    real-model demo's shape (SmolLM2's RL checkpoint, chat prompts, ``--smollm-n`` samples of 48
    tokens, 128 rows a batch), with whether every row's tokens came out the same;
(e) the top-p nucleus on a model's own next-token distributions (every position of 48 questions'
    prompts and answers: SmolLM2's RL checkpoint with the smollm extra, else the testbed's), found
    among each row's 256 most probable tokens against a full sort of every row: ms per 128 rows,
    the rows whose nucleus ran past the candidates, and the rows whose sets differ; and the rows
    where ``counter-1``'s rule (equal probabilities in ``topk``'s order, not lower id first) kept
    another set — with the model's logits in float32, then in bfloat16 (coarse: ties are likelier).

    python benchmarks/bench_sampler.py                       # the table in docs/performance.md (CPU)
    python benchmarks/bench_sampler.py --device cuda         # on a GPU
    python benchmarks/bench_sampler.py --sections de         # (d) and (e) alone
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_engines import TESTBED, gpt2_small, prompts  # noqa: E402

SMOLLM_RL = Path(__file__).resolve().parents[1] / "probes/testbed/checkpoints/smollm-seed0/rl"
VOCABULARIES = {"testbed": 512, "gpt2": 50257, "smollm2": 49152, "qwen2.5": 152064}


def legacy_choose(logits: Any, params: Any, keys: Any, t: int) -> Any:
    """The sampler before issue 55: a generator per row seeded by the row's key, advanced one draw a
    step, ``torch.multinomial`` on the tempered, top-p-truncated probabilities (a baseline only)."""
    import torch

    if params.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_p, index = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < params.top_p
        probs = torch.zeros_like(probs).scatter(-1, index, sorted_p * keep)
    draws = []
    for i, key in enumerate(keys.tolist()):
        if key not in _GENERATORS:
            _GENERATORS[key] = torch.Generator(device=logits.device).manual_seed(key)
        draws.append(torch.multinomial(probs[i], 1, generator=_GENERATORS[key])[0])
    return torch.stack(draws)


_GENERATORS: dict[int, Any] = {}  # each row's generator, by its key (cleared between measurements)


def time_draws(device: str, rows: int, repeats: int) -> list[tuple[str, float, float, float]]:
    """(vocabulary, top_p, ms per step legacy, ms per step counter) for each vocabulary."""
    import torch

    from probes.responders.base import GenerationParams
    from probes.responders.decoding import choose_tokens

    out = []
    for name, vocab in VOCABULARIES.items():
        for top_p in (1.0, 0.95):
            logits = torch.randn(rows, vocab, device=device) * 3
            keys = torch.arange(rows, dtype=torch.int64, device=device) * 7919 + 11
            params = GenerationParams(8, 1.0, top_p, 2, 0)
            timings = []
            for choose in (legacy_choose, choose_tokens):
                _GENERATORS.clear()
                choose(logits, params, keys, 0)  # warm-up
                _sync(device)
                start = time.perf_counter()
                for t in range(repeats):
                    choose(logits, params, keys, t)
                _sync(device)
                timings.append((time.perf_counter() - start) / repeats * 1e3)
            out.append((name, top_p, *timings))
    return out


def time_sampling(
    loaded: Any, questions: list[str], n: int, tokens: int, batch: int, how: str, chat: bool = False
) -> tuple[float, list]:
    """(tokens/s, the completions' token ids) of the local responder: ``how`` = ``generators`` (the
    legacy sampler, dynamic loop), ``dynamic`` or ``static`` (the counter-based sampler in that
    loop), ``per-row-prefill`` (the dynamic loop prefilling every row); raw prompts, or ``chat``."""
    from probes.responders import decoding
    from probes.responders.base import GenerationParams
    from probes.responders.local import LocalResponder, PromptFormat

    choose = legacy_choose if how == "generators" else decoding.choose_tokens
    real = decoding.choose_tokens, decoding.distinct_prompts
    decoding.choose_tokens = choose
    if how == "per-row-prefill":
        decoding.distinct_prompts = lambda ids: ([list(x) for x in ids], list(range(len(ids))))
    try:
        loop = how if how in ("dynamic", "static") else "dynamic"
        fmt = PromptFormat(mode="chat") if chat else PromptFormat(mode="raw", template="Q: {prompt}\nA:")
        responder = LocalResponder(loaded, fmt, batch_size=batch, decoding=loop)
        responder.generate(questions, GenerationParams(tokens, 1.0, 1.0, n, 1))  # warm-up: the same shapes
        _GENERATORS.clear()
        start = time.perf_counter()
        gens = responder.generate(questions, GenerationParams(tokens, 1.0, 1.0, n, 0))
        _sync(str(loaded.device))
        seconds = time.perf_counter() - start
        return sum(len(g.token_ids) for row in gens for g in row) / seconds, [g.token_ids for row in gens for g in row]
    finally:
        decoding.choose_tokens, decoding.distinct_prompts = real


def prefill_rows(args: argparse.Namespace, models: dict[str, Path]) -> None:
    """(d): one prefill a row against one per distinct prompt, on each model (and SmolLM2 if installed)."""
    from cache.config import ModelConfig
    from cache.loading import load_model

    print(
        f"\n(d) the dynamic loop, one prefill a row against one a distinct prompt; tokens/s "
        f"({args.n} completions of up to {args.new_tokens} tokens of {args.questions} questions, raw prompts, "
        f"{args.batch_size} rows a batch; SmolLM2: {args.smollm_n} of 48 tokens of 16 demo questions, chat, 128 rows)"
    )
    shapes = {
        label: (source, prompts(args.questions), args.n, args.new_tokens, args.batch_size, False)
        for label, source in models.items()
    }
    if SMOLLM_RL.exists():
        demo = [json.loads(line)["question"] for line in (SMOLLM_RL.parent / "questions.jsonl").open()][:16]
        shapes["SmolLM2 demo (RL)"] = (SMOLLM_RL, demo, args.smollm_n, 48, 128, True)
    else:
        print("    SmolLM2 left out: the smollm testbed is not in this checkout")
    for label, (source, questions, n, tokens, batch, chat) in shapes.items():
        loaded = load_model(ModelConfig(source=str(source), device=args.device, dtype="float32"))
        each, each_ids = time_sampling(loaded, questions, n, tokens, batch, "per-row-prefill", chat)
        shared, shared_ids = time_sampling(loaded, questions, n, tokens, batch, "dynamic", chat)
        same = sum(a == b for a, b in zip(each_ids, shared_ids))
        print(
            f"    {label:<20} a row {each:8.1f}   a prompt {shared:8.1f}   {shared / each:.2f}x   "
            f"rows identical {same}/{len(each_ids)}"
        )


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def sampler_rows(args: argparse.Namespace, models: dict[str, Path]) -> None:
    """(a), (b) and (c)."""
    from cache.config import ModelConfig
    from cache.loading import load_model

    print(f"(a) one step's draw for {args.rows} rows, ms (mean of {args.repeats}); per-row generators vs counter-based")
    print(f"    {'vocabulary':<10} {'size':>7} {'top-p':>6} {'generators':>11} {'counter':>9} {'speed-up':>9}")
    for name, top_p, legacy, counter in time_draws(args.device, args.rows, args.repeats):
        print(
            f"    {name:<10} {VOCABULARIES[name]:>7} {top_p:>6} {legacy:>11.2f} {counter:>9.2f} {legacy / counter:>8.2f}x"
        )
    print(
        f"\n(b) sampling through the local responder: {args.n} completions of up to {args.new_tokens} tokens of "
        f"{args.questions} questions (T = 1), {args.batch_size} rows a batch; tokens/s"
    )
    questions = prompts(args.questions)
    rates = {}
    for label, source in models.items():
        loaded = load_model(ModelConfig(source=str(source), device=args.device, dtype="float32"))
        rates[label] = {
            how: time_sampling(loaded, questions, args.n, args.new_tokens, args.batch_size, how)[0]
            for how in ("generators", "dynamic", "static")
        }
        r = rates[label]
        print(
            f"    {label:<20} generators {r['generators']:8.1f}   counter {r['dynamic']:8.1f}   "
            f"{r['dynamic'] / r['generators']:.2f}x"
        )
    print("\n(c) the counter-based sampler in each decoding loop; tokens/s")
    for label, r in rates.items():
        print(
            f"    {label:<20} dynamic {r['dynamic']:8.1f}   static {r['static']:8.1f}   {r['static'] / r['dynamic']:.2f}x"
        )


def counter1_nucleus(probs: Any, top_p: float) -> Any:
    """``[b, V]`` bool: the nucleus as ``counter-1`` found it — among ``topk``'s 256 candidates in
    the order ``topk`` gives equal ones, a full (unstable) sort only where the last candidate is in."""
    import torch

    top, index = probs.topk(min(256, probs.shape[-1]), dim=-1)
    keep_top = top.cumsum(-1) - top < top_p
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, index, keep_top)
    wider = keep_top[:, -1]
    if bool(wider.any()):
        sorted_p, order = probs[wider].sort(dim=-1, descending=True)
        keep[wider] = torch.zeros_like(sorted_p, dtype=torch.bool).scatter(
            -1, order, sorted_p.cumsum(-1) - sorted_p < top_p
        )
    return keep


def nucleus_rows(args: argparse.Namespace) -> None:
    """(e): the nucleus among candidates against a full sort, on a model's own logits; and the
    rows where counter-1's tie rule kept another set, in float32 and in bfloat16 logits."""
    import torch

    from cache.config import ModelConfig
    from cache.loading import load_model
    from probes.responders.local import LocalResponder, PromptFormat

    smollm = SMOLLM_RL.exists()
    source = SMOLLM_RL if smollm else TESTBED / "rl"
    rows = [json.loads(line) for line in (source.parent / "questions.jsonl").open()][:48]
    loaded = load_model(ModelConfig(source=str(source), device=args.device, dtype="float32"))
    responder = LocalResponder(loaded, PromptFormat(mode="chat" if smollm else "raw"))
    texts = [
        responder.encode_prompt(r["question"]) + loaded.tokenizer(f" The answer is {r.get('answer')}.")["input_ids"]
        for r in rows
    ]
    print(f"\n(e) the top-p nucleus on {'SmolLM2 (RL)' if smollm else 'the testbed RL model'}'s own distributions")
    for dtype in (torch.float32, torch.bfloat16):
        model = loaded.model.to(dtype)
        with torch.inference_mode():
            logits = torch.cat([model(input_ids=torch.tensor([ids], device=args.device)).logits[0] for ids in texts])
        print(
            f"  {str(dtype).split('.')[-1]} logits: {logits.shape[0]} positions of 48 prompts and answers, vocabulary "
            f"{logits.shape[1]}; ms per 128 rows; counter-1: rows whose nucleus counter-1's tie rule found otherwise"
        )
        nucleus_table(logits.float(), args.device)
    loaded.model.to(torch.float32)


def nucleus_table(logits: Any, device: str) -> None:
    import torch

    from probes.responders.counter_sampler import _sorted_nucleus, nucleus

    for temperature in (1.0, 0.7):
        for top_p in (0.9, 0.95, 0.99):
            probs = torch.softmax(logits / temperature, dim=-1)
            found, seconds = {}, {}
            for name, how in (("sort", _sorted_nucleus), ("candidates", nucleus), ("counter-1", counter1_nucleus)):
                start = time.perf_counter()
                found[name] = torch.cat([how(probs[s : s + 128], top_p) for s in range(0, len(probs), 128)])
                _sync(device)
                seconds[name] = (time.perf_counter() - start) / (len(probs) / 128) * 1e3
            wide = int((found["sort"].sum(-1) >= 256).sum())
            differ = int((found["sort"] != found["candidates"]).any(-1).sum())
            older = int((found["counter-1"] != found["candidates"]).any(-1).sum())
            print(
                f"    T = {temperature}, top-p {top_p}: sort {seconds['sort']:7.1f}   candidates {seconds['candidates']:6.1f}   "
                f"{seconds['sort'] / seconds['candidates']:5.1f}x   past 256: {wide:>4} rows   sets differ: {differ} rows"
                f"   counter-1: {older} rows"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=64, help="rows drawn at once in (a)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--smollm-n", type=int, default=8, help="samples a prompt on SmolLM2 in (d)")
    parser.add_argument("--sections", default="abcde", help="which tables: (a)-(c) go together")
    args = parser.parse_args()
    import torch

    where = (
        torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"CPU ({torch.get_num_threads()} threads)"
    )
    print(f"on {where}; torch {torch.__version__}\n")
    if set("abcd") & set(args.sections):
        with tempfile.TemporaryDirectory() as tmp:
            models = {"testbed RL": TESTBED / "rl", "gpt2-small (random)": gpt2_small(Path(tmp) / "gpt2-small")}
            if set("abc") & set(args.sections):
                sampler_rows(args, models)
            if "d" in args.sections:
                prefill_rows(args, models)
    if "e" in args.sections:
        nucleus_rows(args)


if __name__ == "__main__":
    main()
