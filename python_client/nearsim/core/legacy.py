"""SI v1, the legacy "similarity index" of seed 000, kept for comparison.

Seed 000 (*The Similarity Index*, 2011) reduced a document to one number and
called two documents similar when their numbers were within +/-30 % of each
other.  Its best combination, "Method 43B", is reproduced here so nearsim's
SimHash can be compared with it on the same texts (docs/SI_V1.md):

1. words are cut on whitespace (seed 000 section 3.4: "all whitespace was
   removed except for one space between each word");
2. English stop words are removed, duplicates are kept (variation B,
   Table 4);
3. every word becomes its American Soundex code (the Soundex token stream,
   method numbers 41-54);
4. word k-grams with k = 40 are joined by one space (Figure 1 shows word
   k-grams as "four score and seven") and hashed with Java's
   ``String.hashCode()`` (section 3.1.2), a signed 32-bit ``int``;
5. the hashes that are 0 mod 25 form the sketch (method 3: "Filtered
   fingerprints that were 0 mod 25 ... and summed the sketch");
6. the sketch is summed into the SI.

Seed 003 (SI v2) reports SI v1's flaw: negative shingles and SI values,
because the hash and then the sum (a Java ``long``) overflowed silently.  This
module never wraps silently: :class:`SiV1` holds the exact sum (a Python
``int``), the value Java's ``long`` would have held, and whether the ``long``
overflowed on the way.  Use it for comparison only: the SI is not stored by
nearsim and is not a near-duplicate detector to rely on (see the doc).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from .data import STOP_WORDS_DIR
from .soundex import soundex

__all__ = [
    "JAVA_LONG_MAX",
    "JAVA_LONG_MIN",
    "MODULUS",
    "STOP_WORDS_FILE",
    "TOLERANCE",
    "K",
    "SiV1",
    "aggregate",
    "english_stop_words",
    "java_string_hash",
    "si_v1",
    "si_v1_similar",
    "sketch",
    "soundex",
    "soundex_stream",
    "to_java_int",
    "to_java_long",
    "words",
]

K = 40
"""Words per k-gram: seed 000 Table 9, Table 10's caption and section 6 say k = 40."""

MODULUS = 25
"""A fingerprint joins the sketch when it is evenly divisible by this."""

TOLERANCE = 0.30
"""The +/-30 % range of seed 000's query (section 4.2, Figure 2)."""

STOP_WORDS_FILE = STOP_WORDS_DIR / "english.stop"
"""PostgreSQL's English stop-word list (127 words), as the profiles ship it.

Seed 000 does not publish its list.  PostgreSQL's keeps SI v1 in step with
``to_tsvector('english')``; the copy shipped for the feature profiles (equal
to the server's file, tested) lets a client without PostgreSQL compute it.
"""

JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1

@functools.cache
def english_stop_words(path: Path = STOP_WORDS_FILE) -> frozenset[str]:
    """The stop words of ``path``, one lower-case word a line.

    Read on first use, not at import.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"SI v1 needs PostgreSQL's English stop-word list at {path}"
        ) from None
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())


def words(text: str, stop_words: frozenset[str] | None = None) -> Iterator[str]:
    """The words of ``text`` that are not stop words, duplicates kept (variation B).

    Seed 000 splits on whitespace; punctuation and digits are not words, so a
    word is its ASCII letters, lower-cased ("LORD's" -> "lords"), and a word
    without letters (a number) is dropped, as Soundex could not code it.  The
    stop-word test sees the same letters, so "Thou," is tested as "thou".
    Not :func:`nearsim.fingerprint.tokens`: that splits at apostrophes and
    folds Unicode, which the seed's 2011 Java code did not do.
    """
    stops = english_stop_words() if stop_words is None else stop_words
    for raw in text.split():
        word = "".join(c for c in raw.lower() if "a" <= c <= "z")
        if word and word not in stops:
            yield word


def soundex_stream(text: str, stop_words: frozenset[str] | None = None) -> list[str]:
    """Method 43B's input stream: the Soundex code of every non-stop word, in order."""
    return [soundex(word) for word in words(text, stop_words)]


def to_java_int(value: int) -> int:
    """``value`` wrapped to a Java ``int`` (32-bit two's complement)."""
    return (value + 2**31) % 2**32 - 2**31


