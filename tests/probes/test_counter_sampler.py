"""The counter-based sampler (SPEC §10, issue 55): each row's noise a pure function of (its key, the
step, the token id), computed for all rows at once.

- the hash against a deliberately naive pure-Python version of it;
- a row's answer identical alone, in any batch, at any batch size and order (tiny real models);
- the draws' token frequencies match the softmax they sample from (chi-square on a small
  vocabulary), and the same test, at the same size, fails when a bias is planted;
- the response store refuses to mix sampler versions (and a store from before they were recorded).
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import torch
from scipy import stats

from probes.errors import MismatchError
from probes.responders import counter_sampler
from probes.responders.base import GenerationParams, sample_seed
from probes.responders.counter_sampler import LEGACY_SAMPLER, SAMPLER_VERSION, draw_tokens, uniforms
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore

PROMPTS = ["What is 2 + 3?", "A train travels 60 km in 1.5 hours. What is its speed?", "Hi", "Solve $3x - 4 = -10$."]


def _naive_mix(x: int) -> int:
    for _ in range(2):
        x = (((x >> 16) ^ x) * 0x45D9F3B) % 2**32
    return (x >> 16) ^ x


def _naive_uniform(key: int, step: int, token: int) -> float:
    """The sampler's uniform for one (key, step, token), by Python integers one at a time."""
    step_word = _naive_mix((step * 0x9E3779B1 + 0x7F4A7C15) % 2**32)
    row = _naive_mix(_naive_mix((key % 2**32) ^ step_word) ^ (key >> 32))
    word = _naive_mix(row ^ _naive_mix((token * 0x85EBCA77) % 2**32))
    return ((word >> 9) + 0.5) / 2**23


def test_uniforms_equal_a_naive_python_hash():
    keys = [0, 1, 2**62 + 12345, sample_seed(0, "What is 2 + 3?", 7), 2**63 - 1]
    for step in (0, 1, 17, 1023):
        batched = uniforms(torch.tensor(keys, dtype=torch.int64), step, 300).numpy()
        for i, key in enumerate(keys):
            for token in (0, 1, 2, 150, 299):
                assert batched[i, token] == _naive_uniform(key, step, token)  # exact: float32 holds every value
    assert 0 < batched.min() and batched.max() < 1


def test_no_uniform_reaches_0_or_1_and_the_noise_stays_finite():
    """Review of issue 55: with 24 bits, h + 1/2 rounded to an even float32 above 2^23 and the
    largest h gave u = 1: an infinite Gumbel noise that took its token whatever the logits (about
    V / 2^24 of all draws). Every 23-bit value maps inside (0, 1), the extremes included."""
    import torch

    from probes.responders.counter_sampler import gumbel_noise

    extremes = torch.tensor([0, 2**23 - 1], dtype=torch.int64)
    u = (extremes.to(torch.float32) + 0.5) * 2.0**-23
    assert u[0] > 0 and u[1] < 1 and float(u[1]) == 1 - 2**-24
    keys = torch.arange(64, dtype=torch.int64) * 1_000_003
    for step in range(4):
        noise = gumbel_noise(keys, step, 2**18)  # 16.8 M draws: the old mapping hit u = 1 about once per 2^24
        assert torch.isfinite(noise).all()
    # a token with all the mass is always drawn, at any temperature and nucleus, in a large vocabulary
    logits = torch.full((64, 152064), -60.0)
    logits[:, 7] = 60.0
    for temperature, top_p in ((0.7, 0.9), (1.0, 1.0)):
        assert (draw_tokens(logits, keys, 3, temperature, top_p) == 7).all()


def test_a_rows_noise_depends_on_its_key_step_and_token_only():
    keys = torch.tensor([sample_seed(0, p, j) for p in PROMPTS for j in range(3)], dtype=torch.int64)
    together = uniforms(keys, 5, 1000)
    for i in range(len(keys)):
        assert torch.equal(uniforms(keys[i : i + 1], 5, 1000)[0], together[i])  # alone
    order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(0))
    assert torch.equal(uniforms(keys[order], 5, 1000), together[order])  # another order
    assert not torch.equal(uniforms(keys, 6, 1000), together)  # another step: other noise
    assert torch.equal(uniforms(keys, 5, 1200)[:, :1000], together)  # a wider vocabulary adds tokens


