"""A few words naming a blanked quantity's type from its surroundings, never its value (the offline
generator's key information: "the number of eggs", "the time duration")."""

from __future__ import annotations

import re

from .numbers import Slot, in_math

_TIME_UNITS = {
    "second",
    "seconds",
    "minute",
    "minutes",
    "hour",
    "hours",
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
}
_DISTANCE_UNITS = {
    "km",
    "kilometers",
    "kilometres",
    "miles",
    "mile",
    "meters",
    "metres",
    "m",
    "cm",
    "feet",
    "foot",
    "inches",
    "yards",
}
_TEMPERATURE_UNITS = {"degrees", "degree", "celsius", "fahrenheit", "kelvin"}
_NOT_NOUNS = {
    "of",
    "and",
    "or",
    "more",
    "less",
    "fewer",
    "times",
    "is",
    "are",
    "was",
    "were",
    "to",
    "in",
    "on",
    "at",
    "for",
    "each",
    "per",
    "than",
    "the",
    "a",
    "an",
    "by",
    "with",
    "from",
    "as",
    "if",
    "then",
    "so",
    "it",
    "that",
    "has",
    "have",
    "had",
    "every",
    "cost",
    "costs",
    "will",
    "would",
    "can",
    "do",
    "does",
    "did",
    "be",
    "been",
    "being",
}


def describe_slots(text: str, slots: list[Slot], first_index: int) -> str:
    """A few words naming the blanked quantity's type, from its surroundings (not its value)."""
    slot = slots[0]
    before = text[max(0, slot.start - 2) : slot.start]
    phrase = _phrase_after(text, slot.end)
    words = {w.lower() for w in phrase}
    if any(symbol in before for symbol in "$£€") and not in_math(text, slot.start):
        kind = "the amount of money"
    elif slot.percent:
        kind = "the percentage"
    elif slot.kind in ("fraction", "latex_fraction"):
        kind = "the fraction"
    elif in_math(text, slot.start):
        kind = f"the {_ordinal(first_index + 1)} constant in the expression"
    elif "old" in words:
        kind = "the age"
    elif words & _TEMPERATURE_UNITS:
        kind = "the temperature"
    elif words & _TIME_UNITS:
        kind = "the time duration"
    elif words & _DISTANCE_UNITS:
        kind = "the distance measurement"
    elif phrase:
        kind = f"the number of {phrase[-1].lower()}"
    else:
        kind = f"the {_ordinal(first_index + 1)} quantity given"
    return kind if len(slots) == 1 else f"{kind} and the next {len(slots) - 1} quantities"


def _phrase_after(text: str, end: int) -> list[str]:
    """The words of the phrase right after a quantity, up to a function word or punctuation
    ("16 eggs per day" -> [eggs]; "two fair 6-sided dice are" -> [fair, dice])."""
    phrase: list[str] = []
    for token in text[end : end + 60].split()[:4]:
        word = token.strip(".,;:?!)(")
        if re.fullmatch(r"\d+-[A-Za-z-]+", word):  # "6-sided": a modifier, read on
            continue
        if word.lower() in _NOT_NOUNS or not re.fullmatch(r"[A-Za-z][A-Za-z-]*", word):
            break
        phrase.append(word)
        if word != token:  # punctuation ends the phrase
            break
    return phrase


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}.get(n, f"{n}th")