def to_java_long(value: int) -> int:
    """``value`` wrapped to a Java ``long`` (64-bit two's complement)."""
    return (value + 2**63) % 2**64 - 2**63


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... + s[n-1], as a signed 32-bit int.

    Computed over UTF-16 code units, as Java does.  The wrap to 32 bits is part
    of the hash's definition (the seed's fingerprints are these ``int`` values,
    negative ones included); it is the first overflow seed 003 describes.
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return to_java_int(h)


def sketch(tokens: Sequence[str], k: int = K, modulus: int = MODULUS) -> list[int]:
    """The fingerprints of the k-grams of ``tokens`` that are 0 mod ``modulus``, in order.

    A k-gram is ``k`` consecutive tokens joined by one space; a stream shorter
    than ``k`` tokens has no k-gram and an empty sketch (the seed says nothing
    about short documents; an SI of 0 says "no evidence").  Java's ``%`` keeps
    the sign of the dividend, so ``h % 25 == 0`` in Java and in Python select
    the same (signed) hashes.
    """
    if k < 1 or modulus < 1:
        raise ValueError(f"k and modulus must be positive, not {k} and {modulus}")
    hashes = (java_string_hash(" ".join(tokens[i : i + k])) for i in range(len(tokens) - k + 1))
    return [h for h in hashes if h % modulus == 0]


@dataclass(frozen=True)
class SiV1:
    """One document's SI v1, exact, with what the seed's Java code would have stored."""

    value: int
    """The exact sum of the sketch (arbitrary precision): the SI nearsim uses."""
    java_long: int
    """What a Java ``long`` accumulator holds at the end (two's complement wrap)."""
    overflowed: bool
    """True when a partial sum left the ``long`` range, i.e. Java silently wrapped
    (``java_long`` may still equal ``value`` if later terms wrapped it back)."""
    fingerprints: int
    """Size of the sketch."""
    negative_fingerprints: int
    """Sketch members that are negative because ``String.hashCode()`` wrapped."""
    tokens: int
    """Soundex tokens in the stream (stop words removed, duplicates kept)."""


def aggregate(fingerprints: Iterable[int], tokens: int = 0) -> SiV1:
    """Sum ``fingerprints`` exactly and replay the sum in a Java ``long``.

    Each fingerprint must fit a ``long`` (Java could not have held it
    otherwise).  With 32-bit ``hashCode`` fingerprints a ``long`` overflows
    only past 2^32 fingerprints, but wider hashes (what seed 003 tried next)
    overflow at once; either way the flag says so instead of wrapping.
    """
    exact = 0
    overflowed = False
    count = negative = 0
    for fingerprint in fingerprints:
        if not JAVA_LONG_MIN <= fingerprint <= JAVA_LONG_MAX:
            raise ValueError(f"fingerprint {fingerprint} does not fit a Java long")
        exact += fingerprint
        overflowed = overflowed or not JAVA_LONG_MIN <= exact <= JAVA_LONG_MAX
        count += 1
        negative += fingerprint < 0
    return SiV1(exact, to_java_long(exact), overflowed, count, negative, tokens)


def si_v1(
    text: str,
    *,
    k: int = K,
    modulus: int = MODULUS,
    stop_words: frozenset[str] | None = None,
) -> SiV1:
    """Seed 000's Method 43B similarity index of ``text`` (see the module docstring)."""
    stream = soundex_stream(text, stop_words)
    return aggregate(sketch(stream, k, modulus), tokens=len(stream))


def si_v1_similar(query: int, candidate: int, tolerance: float = TOLERANCE) -> bool:
    """Seed 000's range query: is ``candidate`` within +/-``tolerance`` of ``query``?

    Section 4.2 / Figure 2: lower = SI - |SI*0.3|, upper = SI + |SI*0.3|, and
    "if (SIlower < SI2 < SIupper) then SI2 is similar to SI": strict bounds,
    relative to the *query's* SI, so the relation is not symmetric, and a
    query SI of 0 matches nothing, not even itself.  Exact rational arithmetic
    (no floating point): the tolerance is taken as the decimal it prints as,
    so 0.3 means 3/10 exactly, and SI values past 2^53 lose nothing.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must not be negative, not {tolerance}")
    margin = abs(Fraction(query) * Fraction(repr(tolerance)))
    return query - margin < candidate < query + margin