def _chi_square_p(draws: np.ndarray, probs: np.ndarray) -> float:
    """The chi-square goodness-of-fit p-value of the draws' counts over the tokens of positive mass."""
    kept = probs > 0
    counts = np.bincount(draws, minlength=len(probs))[kept]
    mass = probs[kept].astype(np.float64)
    expected = mass / mass.sum() * counts.sum()
    return float(stats.chisquare(counts, expected).pvalue)


LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0, 1.5])


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8)])
def test_token_frequencies_match_the_softmax_sampled_from(temperature, top_p):
    """40,000 rows (distinct keys), each drawing at steps 0 and 3: the counts of each token against
    softmax(logits / T) over the nucleus — and the same test fails when u is planted biased."""
    n = 40_000
    keys = torch.tensor([sample_seed(11, "q", j) for j in range(n)], dtype=torch.int64)
    logits = LOGITS.expand(n, -1).contiguous()
    probs = torch.softmax(counter_sampler.filtered_logits(LOGITS[None], temperature, top_p), -1)[0].numpy()
    kept = probs > 0
    if top_p < 1:
        assert 0 < (~kept).sum() < len(kept)  # the nucleus drops some tokens here
    for step in (0, 3):
        draws = draw_tokens(logits, keys, step, temperature, top_p).numpy()
        assert not np.isin(draws, np.flatnonzero(~kept)).any()
        assert _chi_square_p(draws, probs) > 1e-3


def _naive_nucleus(row: list[float], top_p: float) -> set[int]:
    """The nucleus by hand: tokens most probable first, in while the mass before them is under top_p."""
    order = sorted(range(len(row)), key=lambda v: -row[v])
    kept, mass = set(), 0.0
    for v in order:
        if mass >= top_p:
            break
        kept.add(v)
        mass += row[v]
    return kept


@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.99])
def test_the_nucleus_found_among_candidates_is_the_full_sorts(monkeypatch, top_p):
    """Rows whose nucleus ends among the candidates and rows that need the full sort (candidates cut
    to 8 here, a 600-token vocabulary, peaked to flat rows): the same set as a naive loop's."""
    monkeypatch.setattr(counter_sampler, "NUCLEUS_CANDIDATES", 8)
    generator = torch.Generator().manual_seed(3)
    scales = torch.tensor([0.1, 1.0, 3.0, 8.0]).repeat_interleave(10)[:, None]
    probs = torch.softmax(torch.randn(40, 600, generator=generator, dtype=torch.float64) * scales, -1)
    keep = counter_sampler.nucleus(probs, top_p)
    sizes = keep.sum(-1)
    assert (sizes <= 8).any() and (sizes > 8).any()  # both paths taken
    for row, kept in zip(probs.tolist(), keep):
        assert set(torch.nonzero(kept)[:, 0].tolist()) == _naive_nucleus(row, top_p)


@pytest.mark.parametrize("top_p", [0.3, 0.6, 0.9])
def test_the_nucleus_keeps_the_lower_ids_of_equally_probable_tokens(monkeypatch, top_p):
    """Logits on a coarse grid (as half-precision logits are), so many tokens tie, also across the
    8th candidate: the set is a stable sort's (equal ones, lower id first), on every path."""
    monkeypatch.setattr(counter_sampler, "NUCLEUS_CANDIDATES", 8)
    generator = torch.Generator().manual_seed(5)
    logits = (torch.randn(60, 300, generator=generator, dtype=torch.float64) * 2).round()
    logits = logits[:, torch.randperm(300, generator=generator)]  # ties at ids in no order
    probs = torch.softmax(logits, -1)
    keep = counter_sampler.nucleus(probs, top_p)
    for row, kept in zip(probs.tolist(), keep):
        assert set(torch.nonzero(kept)[:, 0].tolist()) == _naive_nucleus(row, top_p)
    top = probs.topk(8, -1).values
    assert ((top[:, :, None] == top[:, None, :]).sum((1, 2)) > 8).all()  # ties among the candidates


def test_the_frequency_check_fails_on_a_planted_bias(monkeypatch):
    """At the size the check runs at, a mild bias on one token's uniforms (u → u^1.1: its Gumbel
    noise 0.095 lower, its probability 0.405 → 0.38) makes it fail."""
    n = 40_000
    keys = torch.tensor([sample_seed(11, "q", j) for j in range(n)], dtype=torch.int64)
    logits = LOGITS.expand(n, -1).contiguous()
    probs = torch.softmax(LOGITS, -1).numpy()
    real = uniforms
    bias = torch.ones(len(LOGITS))
    bias[0] = 1.1
    monkeypatch.setattr(counter_sampler, "uniforms", lambda *a: real(*a).pow(bias))
    draws = draw_tokens(logits, keys, 0, 1.0).numpy()
    assert _chi_square_p(draws, probs) < 1e-6


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def raw_model(request, loaded_models):
    return loaded_models[request.param]


