"""The local responder on tiny real models: batched generation equals one-at-a-time, the
recorded log-probs and entropies equal full-vocabulary teacher-forced values, sampling is seeded
per completion, and the response store makes a re-run generate nothing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from probes.responders.base import GenerationParams
from probes.responders.checks import EngineOutputError
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore

PROMPTS = [
    "What is 2 + 3?",
    "A train travels 60 km in 1.5 hours. What is its average speed in km per hour?",
    "Hi",
    "Solve for $x$: $3x - 4 = -10$.",
]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def responder(request, loaded_models):
    return LocalResponder(loaded_models[request.param], PromptFormat(mode="raw", template="Q: {prompt}\nA:"))


def test_batched_greedy_equals_one_at_a_time(responder):
    params = GenerationParams(max_new_tokens=16)
    together = responder.generate(PROMPTS, params)
    for prompt, gens in zip(PROMPTS, together):
        alone = responder.generate([prompt], params)[0][0]
        assert gens[0].token_ids == alone.token_ids
        np.testing.assert_allclose(gens[0].logprobs, alone.logprobs, atol=1e-5)
        np.testing.assert_allclose(gens[0].entropies, alone.entropies, atol=1e-5)


def test_recorded_logprobs_and_entropies_are_full_vocabulary_values(responder):
    gens = responder.generate(PROMPTS, GenerationParams(max_new_tokens=12))
    model = responder.model
    for prompt, (gen,) in zip(PROMPTS, gens):
        prompt_ids = responder.encode_prompt(prompt)
        ids = torch.tensor([prompt_ids + gen.token_ids])
        with torch.inference_mode():
            logits = model(input_ids=ids).logits[0].double()
        steps = logits[len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(gen.token_ids)]
        logp = torch.log_softmax(steps, dim=-1)
        expected_lp = logp[torch.arange(len(gen.token_ids)), torch.tensor(gen.token_ids)].numpy()
        expected_h = (-(logp.exp() * logp).sum(-1)).numpy()
        np.testing.assert_allclose(gen.logprobs, expected_lp, atol=1e-5)
        np.testing.assert_allclose(gen.entropies, expected_h, atol=1e-5)
        mu = (logp.exp() * logp).sum(-1)
        np.testing.assert_allclose(gen.mu, mu.numpy(), atol=1e-5)
        np.testing.assert_allclose(gen.sigma, ((logp.exp() * logp**2).sum(-1) - mu**2).sqrt().numpy(), atol=1e-4)
        assert gen.entropy_kind == "exact" and len(gen.entropies) == len(gen.token_ids)
        assert gen.token_ids[:3] == [int(x) for x in logits[len(prompt_ids) - 1 :].argmax(-1)[:3]]  # greedy


def test_sampling_is_seeded_per_completion(responder):
    params = GenerationParams(max_new_tokens=10, temperature=0.8, top_p=0.95, n=4, seed=3)
    batch = responder.generate(PROMPTS, params)
    alone = responder.generate(PROMPTS[1:2], params)[0]
    assert [g.token_ids for g in batch[1]] == [g.token_ids for g in alone]
    assert len({tuple(g.token_ids) for g in batch[1]}) > 1  # the 4 samples differ
    other = responder.generate(
        PROMPTS[1:2], GenerationParams(max_new_tokens=10, temperature=0.8, top_p=0.95, n=4, seed=4)
    )[0]
    assert [g.token_ids for g in other] != [g.token_ids for g in alone]
    tiny_nucleus = responder.generate(PROMPTS[:2], GenerationParams(max_new_tokens=8, temperature=1.0, top_p=1e-6, n=2))
    greedy = responder.generate(PROMPTS[:2], GenerationParams(max_new_tokens=8))
    for samples, (g,) in zip(tiny_nucleus, greedy):
        assert all(s.token_ids == g.token_ids for s in samples)  # a nucleus of one token is greedy


def test_score_gives_logprobs_and_vocabulary_moments(responder):
    text = " The answer is 5."
    (scored,) = responder.score(["Q: What is 2 + 3?\nA:"], [text])
    context_ids = responder.tokenizer("Q: What is 2 + 3?\nA:", add_special_tokens=True)["input_ids"]
    text_ids = responder.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert scored.token_ids == text_ids
    with torch.inference_mode():
        logits = responder.model(input_ids=torch.tensor([context_ids + text_ids])).logits[0].double()
    logp = torch.log_softmax(logits[len(context_ids) - 1 : -1], dim=-1)
    p = logp.exp()
    mu = (p * logp).sum(-1)
    sigma = ((p * logp**2).sum(-1) - mu**2).sqrt()
    np.testing.assert_allclose(
        scored.logprobs, logp[torch.arange(len(text_ids)), torch.tensor(text_ids)].numpy(), atol=1e-5
    )
    np.testing.assert_allclose(scored.mu, mu.numpy(), atol=1e-5)
    np.testing.assert_allclose(scored.sigma, sigma.numpy(), atol=1e-4)
    alone = responder.score([""], [text])[0]
    read = responder.tokenizer(text)[
        "input_ids"
    ]  # as generation reads raw text: after BOS where the tokenizer adds one
    start = len(read) - len(text_ids)
    # no context: the first token is predicted only after a BOS (Llama toy), not from nothing (GPT-2 toy)
    assert alone.token_ids == text_ids[1 - start :] and start == (responder.tokenizer.bos_token_id in read)
    np.testing.assert_allclose(alone.logprobs, _teacher_forced(responder.model, read, max(start, 1)), atol=1e-5)


def test_prompt_formats(loaded_models):
    chat = LocalResponder(loaded_models["qwen2"], PromptFormat(mode="auto", system="Be brief."))
    formatted = chat.format("What is 2 + 3?")
    assert formatted.startswith("<|im_start|>system\nBe brief.<|im_end|>") and formatted.endswith(
        "<|im_start|>assistant\n"
    )
    raw = LocalResponder(loaded_models["qwen2"], PromptFormat(mode="raw", template="Question: {prompt}\nAnswer:"))
    assert raw.format("What is 2 + 3?") == "Question: What is 2 + 3?\nAnswer:"
    with pytest.raises(ValueError, match="must contain"):
        PromptFormat(mode="raw", template="no placeholder")


def test_store_makes_reruns_free(loaded_models, tmp_path):
    base = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw"))
    cached = CachedResponder(base, ResponseStore(tmp_path / "responses.sqlite"))
    params = GenerationParams(max_new_tokens=8, temperature=0.7, n=3, seed=1)
    first = cached.generate(PROMPTS, params)
    assert cached.counter.generated == 12 and cached.counter.cache_hits == 0
    greedy = cached.generate(PROMPTS, GenerationParams(max_new_tokens=8))
    assert cached.counter.generated == 16
    # a new process: a new responder object on the same store file
    again = CachedResponder(
        LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw")), ResponseStore(tmp_path / "responses.sqlite")
    )
    second = again.generate(PROMPTS, params)
    assert again.counter.generated == 0 and again.counter.cache_hits == 12
    assert [[g.token_ids for g in row] for row in second] == [[g.token_ids for g in row] for row in first]
    np.testing.assert_array_equal(second[0][0].entropies, first[0][0].entropies)
    more = again.generate(PROMPTS, GenerationParams(max_new_tokens=8, temperature=0.7, n=5, seed=1))
    assert again.counter.generated == 8  # only samples 3 and 4 of each prompt are new
    assert [g.token_ids for g in more[2][:3]] == [g.token_ids for g in first[2]]
    again.generate(PROMPTS, GenerationParams(max_new_tokens=8))
    assert again.counter.generated == 8  # the greedy answers were stored too
    scored = again.score([""] * 2, ["one text", "another text"])
    again.score([""] * 2, ["one text", "another text"])
    assert again.counter.scored == 2 and math.isfinite(scored[0].logprobs.sum())
    assert greedy[0][0].token_ids == again.generate(PROMPTS[:1], GenerationParams(max_new_tokens=8))[0][0].token_ids


@pytest.mark.parametrize("kind", ["generate", "complete"])
def test_a_larger_n_runs_only_the_new_samples_and_they_equal_a_fresh_runs(loaded_models, tmp_path, kind):
    """A store holding samples 0..2 of each prompt asked for 5: the model runs samples 3 and 4 only
    (8 rows, not 20), and every sample equals the one an empty store draws."""
    params = GenerationParams(max_new_tokens=8, temperature=1.0, n=5, seed=2)

    def responder(path):
        return CachedResponder(LocalResponder(loaded_models["llama"], PromptFormat(mode="raw")), ResponseStore(path))

    cached = responder(tmp_path / "grown.sqlite")
    getattr(cached, kind)(PROMPTS, GenerationParams(max_new_tokens=8, temperature=1.0, n=3, seed=2))
    assert cached.responder.counter.generated == 12
    grown = getattr(cached, kind)(PROMPTS, params)
    assert cached.responder.counter.generated == 12 + 8 and cached.counter.cache_hits == 12
    fresh = getattr(responder(tmp_path / "fresh.sqlite"), kind)(PROMPTS, params)
    assert [[g.token_ids for g in row] for row in grown] == [[g.token_ids for g in row] for row in fresh]
    for row_a, row_b in zip(grown, fresh):
        for a, b in zip(row_a, row_b):
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    assert len({tuple(g.token_ids) for g in fresh[1]}) > 1


def _teacher_forced(model, ids: list[int], start: int) -> np.ndarray:
    """log p(ids[t] | ids[:t]) for t = start … len(ids) − 1, by one plain forward pass."""
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    return np.array([float(logp[t - 1, ids[t]]) for t in range(start, len(ids))])


@pytest.mark.parametrize("mode", ["chat", "raw"])
def test_a_question_is_scored_exactly_as_the_model_reads_it_when_it_generates(loaded_models, mode):
    """The Llama toy's tokenizer adds BOS and its chat template writes BOS itself: scoring must add
    it once (not twice in chat mode, and also in raw mode with an empty context)."""
    responder = LocalResponder(loaded_models["llama"], PromptFormat(mode=mode))
    tokenizer = responder.tokenizer
    for question in PROMPTS:
        prompt_ids = responder.encode_prompt(question)  # what generation feeds the model
        assert prompt_ids.count(tokenizer.bos_token_id) == 1
        question_ids = tokenizer(question, add_special_tokens=False)["input_ids"]
        start = next(i for i in range(len(prompt_ids)) if prompt_ids[i : i + len(question_ids)] == question_ids)
        (scored,) = responder.score([responder.question_context()], [question])
        assert scored.token_ids == question_ids  # every token has a prediction (after BOS at least)
        np.testing.assert_allclose(
            scored.logprobs, _teacher_forced(responder.model, prompt_ids[: start + len(question_ids)], start), atol=1e-5
        )


def _open_store_and_put(path: str, start: Any, i: int) -> None:
    start.wait()
    from probes.responders.store import ResponseStore

    store = ResponseStore(path)
    store.put_many("score", {f"k{i}": {"v": i}})
    store.close()


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path):
    """The ranks of a torchrun job open the same new store together: none may fail on the lock that
    switching the file to WAL mode takes (this failed about one time in eight before)."""
    import multiprocessing as mp

    from probes.responders.store import ResponseStore

    ctx = mp.get_context("fork")  # fast: the children only open SQLite files
    for attempt in range(60):
        path = str(tmp_path / f"store{attempt}.sqlite")
        start = ctx.Barrier(2)
        procs = [ctx.Process(target=_open_store_and_put, args=(path, start, i)) for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0], f"attempt {attempt}"
        assert len(ResponseStore(path)) == 2


def test_only_a_class_that_defines_both_draws_by_index(loaded_models):
    """The store draws only the missing indices through ``generate_some`` where the class defining
    ``generate`` defines it too: a subclass that overrides ``generate`` alone is run through it."""
    from probes.responders.store import indexed_method

    class Wrapping(LocalResponder):
        def generate(self, prompts, params):
            return super().generate(prompts, params)

    class Both(Wrapping):
        def generate_some(self, prompts, params, wanted):
            return super().generate_some(prompts, params, wanted)

        def generate(self, prompts, params):
            return super().generate(prompts, params)

    fmt = PromptFormat(mode="raw")
    local = LocalResponder(loaded_models["gpt2"], fmt)
    assert indexed_method(local, "generate") == local.generate_some
    assert indexed_method(local, "complete") == local.complete_some
    assert indexed_method(Wrapping(loaded_models["gpt2"], fmt), "generate") is None
    assert indexed_method(Wrapping(loaded_models["gpt2"], fmt), "complete") is not None  # complete not overridden
    assert indexed_method(Both(loaded_models["gpt2"], fmt), "generate") is not None
    assert indexed_method(object(), "generate") is None


@pytest.mark.parametrize("drop", ["a completion", "a prompt"])
@pytest.mark.parametrize("path", ["generate_some", "generate"])
def test_an_engine_sending_fewer_answers_than_asked_is_refused_before_anything_is_stored(
    loaded_models, tmp_path, drop, path
):
    """One completion short for each prompt, or the middle prompt's answers left out, through the
    indexed path and the whole-prompt one: refused by name, nothing stored."""

    def short(answers):
        return [row[:-1] for row in answers] if drop == "a completion" else answers[:1] + answers[2:]

    class Short(LocalResponder):
        def generate(self, prompts, params):
            answers = super().generate(prompts, params)
            return short(answers) if path == "generate" else answers

        if path == "generate_some":

            def generate_some(self, prompts, params, wanted):
                return short(super().generate_some(prompts, params, wanted))

    store = ResponseStore(tmp_path / "short.sqlite")
    cached = CachedResponder(Short(loaded_models["gpt2"], PromptFormat(mode="raw")), store)
    with pytest.raises(EngineOutputError, match="nothing of the batch is stored"):
        cached.generate(PROMPTS[:3], GenerationParams(max_new_tokens=4, temperature=1.0, n=3))
    assert len(store) == 0
