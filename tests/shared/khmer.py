"""Khmer-like texts for the tests of tokenisation 2: syllables of Khmer letters,
vowel signs and subscript consonants, without spaces between words and a space
between phrases, as Khmer is written; and copies with letters mistyped."""

from __future__ import annotations

import random

CONSONANTS = [chr(c) for c in range(0x1780, 0x17A3)]
VOWEL_SIGNS = [chr(c) for c in range(0x17B6, 0x17C6)]
COENG = "\u17d2"


def syllable(rng: random.Random) -> str:
    stacked = COENG + rng.choice(CONSONANTS) if rng.random() < 0.2 else ""
    vowel = rng.choice(VOWEL_SIGNS) if rng.random() < 0.7 else ""
    return rng.choice(CONSONANTS) + stacked + vowel


def khmer_text(rng: random.Random, phrases: int) -> str:
    """Phrases of syllables without spaces between words, a space between phrases."""
    return " ".join("".join(syllable(rng) for _ in range(rng.randint(3, 8)))
                    for _ in range(phrases))


def typos(rng: random.Random, text: str, count: int) -> str:
    """``count`` letters replaced: under tokenisation 1 each changes a whole phrase."""
    letters = list(text)
    for _ in range(count):
        at = rng.choice([i for i, c in enumerate(letters) if c in CONSONANTS])
        letters[at] = rng.choice(CONSONANTS)
    return "".join(letters)


def khmer_bodies(seed: int = 11, originals: int = 12, documents: int = 60) -> dict[int, str]:
    """Originals of 40 phrases, copies of them with 1 to 6 typos, a one-letter text and
    one mixed with Latin letters."""
    rng = random.Random(seed)
    texts = [khmer_text(rng, 40) for _ in range(originals)]
    found = dict(enumerate(texts))
    for number in range(originals, documents):
        found[number] = typos(rng, rng.choice(texts), rng.randint(1, 6))
    found[documents] = "ក"  # one letter: one shingle
    found[documents + 1] = "abc ពាក្យ"
    return found