def _answers(responder: LocalResponder, prompts: list[str], params: GenerationParams) -> dict:
    rows = responder.generate(prompts, params)
    return {p: [(g.token_ids, g.finish_reason) for g in gens] for p, gens in zip(prompts, rows)}


@pytest.mark.parametrize("params", [GenerationParams(24, 1.0, 1.0, 4, 3), GenerationParams(24, 0.8, 0.9, 3, 0)])
def test_a_sampled_row_is_the_same_alone_in_any_batch_size_and_order(raw_model, params):
    fmt = PromptFormat(mode="raw", template="Q: {prompt}\nA:")
    reference = _answers(LocalResponder(raw_model, fmt, batch_size=1), [PROMPTS[0]], params)
    for batch_size in (1, 3, 16):
        responder = LocalResponder(raw_model, fmt, batch_size=batch_size)
        for prompts in (PROMPTS, PROMPTS[::-1], [PROMPTS[2], PROMPTS[0]]):
            got = _answers(responder, prompts, params)
            assert got[PROMPTS[0]] == reference[PROMPTS[0]], (batch_size, prompts)
            if batch_size == 1 and prompts is PROMPTS:
                first = got
            else:
                assert all(got[p] == first[p] for p in prompts)
    assert len({tuple(ids) for ids, _ in first[PROMPTS[1]]}) > 1  # the samples differ from each other


def test_a_larger_budget_continues_the_same_draws(raw_model):
    """The key holds no budget: a row with 24 tokens continues the one with 8, token for token."""
    responder = LocalResponder(raw_model, PromptFormat(mode="raw"), batch_size=4)
    short = responder.generate(PROMPTS, GenerationParams(8, 1.0, 1.0, 2, 5))
    long = responder.generate(PROMPTS, GenerationParams(24, 1.0, 1.0, 2, 5))
    for s_row, l_row in zip(short, long):
        for s, g in zip(s_row, l_row):
            assert g.token_ids[: len(s.token_ids)] == s.token_ids


SAMPLED = GenerationParams(max_new_tokens=6, temperature=1.0, n=2)


