"""The Spark tests' corpus: the same documents in Spark and in PostgreSQL."""

from __future__ import annotations

import random
from dataclasses import dataclass

from pyspark.sql import DataFrame

from nearsim.client.samples import kjv_chapters


def edited(rng: random.Random, text: str) -> str:
    """A copy with a stretch deleted, or foreign words inserted, or a few words changed."""
    words = text.split()
    cut = rng.randrange(len(words))
    choice = rng.random()
    if choice < 0.3:
        return " ".join(words[:cut] + words[cut + rng.randrange(1, 6):])
    if choice < 0.6:
        return " ".join(words[:cut] + ["selah", "amen"] * rng.randrange(1, 4) + words[cut:])
    for _ in range(rng.randrange(1, 4)):
        words[rng.randrange(len(words))] = rng.choice(["lo", "behold", "verily"])
    return " ".join(words)


def make_corpus() -> dict[int, str | None]:
    """About 300 documents: chapters, edited copies (near-duplicates at many
    distances), a block of identical texts, short ones and texts without words."""
    rng = random.Random(7)
    chapters = [c.text for c in kjv_chapters(["Ruth", "Jonah", "Joel", "Micah", "Obadiah"])]
    verses = [line for text in chapters for line in text.splitlines() if len(line.split()) > 12]
    bodies: dict[int, str | None] = {}
    for text in chapters + verses[:100]:
        bodies[len(bodies) * 3 + 1] = text
    originals = list(bodies.values())
    for _ in range(120):
        original = rng.choice(originals)
        assert original is not None
        bodies[len(bodies) * 3 + 1] = edited(rng, original)
    for _ in range(30):
        bodies[len(bodies) * 3 + 1] = "And it came to pass in those days."
    bodies[9001] = "amen"
    bodies[9002] = "amen amen"
    bodies[9003] = ""
    bodies[9004] = "   ...   "
    bodies[9005] = None
    return bodies


@dataclass(frozen=True)
class Corpus:
    table: str
    bodies: dict[int, str | None]
    frame: DataFrame
