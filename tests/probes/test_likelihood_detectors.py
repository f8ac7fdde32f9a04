"""ReCaLL and LogProber on tiny real models against naive computations: which tokens are scored,
with which prefix, and on which target (SPEC §5)."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch

from probes.detectors import get_detector
from probes.detectors.base import builtin_text
from probes.responders.base import Access, GenerationParams
from probes.responders.local import LocalResponder, PromptFormat

QUESTIONS = [
    "What is 2 + 3?",
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "Solve for $x$: $3x - 4 = -10$.",
]
CLEAN = ["Two cats?", "Half of 8?", "Is 7 odd?"]  # short: the toys have 64 positions


def logprobs_of(model, ids: list[int], start: int) -> list[float]:
    """log p(ids[t] | ids[:t]) for t = start … len(ids) − 1, by one plain forward pass."""
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    return [float(logp[t - 1, ids[t]]) for t in range(start, len(ids))]


def naive_mean_ll(responder: LocalResponder, before: str, text: str, first: int) -> float:
    """Mean log-prob of the tokens ``first…`` of ``text`` read after the prompt text ``before``
    (tokenized as generation does: raw text gets the tokenizer's specials)."""
    tok = responder.tokenizer
    before_ids = (
        tok(before)["input_ids"]
        if before
        else ([tok.bos_token_id] if tok("x")["input_ids"][0] == tok.bos_token_id else [])
    )
    text_ids = tok(text, add_special_tokens=False)["input_ids"]
    ids = before_ids + text_ids
    values = logprobs_of(responder.model, ids, len(before_ids) + first)
    return sum(values) / len(values)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_recall_on_the_question_scores_the_same_tokens_with_and_without_the_prefix(loaded_models, arch):
    """Raw ``{prompt}`` format: without a prefix nothing precedes the question. With no BOS (GPT-2
    toy) its first token has no prediction, so it is left out of *both* means; after a BOS (Llama
    toy) it is in both."""
    responder = LocalResponder(loaded_models[arch], PromptFormat(mode="raw"))
    detector = get_detector("recall", target="question").fit(CLEAN)
    result = detector.score(QUESTIONS, responder)
    first = 0 if arch == "llama" else 1
    prefix = "\n\n".join(CLEAN)
    for question, ratio in zip(QUESTIONS, result.raw):
        conditioned = naive_mean_ll(responder, prefix + "\n\n", question, first)
        plain = naive_mean_ll(responder, "", question, first)
        assert ratio == pytest.approx(conditioned / plain, rel=1e-5)


def test_recall_leaves_out_a_first_token_that_absorbs_what_precedes_it(loaded_models):
    """``"Q: A train"`` reads the question's first token as ``" A"``, ``"…\n\nA train"`` as ``"A"``:
    not the same token, so both means start at the second one."""
    responder = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    question = QUESTIONS[1]
    tok = responder.tokenizer
    plain_ids = tok("Q: " + question)["input_ids"]
    prefix = "\n\n".join(CLEAN)
    conditioned_ids = tok(f"Q: {prefix}\n\n{question}")["input_ids"]
    rest = tok(question[1:], add_special_tokens=False)["input_ids"]  # " train travels …" after the first token
    assert (
        plain_ids[-len(rest) - 1] != conditioned_ids[-len(rest) - 1]
        and plain_ids[-len(rest) :] == conditioned_ids[-len(rest) :]
    )
    (ratio,) = get_detector("recall", target="question").fit(CLEAN).score([question], responder).raw
    conditioned = logprobs_of(responder.model, conditioned_ids, len(conditioned_ids) - len(rest))
    plain = logprobs_of(responder.model, plain_ids, len(plain_ids) - len(rest))
    assert ratio == pytest.approx(np.mean(conditioned) / np.mean(plain), rel=1e-5)


def test_recall_defaults_to_the_greedy_response(loaded_models):
    responder = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    detector = get_detector("recall", max_new_tokens=6)
    assert detector.target == "response" and Access.SAMPLING in detector.needs
    result = detector.fit(CLEAN).score(QUESTIONS, responder)
    prefix = "\n\n".join(CLEAN)
    answers = responder.generate(QUESTIONS, GenerationParams(max_new_tokens=6))
    for question, (answer,), ratio in zip(QUESTIONS, answers, result.raw):
        conditioned = naive_mean_ll(responder, f"Q: {prefix}\n\n{question}\nA:", answer.text, 0)
        plain = naive_mean_ll(responder, f"Q: {question}\nA:", answer.text, 0)
        assert ratio == pytest.approx(conditioned / plain, rel=1e-5)
    longer = get_detector("recall", max_new_tokens=12).fit(CLEAN).score(QUESTIONS, responder)
    assert not np.array_equal(longer.raw, result.raw)  # max_new_tokens now matters


def test_recall_never_scores_a_question_with_a_prefix_that_contains_it(loaded_models):
    responder = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    detector = get_detector("recall", n_prefix=2, target="question").fit(CLEAN)
    assert detector.prefix_for(CLEAN[0]) == "\n\n".join(CLEAN[1:3])  # its own text is skipped
    assert detector.prefix_for(QUESTIONS[0]) == "\n\n".join(CLEAN[:2])
    both = detector.score([CLEAN[0], QUESTIONS[0]], responder)
    expected = naive_mean_ll(responder, f"Q: {CLEAN[1]}\n\n{CLEAN[2]}\n\n", CLEAN[0], 0) / naive_mean_ll(
        responder, "Q: ", CLEAN[0], 0
    )
    assert both.raw[0] == pytest.approx(expected, rel=1e-5)
    given = get_detector("recall", prefix=f"Some text. {QUESTIONS[0]}", target="question")
    result = given.score(QUESTIONS[:2], responder)
    assert math.isnan(result.raw[0]) and math.isfinite(result.raw[1])
    assert any("contains" in note for note in result.notes)
    unfitted = get_detector("recall")
    assert unfitted.prefix_for(QUESTIONS[0]) == builtin_text("noise_prefix.v1.txt").strip()


@pytest.mark.parametrize("template", ["{prompt}", "Q: {prompt}\nA:"])
def test_logprober_uses_every_token_that_has_a_prediction(loaded_models, template):
    responder = LocalResponder(loaded_models["gpt2"], PromptFormat(mode="raw", template=template))
    result = get_detector("logprober").score(QUESTIONS, responder)
    before = template.split("{prompt}")[0]
    for question, safe in zip(QUESTIONS, result.raw):
        enc = responder.tokenizer(before + question, return_offsets_mapping=True)
        ids = enc["input_ids"]
        in_question = [i for i, (_, end) in enumerate(enc["offset_mapping"]) if end > len(before)]
        first = max(in_question[0], 1)  # the GPT-2 toy adds no BOS: with nothing before, token 0 has no prediction
        values = sorted(logprobs_of(responder.model, ids, first), reverse=True)  # least surprising first
        curve, total = 0.0, 0.0
        for v in values:
            curve += v / len(values)
            total += curve
        assert safe == pytest.approx(math.log(-total), rel=1e-6)


LONG_PREFIX = "Two cats and a dog."  # with "Q: ", over 16 tokens on the toys (about one a character)
SHORT = ["What is 2 + 3?", "Half of 8?", "Is 7 odd?"]  # the toys have 64 positions


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_recall_encodes_its_shared_prefix_once_per_batch_and_equals_its_naive_form(loaded_models, arch):
    """Issue 55: the conditioned texts share the prefix (and the template before it): it is run once
    per batch, its KV cache copied to every row; every ratio equals the naive one-text-at-a-time
    forward passes to 1e-6."""
    from probes.responders import forward_scoring

    responder = LocalResponder(loaded_models[arch], PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    detector = get_detector("recall", max_new_tokens=5, prefix=LONG_PREFIX)
    shapes: list[tuple[int, ...]] = []
    answers = responder.generate(SHORT, GenerationParams(max_new_tokens=5))
    hook = responder.model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        result = detector.score(SHORT, responder)
    finally:
        hook.remove()
    prefix_ids = responder.tokenizer(f"Q: {LONG_PREFIX}")["input_ids"]
    shared = [s for s in shapes if s[0] == 1 and s[1] >= forward_scoring.MIN_SHARED_TOKENS]
    assert len(shared) == 1 and shared[0][1] >= len(prefix_ids) - 1  # one batch, its prefix run once
    for question, (answer,), ratio in zip(SHORT, answers, result.raw):
        conditioned = naive_mean_ll(responder, f"Q: {LONG_PREFIX}\n\n{question}\nA:", answer.text, 0)
        plain = naive_mean_ll(responder, f"Q: {question}\nA:", answer.text, 0)
        assert abs(ratio - conditioned / plain) < 1e-6


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_a_shared_prefix_scores_as_the_whole_batch_does(loaded_models, arch, monkeypatch):
    """The prefix path against the whole-sequence path on the same batch, in float64 (in float32 the
    two orders of summation differ by a few ulp, 2e-6 at a log-prob of -9, and by how much depends
    on the CPU's kernels): every log-prob, μ and σ within 1e-9, where a wrong position or mask
    moves them by 1e-2 or more; a prefix reaching into a scored text, or too short, runs the batch
    whole."""
    from probes.responders import forward_scoring

    loaded = dataclasses.replace(loaded_models[arch], model=copy.deepcopy(loaded_models[arch].model).double())
    responder = LocalResponder(loaded, PromptFormat(mode="raw", template="Q: {prompt}\nA:"))
    contexts = [responder.format(LONG_PREFIX + " " + q) for q in SHORT]
    pairs = responder.scored_pairs(contexts, [" It is 5.", " Four.", " Yes, it is"])
    model, pad, device = responder.model, responder.tokenizer.pad_token_id, responder.loaded.device
    assert forward_scoring.shared_prefix_length([c + t for c, t in pairs], 10**6) >= forward_scoring.MIN_SHARED_TOKENS
    with torch.inference_mode():
        reused = forward_scoring.score_batch(model, pad, device, pairs)
        monkeypatch.setattr(forward_scoring, "MIN_SHARED_TOKENS", 10**6)
        whole = forward_scoring.score_batch(model, pad, device, pairs)
    for a, b in zip(reused, whole):
        assert a.token_ids == b.token_ids
        for field in ("logprobs", "mu", "sigma"):
            np.testing.assert_allclose(getattr(a, field), getattr(b, field), atol=1e-9, rtol=0)
    for (context, text), b in zip(pairs, whole):  # a float64 model scores in float64, not cast to float32
        naive = logprobs_of(model, context + text, max(len(context), 1))
        np.testing.assert_allclose(b.logprobs, naive, atol=1e-12, rtol=0)
    assert forward_scoring.shared_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]], 10) == 2
    assert forward_scoring.shared_prefix_length([[1, 2, 3], [1, 2, 3]], 1) == 1  # never into a scored text
