"""Validators and answer parsing, on hand-made cases."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest

from generation import records as r
from generation.parsing import ParseError, parse_blanked, parse_description, parse_string_list
from generation.validate import (
    changed_fraction,
    check_blanked,
    check_key_information,
    check_paraphrase,
    check_similar,
    removed_spans,
)

Q = "Janet has 16 eggs and sells 3 of them for $2 each. How much does she earn?"


def reason(problem: object) -> str | None:
    return None if problem is None else problem.reason  # type: ignore[attr-defined]


def test_similar_checks() -> None:
    good = "Janet has 20 eggs and sells 5 of them for $3 each. How much does she earn?"
    assert check_similar(Q, good, []) is None
    assert reason(check_similar(Q, Q.upper(), [])) == r.COPY
    assert reason(check_similar(Q, " ".join(good.split()) + " ", [good])) == r.DUPLICATE
    kept_one = "Janet has 20 eggs and sells 3 of them for $3 each. How much does she earn?"
    assert reason(check_similar(Q, kept_one, [])) == r.NUMBERS_UNCHANGED
    assert check_similar(Q, kept_one, [], min_changed=0.5) is None
    assert reason(check_similar(Q, "Janet has some eggs. How much does she earn?", [])) == r.NUMBERS_UNCHANGED
    assert reason(check_similar(Q, "Janet has [BLANK] eggs.", [])) == r.BLANK_COUNT
    assert reason(check_similar(Q, "  ", [])) == r.EMPTY


def naive_changed_fraction(original: list[int], candidate: list[int]) -> float:
    if len(original) == len(candidate):
        return sum(1 for i in range(len(original)) if original[i] != candidate[i]) / len(original)
    remaining = list(candidate)
    kept = 0
    for value in original:
        if value in remaining:
            remaining.remove(value)
            kept += 1
    return 1 - kept / len(original)


@pytest.mark.parametrize("seed", range(30))
def test_changed_fraction_matches_a_naive_loop(seed: int) -> None:
    rng = random.Random(seed)
    original = [rng.randint(1, 5) for _ in range(rng.randint(1, 6))]
    candidate = [rng.randint(1, 5) for _ in range(rng.randint(0, 6))]
    expected = naive_changed_fraction(original, candidate)
    assert changed_fraction([Fraction(v) for v in original], [Fraction(v) for v in candidate]) == pytest.approx(
        expected
    )


def test_blanked_checks() -> None:
    blanked = "Janet has [BLANK] eggs and sells 3 of them for $2 each. How much does she earn?"
    assert check_blanked(Q, blanked, 1) is None
    assert removed_spans(Q, blanked) == ["16"]
    assert (
        check_blanked(Q, "Janet  has [BLANK] eggs and sells 3 of them for $2 each.\nHow much does she earn?", 1) is None
    )  # spacing
    assert reason(check_blanked(Q, Q, 1)) == r.BLANK_COUNT
    assert reason(check_blanked(Q, blanked.replace("3 of", "[BLANK] of"), 1)) == r.BLANK_COUNT
    assert check_blanked(Q, blanked.replace("3 of", "[BLANK] of"), 2) is None
    assert removed_spans(Q, blanked.replace("3 of", "[BLANK] of")) == ["16", "3"]
    assert reason(check_blanked(Q, blanked.replace("Janet", "Jane"), 1)) == r.CHANGED_OUTSIDE_BLANKS
    assert reason(check_blanked(Q, blanked.replace("earn?", "make?"), 1)) == r.CHANGED_OUTSIDE_BLANKS
    assert (
        reason(
            check_blanked(Q, "Janet has [BLANK] 16 eggs and sells 3 of them for $2 each. How much does she earn?", 1)
        )
        == r.CHANGED_OUTSIDE_BLANKS
    )
    assert (
        reason(check_blanked(Q, "[BLANK] How much does she earn?", 1)) == r.CHANGED_OUTSIDE_BLANKS
    )  # removes too much


def test_paraphrase_checks() -> None:
    source = "Janet has [BLANK] eggs and sells 3 of them. How many are left?"
    good = "Janet owns [BLANK] eggs and sells 3 of them. How many remain?"
    assert check_paraphrase(source, good, 1, [], ["16"]) is None
    assert reason(check_paraphrase(source, good.replace("[BLANK]", "some"), 1, [], ["16"])) == r.BLANK_COUNT
    assert (
        reason(
            check_paraphrase(
                source, "  " + source.replace(" ", "\n").upper().replace("[BLANK]", "[BLANK]"), 1, [], ["16"]
            )
        )
        == r.COPY
    )
    assert reason(check_paraphrase(source, good, 1, [good], ["16"])) == r.DUPLICATE
    assert reason(check_paraphrase(source, good + " She had 16.", 1, [], ["16"])) == r.REVEALS_BLANK
    assert check_paraphrase(source, good + " She had 160.", 1, [], ["16"]) is None  # 160 is not 16


def test_key_information_checks() -> None:
    assert check_key_information("the initial number of eggs", Q) is None
    assert reason(check_key_information("", Q)) == r.EMPTY
    assert reason(check_key_information("the 16 eggs she has", Q)) == r.REVEALS_BLANK
    assert reason(check_key_information(" ".join(["word"] * 16), Q)) == r.TOO_LONG


@pytest.mark.parametrize(
    "answer",
    [
        '["a", "b"]',
        'Sure! Here they are:\n```json\n["a", "b"]\n```\nAnything else?',
        '```\n["a", "b"]\n```',
        'The problems: ["a", "b"] -- enjoy',
        '{"problems": ["a", "b"]}',
        '[{"problem": "a"}, {"problem": "b"}]',
        'Note [1]: see below. ["a", "b"]',
    ],
)
def test_string_lists_are_found_in_chatter(answer: str) -> None:
    assert parse_string_list(answer) == ["a", "b"]


@pytest.mark.parametrize("answer", ["", "no json here", '["unterminated', '{"a": 1, "b": 2}', "[1, 2]"])
def test_unusable_lists_raise(answer: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_string_list(answer)
    assert err.value.reason == r.INVALID_JSON


def test_blanked_and_description_parsing() -> None:
    assert parse_blanked('```json\n{"blanked": "x [BLANK] y"}\n```') == "x [BLANK] y"
    assert parse_blanked('Result: ["x [BLANK] y"]') == "x [BLANK] y"
    with pytest.raises(ParseError):
        parse_blanked("x [BLANK] y")
    assert parse_description('"The initial quantity."') == "The initial quantity"
    assert parse_description("Description: the time duration\n\nBecause ...") == "the time duration"
    assert parse_description('```\n{"description": "the price of one item"}\n```') == "the price of one item"
    assert parse_description("**Answer:** the distance travelled.") == "the distance travelled"


def test_removed_spans_is_consistent_with_a_naive_search() -> None:
    rng = random.Random(0)
    words = "alpha beta gamma 12 delta 7 epsilon 3.5 zeta".split()
    for _ in range(200):
        picks = sorted(rng.sample(range(len(words)), rng.randint(1, 3)))
        blanked = " ".join("[BLANK]" if i in picks else w for i, w in enumerate(words))
        expected = [words[i] for i in picks]
        if any(b - a == 1 for a, b in zip(picks, picks[1:])):
            continue  # adjacent markers: ambiguous split, not part of the contract
        assert removed_spans(" ".join(words), blanked) == expected
    assert Counter(removed_spans("a 1 b", "a [BLANK] b") or []) == Counter(["1"])
