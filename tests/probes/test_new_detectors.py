"""``ref``, ``zlib`` and ``partial_completion`` against naive references: log-likelihood
differences by plain loops, zlib lengths by hand, ROUGE-L by a dynamic-programming LCS, greedy
continuations by a step-by-step decode."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch

from cache.config import ModelConfig
from cache.loading import load_model
from cache.toymodels import ToyModelSpec, ensure_toy_model
from generation.records import Question
from probes.detectors import cut_point, get_detector, rouge_l_f1, zlib_ratio
from probes.detectors.run import run_detectors
from probes.detectors.selection import detector_names
from probes.errors import ConfigError, MismatchError
from probes.responders.base import GenerationParams
from probes.responders.local import LocalResponder, PromptFormat

QUESTIONS = [
    "What is 2 + 3?",
    "A train travels 60 km in 1.5 hours. What is its average speed?",
    "Solve for $x$: $3x - 4 = -10$.",
]
TEMPLATE = "Q: {prompt}\nA:"


def responder_of(loaded) -> LocalResponder:
    return LocalResponder(loaded, PromptFormat(mode="raw", template=TEMPLATE))


@pytest.fixture(scope="module")
def other_gpt2(other_gpt2_dir):
    return load_model(ModelConfig(source=str(other_gpt2_dir), device="cpu"))


def naive_logprobs(model, ids: list[int], start: int) -> list[float]:
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    out = []
    for t in range(start, len(ids)):
        row = logits[t - 1]
        out.append(float(row[ids[t]] - torch.logsumexp(row, dim=0)))
    return out


def lcs_length(a: list, b: list) -> int:
    """Longest common subsequence by the textbook dynamic programme."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def naive_rouge_l(candidate: list, reference: list) -> float:
    lcs = lcs_length(candidate, reference)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(candidate), lcs / len(reference)
    return 2 * p * r / (p + r)


# ---------------------------------------------------------------- zlib


def test_zlib_ratio_by_hand():
    # zlib's stream: a 2-byte header, the deflate block, a 4-byte Adler-32; an empty text is 8 bytes
    # (header, one empty fixed-Huffman block of 2 bytes, checksum), one letter 9
    assert len(zlib.compress(b"")) == 8 and len(zlib.compress(b"a")) == 9
    assert zlib_ratio([-1.0, -3.0], "a") == pytest.approx(2.0 / 9)
    assert math.isnan(zlib_ratio([], "a"))
    repetitive, varied = "ab" * 50, "the quick brown fox jumps over the lazy dog and keeps going north"
    assert zlib_ratio([-1.0], repetitive) > zlib_ratio([-1.0], varied)  # fewer compressed bytes, larger ratio


def test_zlib_detector_on_the_greedy_response_and_on_the_question(loaded_models):
    responder = responder_of(loaded_models["gpt2"])
    result = get_detector("zlib", max_new_tokens=8).score(QUESTIONS, responder)
    answers = responder.generate(QUESTIONS, GenerationParams(max_new_tokens=8))
    for question, (answer,), raw in zip(QUESTIONS, answers, result.raw):
        prompt = responder.encode_prompt(question)
        nll = -np.mean(naive_logprobs(responder.model, prompt + answer.token_ids, len(prompt)))
        assert raw == pytest.approx(nll / len(zlib.compress(answer.text.encode("utf-8"))), rel=1e-5)
    np.testing.assert_array_equal(result.scores, -result.raw)  # lower = member
    on_question = get_detector("zlib", target="question").score(QUESTIONS, responder)
    for question, raw in zip(QUESTIONS, on_question.raw):
        enc = responder.tokenizer("Q: " + question, return_offsets_mapping=True)
        first = next(i for i, (_, end) in enumerate(enc["offset_mapping"]) if end > 3)
        nll = -np.mean(naive_logprobs(responder.model, enc["input_ids"], first))
        assert raw == pytest.approx(nll / len(zlib.compress(question.encode("utf-8"))), rel=1e-5)


# ---------------------------------------------------------------- ref


def test_ref_is_the_log_likelihood_difference_of_the_same_tokens(loaded_models, other_gpt2):
    audited, reference = responder_of(loaded_models["gpt2"]), responder_of(other_gpt2)
    detector = get_detector("ref", max_new_tokens=8).fit(reference=reference)
    result = detector.score(QUESTIONS, audited)
    answers = audited.generate(QUESTIONS, GenerationParams(max_new_tokens=8))
    for question, (answer,), raw in zip(QUESTIONS, answers, result.raw):
        prompt = audited.encode_prompt(question)
        ids = audited.tokenizer(audited.format(question) + answer.text)["input_ids"]
        assert ids[: len(prompt)] == prompt
        ours = naive_logprobs(audited.model, ids, len(prompt))
        theirs = naive_logprobs(reference.model, ids, len(prompt))
        assert raw == pytest.approx(sum(ours) / len(ours) - sum(theirs) / len(theirs), rel=1e-5, abs=1e-6)
    assert result.n_responses.sum() == 3
    question_target = get_detector("ref", target="question").fit(reference=reference).score(QUESTIONS, audited)
    assert np.isfinite(question_target.raw).all() and not np.array_equal(question_target.raw, result.raw)


