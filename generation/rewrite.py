"""Rule-based, meaning-preserving rewrites of maths questions (the offline paraphraser).

The bank holds word-level substitutions (``buys`` → ``purchases``, ``in total`` →
``altogether``, contractions), sentence forms (question ↔ imperative, moving an ``If …,``
clause to the end, asking the question first) and neutral lead-ins. Before any rule runs, the
``[BLANK]`` markers, every number and every LaTeX span are swapped for opaque placeholders, so
no rule can touch them; they are put back unchanged afterwards.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable, Iterator

from .numbers import math_spans
from .records import BLANK

_PROTECTED = re.compile(re.escape(BLANK) + r"|[-−]?\d[\d,]*(?:\.\d+)?(?:/\d+)?%?")  # markers, numbers
_HOLE = "\ue000{}\ue001"
_HOLE_RE = re.compile("\ue000(\\d+)\ue001")
_HOLE_AHEAD = r"(?= (?:\$|£|€)?\ue000)"  # followed by a protected value


def protect(text: str) -> tuple[str, list[str]]:
    """Replace markers, numbers and LaTeX by placeholders; returns (masked text, originals)."""
    saved: list[str] = []

    def hole(piece: str) -> str:
        saved.append(piece)
        return _HOLE.format(len(saved) - 1)

    pieces, last = [], 0
    for start, end in math_spans(text):
        pieces.append(_PROTECTED.sub(lambda m: hole(m.group(0)), text[last:start]))
        pieces.append(hole(text[start:end]))
        last = end
    pieces.append(_PROTECTED.sub(lambda m: hole(m.group(0)), text[last:]))
    return "".join(pieces), saved


def restore(text: str, saved: list[str]) -> str:
    return _HOLE_RE.sub(lambda m: saved[int(m.group(1))], text)


def _match_case(template: str, replacement: str) -> str:
    return replacement[:1].upper() + replacement[1:] if template[:1].isupper() else replacement


@dataclass(frozen=True)
class Rule:
    """One rewrite: ``apply(masked_text, rng)`` returns the rewritten text or None if it does not apply."""

    name: str
    apply: Callable[[str, random.Random], str | None]


def _substitution(name: str, pattern: str, options: tuple[str, ...]) -> Rule:
    regex = re.compile(pattern, re.IGNORECASE)

    def apply(text: str, rng: random.Random) -> str | None:
        if not regex.search(text):
            return None
        choice = rng.choice(options)
        return regex.sub(lambda m: _match_case(m.group(0), m.expand(choice)), text)

    return Rule(name, apply)


_SUBSTITUTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("buys", r"\bbuys\b", ("purchases",)),
    ("bought", r"\bbought\b", ("purchased",)),
    ("purchases", r"\bpurchases\b(?! of)", ("buys",)),
    ("in total", r"\bin total\b", ("altogether", "in all")),
    ("altogether", r"\baltogether\b", ("in total", "in all")),
    ("in each", r"\b(in|for|on|at) each\b", (r"\1 every",)),
    ("each period", r"\beach (day|week|month|hour|year|morning|evening|night|time)\b", (r"every \1",)),
    ("left", r"\b(have|has|are|is|were|was) left(?=[?.,])", (r"\1 remaining",)),
    ("randomly", r"\brandomly\b", ("at random",)),
    ("at random", r"\bat random\b", ("randomly",)),
    ("is equal to", r"\bis equal to\b", ("equals",)),
    ("equals", r"\bequals\b", ("is equal to",)),
    ("approximately", r"\bapproximately\b", ("roughly", "about")),
    ("per unit", r"\bper (hour|day|week|month|minute|year)\b", (r"a \1", r"each \1")),
    ("twice", r"\btwice\b", ("two times",)),
    ("half of", r"\bhalf of\b", ("one half of",)),
    ("suppose", r"\bsuppose\b", ("assume",)),
    ("assume", r"\bassume\b", ("suppose",)),
    ("given that", r"\bgiven that\b", ("suppose that", "assume that")),
    ("contractions", r"\b(does|do|did|is|are|was|were) not\b", (r"\1n't",)),
    ("cannot", r"\bcannot\b", ("can't", "is not able to")),
    ("will not", r"\bwill not\b", ("won't",)),
    (
        "how many",
        r"\bhow many (?!more\b|fewer\b|less\b|are\b|is\b|were\b|was\b|do\b|does\b|did\b|will\b|can\b|of\b)(?=[a-z])",
        ("what number of ",),
    ),
    ("how much money", r"\bhow much money\b", ("what amount of money", "how many dollars")),
    ("how long", r"\bhow long (?=(?:does|will|did|would) it take)", ("how much time ",)),
    ("probability", r"\bprobability\b", ("chance", "likelihood")),
    ("travels", r"\btravels" + _HOLE_AHEAD, ("covers",)),
    ("earns", r"\bearns" + _HOLE_AHEAD, ("makes", "gets paid")),
    ("has", r"\bhas" + _HOLE_AHEAD, ("owns", "possesses")),
    ("have", r"\bhave" + _HOLE_AHEAD, ("own",)),
    ("gives", r"\bgives (?!away\b|up\b|back\b|out\b)", ("hands ",)),
    ("contains", r"\bcontains\b", ("holds", "has")),
    ("contain", r"\bcontain\b", ("hold",)),
    ("drawn", r"\bdrawn\b", ("picked", "selected")),
    ("draws", r"\bdraws\b", ("picks", "takes out")),
    ("selected", r"\bselected\b", ("chosen", "picked")),
    ("chosen", r"\bchosen\b", ("selected",)),
    ("rolled", r"\brolled\b", ("thrown", "tossed")),
    ("tossed", r"\btossed\b", ("flipped",)),
    ("flipped", r"\bflipped\b", ("tossed",)),
    ("starts", r"\bstarts\b", ("begins",)),
    ("begins", r"\bbegins\b", ("starts",)),
    ("store", r"\b(a|the) store\b", (r"\1 shop",)),
    ("shop", r"\b(a|the) shop\b", (r"\1 store",)),
    ("children", r"\bchildren\b", ("kids",)),
    ("kids", r"\bkids\b", ("children",)),
    ("students", r"\bstudents\b", ("pupils",)),
    ("costs", r"\bcosts" + _HOLE_AHEAD, ("is priced at", "sells for")),
    ("and then", r"\band then\b", ("and after that", "and afterwards")),
    ("calculate", r"\b(calculate|compute)\b", ("determine", "work out")),
    ("determine", r"\bdetermine\b", ("find", "calculate")),
    ("find", r"\bfind\b(?! all\b)", ("determine", "work out")),
    ("solve for", r"\bsolve for\b", ("find the value of",)),
    ("what is", r"\bwhat is\b", ("what's",)),
)

_SENTENCE_SPLIT = re.compile(r"(?<=[.?!])\s+(?=[A-Z\ue000$\\])")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_SPLIT.split(text.strip()) if s]


def _question_to_imperative(text: str, rng: random.Random) -> str | None:
    parts = _sentences(text)
    m = re.fullmatch(r"(?:What is|What's|What was|What will be) (the .+)\?", parts[-1]) if parts else None
    if not m:
        return None
    verb = rng.choice(("Find", "Determine", "Calculate", "Work out"))
    return " ".join([*parts[:-1], f"{verb} {m.group(1)}."])


def _imperative_to_question(text: str, rng: random.Random) -> str | None:
    parts = _sentences(text)
    m = re.fullmatch(r"(?:Find|Calculate|Compute|Determine|Work out) (the .+)\.", parts[-1]) if parts else None
    if not m:
        return None
    lead = rng.choice(("What is", "Can you find", "What do you get for"))
    return " ".join([*parts[:-1], f"{lead} {m.group(1)}?"])


def _if_clause_last(text: str, rng: random.Random) -> str | None:
    parts = _sentences(text)
    if not parts:
        return None
    m = re.fullmatch(r"If ([^,]+), ([a-z].+)([?.])", parts[-1])
    if not m:
        return None
    main = m.group(2)
    return " ".join([*parts[:-1], f"{main[0].upper()}{main[1:]} if {m.group(1)}{m.group(3)}"])


def _question_first(text: str, rng: random.Random) -> str | None:
    parts = _sentences(text)
    if len(parts) < 2 or not parts[-1].endswith("?"):
        return None
    joiner = rng.choice(("Here is the information you need:", "Use the following facts:", "What we know:"))
    return f"{parts[-1]} {joiner} {' '.join(parts[:-1])}"


def _solve_imperative(text: str, rng: random.Random) -> str | None:
    m = re.fullmatch(r"(Solve|Simplify|Evaluate|Compute|Factor) (?!for\b)(.+)([.?])", text.strip())
    if not m:
        return None
    phrasing = {
        "Solve": ("Find the solution of {}.", "Determine every solution of {}.", "What is the solution of {}?"),
        "Simplify": (
            "Write {} in its simplest form.",
            "Give a simplified form of {}.",
            "Reduce {} as far as possible.",
        ),
        "Evaluate": ("Compute the value of {}.", "What is the value of {}?", "Work out {}."),
        "Compute": ("Evaluate {}.", "What is {}?", "Work out the value of {}."),
        "Factor": ("Factorise {}.", "Write {} as a product of factors.", "Express {} in factored form."),
    }[m.group(1)]
    return rng.choice(phrasing).format(m.group(2))


LEAD_INS = (
    "Consider the following problem. ",
    "Here is a maths problem. ",
    "Read the problem below. ",
    "Answer the following. ",
    "Try this problem. ",
    "Look at this question. ",
)

SENTENCE_RULES = (
    Rule("question_to_imperative", _question_to_imperative),
    Rule("imperative_to_question", _imperative_to_question),
    Rule("if_clause_last", _if_clause_last),
    Rule("question_first", _question_first),
    Rule("solve_imperative", _solve_imperative),
)
WORD_RULES = tuple(_substitution(*spec) for spec in _SUBSTITUTIONS)


def applicable_rules(masked: str, rng: random.Random) -> list[Rule]:
    """Rules that change ``masked`` (tried with a throw-away draw)."""
    probe = random.Random(rng.random())
    return [
        rule
        for rule in (*WORD_RULES, *SENTENCE_RULES)
        if (out := rule.apply(masked, probe)) is not None and out != masked
    ]


def paraphrase_candidates(text: str, rng: random.Random, attempts: int) -> Iterator[str]:
    """Up to ``attempts`` rewrites of ``text``, drawn lazily (may repeat; callers dedupe and validate).

    Each candidate applies a random non-empty subset of the applicable rules (word rules first,
    then at most one sentence rule), and sometimes a lead-in; when no rule applies, lead-ins
    alone give the variation.
    """
    masked, saved = protect(text)
    rules = applicable_rules(masked, rng)
    word = [rule for rule in rules if rule in WORD_RULES]
    sentence = [rule for rule in rules if rule in SENTENCE_RULES]
    for _ in range(attempts):
        chosen = [rule for rule in word if rng.random() < 0.5]
        if sentence and (rng.random() < 0.5 or not chosen):
            chosen.append(rng.choice(sentence))
        if not chosen and word:
            chosen.append(rng.choice(word))
        current = masked
        for rule in chosen:
            current = rule.apply(current, rng) or current
        if not chosen or rng.random() < 0.25:
            current = rng.choice(LEAD_INS) + current
        yield restore(current, saved)
