"""Small skill libraries for the embedding, cluster and graph tests: reworded copies of the same
advice (one family per topic) next to unrelated skills."""

from __future__ import annotations

from skillaudit.library import Library, Skill

ROUNDING = {
    "round-each-step": (
        "Round every intermediate result of a word problem to a whole number before the next step.",
        "After each calculation step, round the value to the nearest whole number and carry the "
        "rounded value into the next step, because people, items and dollars are whole.",
    ),
    "whole-number-working": (
        "In word problems, round each intermediate result to the nearest whole number before "
        "the next step.",
        "Whenever a calculation step gives a decimal, round it to a whole number and use the "
        "rounded number in the next step, since people, items and dollars are whole.",
    ),
    "integer-intermediates": (
        "Round the intermediate results of a word problem to whole numbers before continuing "
        "to the next step.",
        "Each time a step of the calculation produces a decimal, round it to the nearest whole "
        "number and carry that rounded value forward, as people, items and dollars are whole.",
    ),
}
COUNTING = {
    "counter-tally": (
        "Count how often each element occurs with collections.Counter.",
        "Build a Counter over the list, then read frequencies, the most common element and "
        "duplicates from it with most_common() and lookups.",
    ),
    "frequency-map": (
        "Tally element occurrences in a sequence using collections.Counter.",
        "Make one Counter of the sequence and get the counts, the most frequent item and the "
        "repeated items from it with most_common() and indexing.",
    ),
}
UNRELATED = {
    "regex-email": (
        "Validate e-mail addresses and extract phone numbers with Python regular expressions.",
        "Compile a pattern with re.compile, anchor it with ^ and $, use re.fullmatch for "
        "validation and re.findall for extraction; escape dots.",
    ),
    "binary-search": (
        "Find an insertion point in a sorted array with the bisect module.",
        "bisect_left returns the first index where the value could be inserted keeping order; "
        "the array must already be sorted ascending.",
    ),
    "matrix-transpose": (
        "Transpose and rotate a matrix stored as a list of lists.",
        "Use zip(*matrix) to transpose, reverse the rows to rotate by ninety degrees, and never "
        "build rows with [[0] * n] * m because the rows alias.",
    ),
    "http-retries": (
        "Retry failed HTTP requests with exponential backoff and jitter.",
        "Catch timeouts and 5xx responses, sleep base * 2 ** attempt plus random jitter, give up "
        "after five attempts and log the final error.",
    ),
    "gcd-primes": (
        "Greatest common divisor, least common multiple and primality checks.",
        "Use math.gcd and math.lcm; test primality by trial division up to the square root; "
        "treat 0 and 1 as not prime.",
    ),
}


def skill(sid: str, description: str, body: str) -> Skill:
    return Skill(id=sid, name=sid, description=description, body=body)


def library(*groups: dict[str, tuple[str, str]]) -> Library:
    skills = [skill(k, d, b) for g in groups for k, (d, b) in g.items()]
    return Library(skills=tuple(sorted(skills, key=lambda s: s.id)))


def full_library() -> Library:
    return library(ROUNDING, COUNTING, UNRELATED)