def test_ref_of_a_model_against_itself_is_exactly_zero(loaded_models):
    responder = responder_of(loaded_models["gpt2"])
    result = (
        get_detector("ref", max_new_tokens=8)
        .fit(reference=responder_of(loaded_models["gpt2"]))
        .score(QUESTIONS, responder)
    )
    assert (result.raw == 0.0).all()


def test_ref_refuses_a_missing_reference_or_another_tokenizer(loaded_models, tmp_path):
    responder = responder_of(loaded_models["gpt2"])
    with pytest.raises(ConfigError, match="needs a reference model"):
        run_detectors(["ref"], [Question("a", QUESTIONS[0])], responder)
    other = ensure_toy_model(
        ToyModelSpec(arch="gpt2", n_layers=2, d_model=32, n_heads=4, tokenizer_vocab=300, max_positions=64), tmp_path
    )
    stranger = responder_of(load_model(ModelConfig(source=str(other), device="cpu")))
    with pytest.raises(MismatchError, match="tokenizer differs") as caught:
        run_detectors(["ppl", "ref"], [Question("a", QUESTIONS[0])], responder, reference=stranger)
    assert len(str(caught.value).splitlines()) == 1
    assert responder.counter.generated == 0  # refused before any work
    assert "ref" not in detector_names("all") and "ref" in detector_names("all", reference=True)


# ---------------------------------------------------------------- partial completion


def word_spans(text: str) -> list[tuple[int, int, int]]:
    """Whitespace-led word 'tokens' (as byte-level BPE reads them): (unit, start, end)."""
    spans, start = [], 0
    for i in range(1, len(text) + 1):
        if i == len(text) or (text[i] == " " and text[i - 1] != " "):
            spans.append((len(spans), start, i))
            start = i
    return spans


def test_cut_point_by_hand():
    text = "What is the secret word of the red lantern beside the blue river?"
    spans = word_spans(text)  # 13 tokens: floor(0.6·13) = 7, the 7th ends after "of the" -> "… of the| red …"
    assert len(spans) == 13
    p = cut_point(text, spans, 0.6)
    assert text[:p] == "What is the secret word of the" and text[p:] == " red lantern beside the blue river?"
    split_word = [(0, 0, 4), (1, 4, 7), (2, 7, 10), (3, 10, 13), (4, 13, 16)]  # "What| is| th|e r|ed?"
    assert cut_point("What is the red?", split_word, 0.6) == 7  # "th" ends mid-word: back to the space before "the"
    assert cut_point("Hi", [(0, 0, 2)], 0.6) is None and cut_point("Two words", word_spans("Two words"), 0.6) == 3


def test_rouge_l_against_a_dynamic_programme():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b = list(rng.integers(0, 5, rng.integers(0, 12))), list(rng.integers(0, 5, rng.integers(1, 12)))
        assert rouge_l_f1(a, b) == pytest.approx(naive_rouge_l(a, b), abs=1e-12)
    assert rouge_l_f1([1, 2, 3], [1, 2, 3]) == 1.0 and rouge_l_f1([], [1]) == 0.0


def test_partial_completion_against_a_naive_greedy_decode(loaded_models):
    responder = responder_of(loaded_models["gpt2"])
    result = get_detector("partial_completion").score(QUESTIONS, responder)
    tok = responder.tokenizer
    for question, rouge, exact in zip(QUESTIONS, result.raw, result.extra["exact_match"]):
        enc = tok(question, add_special_tokens=False, return_offsets_mapping=True)
        spans = [(i, a, b) for i, (a, b) in zip(enc["input_ids"], enc["offset_mapping"])]
        p = cut_point(question, spans, 0.6)
        remainder = [i for i, a, _ in spans if a >= p]
        ids = tok(question[:p])["input_ids"]  # plain text, no template
        generated = []
        for _ in range(len(remainder)):  # a greedy decode, one full forward per step
            with torch.inference_mode():
                nxt = int(responder.model(input_ids=torch.tensor([ids + generated])).logits[0, -1].argmax())
            if nxt == tok.eos_token_id:
                break
            generated.append(nxt)
        assert rouge == pytest.approx(naive_rouge_l(generated, remainder), abs=1e-12)
        text = tok.decode(generated, skip_special_tokens=True)
        assert exact == float(" ".join(text.split()) == " ".join(question[p:].split()))
    assert result.n_responses.sum() == 3 and result.n_capped <= 3


def test_new_detectors_pin_their_access_needs():
    from probes.responders.base import Access

    assert (
        get_detector("ref").needs == {Access.SAMPLING, Access.TEXT_LOGPROBS} and get_detector("ref").requires_reference
    )
    assert get_detector("ref", target="question").needs == {Access.TEXT_LOGPROBS}
    assert get_detector("zlib").needs == {Access.SAMPLING, Access.CHOSEN_LOGPROBS}
    assert get_detector("zlib", target="question").needs == {Access.TEXT_LOGPROBS}
    assert get_detector("partial_completion").needs == {Access.SAMPLING, Access.TOKEN_IDS}
