"""The SimHash fingerprint ("similarity index") of a document.

This module is the only implementation of the fingerprint: the database's
``simhash(text)`` imports it from the copy that ``make install`` puts next to
the extension, and clients import it from the installed package.  Every
detail below is part of the stored data format and is named by ``PROFILE``;
changing any of them means a new profile version, never different numbers
under the same name.

Profile ``default/1``:

1. Default ignorable code points (soft hyphen, zero-width space and
   joiners, byte order mark, variation selectors...) are removed, as
   Unicode's NFKC_Casefold does: they are invisible and must not split
   words.  Other code points that Unicode 14.0.0 leaves unassigned become
   spaces, so a newer Python's Unicode database cannot change how they are
   treated.
2. NFKC normalisation, then ``str.casefold()``.  Unicode's stability policies
   guarantee that both give the same result under any later Unicode version
   for text made of characters assigned in 14.0.0.
3. Tokens: maximal runs of word characters (general category L, M, N or Pc
   in Unicode 14.0.0), except that ideographs and hiragana are one token per
   character (those scripts put no spaces between words).
4. Features: word 3-shingles, the tokens joined by one space; a document
   with one or two tokens has one feature made of all of them.  Every
   occurrence counts (a repeated shingle votes again).
5. Each feature is hashed with 64-bit xxHash (xxh64, seed 0) of its UTF-8
   bytes.  Bit i of the fingerprint is 1 iff more features have bit i set
   than clear (the weighted vote is > 0; ties give 0).
6. The unsigned 64-bit result is stored as the signed bigint with the same
   bits (two's complement).

A text with no tokens (empty, whitespace, punctuation only) has no
fingerprint: ``None`` here, NULL in SQL.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np
import xxhash

from . import _unicode14

PROFILE = "default/1"
"""Name and version of the fingerprint profile this module computes."""

SHINGLE_WORDS = 3
BITS = 64

_MASK = (1 << BITS) - 1
_SIGN = 1 << (BITS - 1)

# Texts are processed in pieces of about this many characters, cut before
# ASCII whitespace, so huge documents need memory for one piece at a time.
# Such a cut changes neither normalisation nor tokens: an ASCII space is a
# starter that composes with nothing and is never part of a token.
_PIECE_CHARS = 1 << 20
_CUT = re.compile(r"[\t\n\v\f\r ]")


def _parse_table(table: str) -> tuple[list[int], list[int]]:
    """Sorted range starts and ends of a table of hex code points and ranges."""
    starts, ends = [], []
    for item in table.split():
        first, _, last = item.partition("-")
        starts.append(int(first, 16))
        ends.append(int(last or first, 16))
    return starts, ends


class _CharMap(dict[int, str]):
    """A ``str.translate`` table filled in on first sight of each character.

    ``translate`` looks characters up in C, so once a character has been
    seen it costs no Python code; the tables would otherwise need an entry
    for every code point.
    """

    def __init__(self, *tables: str) -> None:
        super().__init__()
        self._tables = [_parse_table(t) for t in tables]

    def _find(self, cp: int) -> int:
        """Index of the first table that contains ``cp``, or -1."""
        for index, (starts, ends) in enumerate(self._tables):
            i = bisect_right(starts, cp) - 1
            if i >= 0 and cp <= ends[i]:
                return index
        return -1

    def _translate(self, cp: int) -> str:
        raise NotImplementedError

    def __missing__(self, cp: int) -> str:
        value = self[cp] = self._translate(cp)
        return value


class _Pinned(_CharMap):
    """Step 1: default ignorables vanish, unassigned characters become spaces."""

    def _translate(self, cp: int) -> str:
        return ("", " ", chr(cp))[self._find(cp)]


class _Separators(_CharMap):
    """Step 3: non-word characters become spaces, solo characters get spaces around."""

    def _translate(self, cp: int) -> str:
        return (chr(cp), f" {chr(cp)} ", " ")[self._find(cp)]


def _check_unicode_database() -> None:
    """Refuse to run where Unicode is older than the pinned version.

    Older databases lack characters that 14.0.0 assigns, so they would
    normalise and case-fold them differently; newer ones are handled by
    step 1 of the profile.
    """
    have = tuple(int(p) for p in unicodedata.unidata_version.split("."))
    need = tuple(int(p) for p in _unicode14.UNICODE_VERSION.split("."))
    if have < need:
        raise RuntimeError(
            f"nearsim fingerprint profile {PROFILE} needs Unicode "
            f"{_unicode14.UNICODE_VERSION} or newer (Python 3.11+); this Python "
            f"has Unicode {unicodedata.unidata_version}"
        )


_check_unicode_database()
_PINNED = _Pinned(_unicode14.IGNORABLE, _unicode14.UNASSIGNED)
_SEPARATORS = _Separators(_unicode14.JOINED, _unicode14.SOLO)


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > _PIECE_CHARS:
        cut = _CUT.search(text, start + _PIECE_CHARS)
        if cut is None:
            break
        yield text[start : cut.start()]
        start = cut.start()
    yield text[start:]


def normalize(text: str) -> str:
    """Steps 1 and 2 of the profile: ignorables, pinned Unicode, NFKC, casefold."""
    if not text.isascii():
        text = text.translate(_PINNED)
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def _token_batches(text: str) -> Iterator[list[str]]:
    for piece in _pieces(text):
        # Word characters are never whitespace, so splitting on whitespace
        # after the separators became spaces leaves exactly the tokens.
        batch = normalize(piece).translate(_SEPARATORS).split()
        if batch:
            yield batch


def tokens(text: str) -> Iterator[str]:
    """The normalised word tokens of ``text``, in order."""
    for batch in _token_batches(text):
        yield from batch


def _shingle_batches(text: str) -> Iterator[list[str]]:
    """Lists of shingles; consecutive batches overlap by the carried words."""
    carry: list[str] = []
    seen_full_shingle = False
    for batch in _token_batches(text):
        words = carry + batch
        if len(words) >= SHINGLE_WORDS:
            seen_full_shingle = True
            shifted = (islice(words, i, None) for i in range(SHINGLE_WORDS))
            yield list(map(" ".join, zip(*shifted, strict=False)))
        carry = words[-(SHINGLE_WORDS - 1) :]
    if not seen_full_shingle and carry:
        yield [" ".join(carry)]


def shingles(text: str) -> Iterator[str]:
    """The features of ``text`` (word 3-shingles), with repetitions."""
    for batch in _shingle_batches(text):
        yield from batch


def _hashes(features: list[str]) -> np.ndarray:
    encoded = map(str.encode, features)  # UTF-8
    return np.fromiter(map(xxhash.xxh64_intdigest, encoded), dtype=np.uint64, count=len(features))


# _BYTE_BITS[v, k] is bit k of the byte value v.
_BYTE_BITS = (np.arange(256)[:, None] >> np.arange(8) & 1).astype(np.int64)
_BYTE_OFFSETS = np.arange(8) * 256


def _bit_counts(hashes: np.ndarray) -> np.ndarray:
    """How many of ``hashes`` have each bit set, bit 0 (least significant) first.

    Counts how often each byte value occurs at each of the 8 byte positions,
    then turns those 8 x 256 counts into 64 bit counts with one product:
    much less work than expanding every hash into 64 bits.
    """
    octets = hashes.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8)
    per_byte = np.bincount((octets + _BYTE_OFFSETS).ravel(), minlength=8 * 256)
    return (per_byte.reshape(8, 256) @ _BYTE_BITS).ravel()


def _vote(batches: Iterable[list[str]]) -> int | None:
    counts = np.zeros(BITS, dtype=np.int64)
    total = 0
    for batch in batches:
        counts += _bit_counts(_hashes(batch))
        total += len(batch)
    if total == 0:
        return None
    unsigned = 0
    for i in np.flatnonzero(2 * counts > total):
        unsigned |= 1 << int(i)
    return to_signed(unsigned)


def simhash(text: str) -> int | None:
    """The fingerprint of ``text`` as a signed 64-bit integer (SQL bigint).

    Returns ``None`` when the text has no word tokens.

    >>> simhash("In the beginning God created the heaven and the earth.")
    -8749841501232166640
    """
    if not isinstance(text, str):
        raise TypeError(f"simhash() needs a str, not {type(text).__name__}")
    return _vote(_shingle_batches(text))


def to_signed(value: int) -> int:
    """The signed bigint with the same 64 bits as ``value``."""
    _check_range(value)
    value &= _MASK
    return value - (1 << BITS) if value & _SIGN else value


def to_unsigned(value: int) -> int:
    """The unsigned 64-bit value with the same bits as ``value``."""
    _check_range(value)
    return value & _MASK


def _check_range(value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"a fingerprint is an int, not {type(value).__name__}")
    if not -_SIGN <= value <= _MASK:
        raise ValueError(f"{value} does not fit in 64 bits")


def hamming(a: int, b: int) -> int:
    """The number of bits in which two fingerprints differ (0..64)."""
    return (to_unsigned(a) ^ to_unsigned(b)).bit_count()


def bits(value: int) -> str:
    """The 64-character 0/1 string of a fingerprint, most significant bit first."""
    return format(to_unsigned(value), "064b")


def from_bits(text: str) -> int:
    """The signed fingerprint written by :func:`bits`; rejects anything else."""
    if len(text) != BITS or text.strip("01"):
        bad = next((c for c in text if c not in "01"), None)
        reason = f"character {bad!r}" if bad is not None else f"length {len(text)}"
        raise ValueError(
            f"invalid fingerprint bit string {text[:80]!r}: expected {BITS} characters "
            f"'0' or '1', found {reason}"
        )
    return to_signed(int(text, 2))