def test_the_store_records_the_sampler_and_refuses_another(loaded_models, tmp_path, monkeypatch):
    path = tmp_path / "responses.sqlite"
    local = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw"))
    CachedResponder(local, ResponseStore(path)).generate(PROMPTS[:2], SAMPLED)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE name = 'sampler/local'").fetchone() == (SAMPLER_VERSION,)
    monkeypatch.setattr(LocalResponder, "sampler_version", "counter-3")
    later = CachedResponder(LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw")), ResponseStore(path))
    with pytest.raises(MismatchError, match=f"sampled by the {SAMPLER_VERSION} sampler .* samples with counter-3"):
        later.generate(PROMPTS[:2], SAMPLED)
    later.generate(PROMPTS[:2], GenerationParams(max_new_tokens=6))  # greedy answers: no sampler, served


def test_a_store_of_counter_1_answers_is_refused_since_the_tie_rule(loaded_models, tmp_path):
    """The nucleus's tie rule changed what the sampler draws (in bfloat16 logits at 14 % of
    SmolLM2's positions: bench_sampler.py (e)), so it is a new version: a store whose answers
    counter-1 drew is refused for sampling, not mixed with the new rule's."""
    store = ResponseStore(tmp_path / "responses.sqlite")
    store.claim_sampler("local", "counter-1")
    cached = CachedResponder(LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw")), store)
    with pytest.raises(MismatchError, match="sampled by the counter-1 sampler and this toolkit samples with counter-2"):
        cached.generate(PROMPTS[:1], SAMPLED)


def test_a_store_from_before_sampler_versions_is_refused_for_sampling(loaded_models, tmp_path):
    """A store written before versions were recorded (no meta table, answers in it) holds the per-row
    generator sampler's answers: sampling into it is refused with one line; greedy still runs."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
        db.execute("INSERT INTO responses VALUES ('k', 'generate', '{}')")
    cached = CachedResponder(LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw")), ResponseStore(path))
    with pytest.raises(MismatchError, match=LEGACY_SAMPLER) as refused:
        cached.generate(PROMPTS[:1], SAMPLED)
    assert "\n" not in str(refused.value) and "move the store aside" in str(refused.value)
    cached.generate(PROMPTS[:1], GenerationParams(max_new_tokens=4))
    fresh = CachedResponder(
        LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw")), ResponseStore(tmp_path / "new.sqlite")
    )
    fresh.generate(PROMPTS[:1], GenerationParams(max_new_tokens=4))  # a new store with greedy answers only
    fresh.generate(PROMPTS[:1], SAMPLED)  # is not mistaken for an old one


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_static_decoding_answers_as_dynamic_decoding(loaded_models, arch):
    """The static loop (a pre-allocated cache of bucketed shape, finished rows kept in the batch,
    filler rows up to a power of two) gives every row the dynamic loop's tokens and, within 1e-5,
    its log-probs and entropies — greedy and sampled, rows of uneven lengths, one stopping early."""
    from probes.responders.decoding import static_shape

    prompts = [*PROMPTS, " ".join(["q"] * 40)]  # the last prompt leaves room for fewer tokens
    dynamic = LocalResponder(loaded_models[arch], PromptFormat(mode="raw"), batch_size=3, decoding="dynamic")
    static = LocalResponder(loaded_models[arch], PromptFormat(mode="raw"), batch_size=3, decoding="static")
    assert static.static_decoding and not dynamic.static_decoding
    for params in (GenerationParams(20), GenerationParams(20, 1.0, 0.9, 2, 7)):
        a, b = dynamic.generate(prompts, params), static.generate(prompts, params)
        lengths = set()
        for row_a, row_b in zip(a, b):
            for x, y in zip(row_a, row_b):
                assert x.token_ids == y.token_ids and x.finish_reason == y.finish_reason
                np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-5)
                np.testing.assert_allclose(x.entropies, y.entropies, atol=1e-5)
                lengths.add(len(x.token_ids))
        assert len(lengths) > 1
    assert (
        static_shape(3, 10, 20) == (4, 128)
        and static_shape(4, 120, 9) == (4, 256)
        and static_shape(1, 5, 5) == (1, 128)
    )
    with pytest.raises(Exception, match="decoding 'fast'"):
        LocalResponder(loaded_models[arch], PromptFormat(mode="raw"), decoding="fast")


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_each_distinct_prompt_is_prefilled_once_and_its_rows_answer_as_with_a_prefill_each(
    loaded_models, arch, monkeypatch
):
    """n samples of a prompt share one prefill (its KV cache copied to the rows): the model's first
    call holds each distinct prompt once, and every row's tokens, log-probs and entropies are those
    of a prefill per row (within 1e-5), greedy and sampled, prompts of uneven lengths."""
    from probes.responders import decoding

    loaded = loaded_models[arch]
    prompts = [*PROMPTS, " ".join(["q"] * 12)]
    responder = LocalResponder(loaded, PromptFormat(mode="raw"), batch_size=8)
    responder.generate(prompts[:1], GenerationParams(2))  # the cached-decoding check runs before counting
    prefill_rows: list[int] = []

    def count(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids.shape[1] > 1:  # a prefill (decoding steps feed one token a row)
            prefill_rows.append(ids.shape[0])

    hook = loaded.model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        for params in (GenerationParams(12), GenerationParams(12, 1.0, 0.9, 4, 7)):
            prefill_rows.clear()
            shared = responder.generate(prompts, params)
            # n rows a prompt, in batches of 8 rows that n divides: each prompt prefilled once
            assert sum(prefill_rows) == len(prompts)
            with monkeypatch.context() as patched:
                patched.setattr(
                    decoding, "distinct_prompts", lambda ids: ([list(x) for x in ids], list(range(len(ids))))
                )
                prefill_rows.clear()
                each = responder.generate(prompts, params)
                assert sum(prefill_rows) == len(prompts) * params.n
            for row_a, row_b in zip(shared, each):
                for x, y in zip(row_a, row_b):
                    assert x.token_ids == y.token_ids and x.finish_reason == y.finish_reason
                    np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-5)
                    np.testing.assert_allclose(x.entropies, y.entropies, atol=1e-5)
            assert params.n == 1 or len({tuple(g.token_ids) for g in shared[0]}) > 1
    finally:
        hook.remove()
