"""The default fingerprint ("similarity index"), profiles ``default/1`` and ``default/2``.

Every detail below is part of the stored data format and is named by
``PROFILE``; changing any of them means a new profile version, never
different numbers under the same name.  The server computes the same bits
in C (``extension/src/fingerprint.c``, ``simhash(text)``), from tables
generated out of this module and :mod:`nearsim.core.text`; golden vectors
(``tests/golden``) hold both to it.

Profile ``default/1``:

1. to 3. Normalisation and tokens: see :mod:`nearsim.core.text`.
4. Features: word 3-shingles, the tokens joined by one space; a document
   with one or two tokens has one feature made of all of them.  Every
   occurrence counts (a repeated shingle votes again).
5. Each feature is hashed with 64-bit xxHash (xxh64, seed 0) of its UTF-8
   bytes.  Bit i of the fingerprint is 1 iff more features have bit i set
   than clear (the weighted vote is > 0; ties give 0).
6. The unsigned 64-bit result is stored as the signed bigint with the same
   bits (two's complement).

Profile ``default/2`` is the same with tokenisation 2 (see
:mod:`nearsim.core.text`): letters of Thai, Lao, Myanmar, Khmer and the like
are tokens of their own.  The functions below take the tokenisation, 1 by
default.

A text with no tokens (empty, whitespace, punctuation only) has no
fingerprint: ``None`` here, NULL in SQL.  Other feature profiles build on
this module in :mod:`nearsim.core.profiles`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

import numpy as np
import numpy.typing as npt
import xxhash

from . import text as _text
from ._xxh64 import PADDING, xxh64_ranges
from .bits import BITS, to_signed
from .text import check_tokenisation, clusters_apart, separated, separated_quickly, token_batches

PROFILE = "default/1"
"""Name and version of the fingerprint profile this module computes by default."""

SHINGLE_WORDS = 3


def _shingle_batches(text: str, tokenisation: int) -> Iterator[list[str]]:
    """Lists of shingles; consecutive batches overlap by the carried words."""
    carry: list[str] = []
    seen_full_shingle = False
    for batch in token_batches(text, tokenisation):
        words = carry + batch
        if len(words) >= SHINGLE_WORDS:
            seen_full_shingle = True
            shifted = (islice(words, i, None) for i in range(SHINGLE_WORDS))
            yield list(map(" ".join, zip(*shifted, strict=False)))
        carry = words[-(SHINGLE_WORDS - 1) :]
    if not seen_full_shingle and carry:
        yield [" ".join(carry)]


def shingles(text: str, tokenisation: int = 1) -> Iterator[str]:
    """The features of ``text`` (word 3-shingles), with repetitions."""
    for batch in _shingle_batches(text, tokenisation):
        yield from batch


# Fingerprinting does not build the shingle strings: it hashes byte ranges of
# one UTF-8 buffer that holds the tokens of a piece with a space before and
# after each.  A shingle is the range from the start of a token to the end of
# the token two further on.

# Steps 1 to 3 for ASCII text, one byte at a time: its normalisation is
# casefold(), which lower-cases ASCII letters, and every ASCII character that
# is not part of a word becomes a space.
_ASCII_SEPARATED = bytes(
    ord(separated(chr(c))) if c < 128 else c for c in range(256)
)
_SPACE = ord(" ")
# After the last space: room for xxh64_ranges to read past the last shingle.
_END = b" " + bytes(PADDING)


def _separated_utf8(piece: str, tokenisation: int) -> bytes:
    """The tokens of ``piece`` in UTF-8, separated by one or more spaces.

    Every character that is not part of a token is a space by then, and the
    byte 0x20 occurs in UTF-8 only as a space, so the spaces mark the tokens.
    """
    if not piece.isascii():
        piece = _separated_around_non_ascii(piece)
        if tokenisation == 2:
            # The ASCII left as it is holds no letters of CLUSTERED.
            piece = clusters_apart(piece)
    # The rest is ASCII; what is already separated stays as it is.
    return piece.encode("utf-8").translate(_ASCII_SEPARATED)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# Text with more non-ASCII bytes than this share (in UTF-8) goes through the
# general steps whole (by tables where it needs no normalisation): looking
# for its few ASCII stretches costs more than it saves.
_NON_ASCII_SHARE = 1 / 128


def _separated_around_non_ascii(piece: str) -> str:
    """Steps 1 to 3 on the stretches of ``piece`` that hold non-ASCII characters.

    English text often has a few of them (curly quotes, dashes), and the
    general steps cost far more per character than the ASCII byte table.
    The stretches are cut before spaces, which changes neither
    normalisation nor tokens (see ``nearsim.core.text.pieces``).
    """
    extra_bytes = len(piece.encode("utf-8", "surrogatepass")) - len(piece)
    if extra_bytes > len(piece) * _NON_ASCII_SHARE:
        return separated_quickly(piece)
    parts: list[str] = []
    done = 0  # piece[:done] is in parts
    while (found := _NON_ASCII.search(piece, done)) is not None:
        start = max(piece.rfind(" ", done, found.start()), done)
        end = piece.find(" ", found.end())
        if end < 0:
            end = len(piece)
        parts += (piece[done:start], separated_quickly(piece[start:end]))
        done = end
    parts.append(piece[done:])
    return "".join(parts)


def _single_spaced(buffer: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """``buffer``, which starts with a space, with each run of spaces made one space."""
    word = buffer != _SPACE
    keep = np.empty_like(word)
    keep[0] = True
    np.logical_or(word[1:], word[:-1], out=keep[1:])  # after a non-space
    single_spaced: npt.NDArray[np.uint8] = buffer[keep]
    return single_spaced


def _feature_hashes(text: str, tokenisation: int) -> Iterator[npt.NDArray[np.uint64]]:
    """The hashes of the features of ``text``, a piece at a time."""
    # The last two tokens of the text so far, joined by a space: a shingle
    # may start in one piece and end in the next.
    carry = b""
    seen_full_shingle = False
    for piece in _text.pieces(text):
        buffer = b"".join((b" ", carry, b" ", _separated_utf8(piece, tokenisation), _END))
        joined = _single_spaced(np.frombuffer(buffer, dtype=np.uint8))
        spaces = (joined == _SPACE).nonzero()[0]
        token_count = len(spaces) - 1
        if token_count >= SHINGLE_WORDS:
            seen_full_shingle = True
            starts = spaces[:-SHINGLE_WORDS] + 1
            yield xxh64_ranges(joined, starts, spaces[SHINGLE_WORDS:] - starts)
        kept = min(token_count, SHINGLE_WORDS - 1)
        carry = joined[spaces[token_count - kept] + 1 : spaces[-1]].tobytes()
    if not seen_full_shingle and carry:
        yield np.array([xxhash.xxh64_intdigest(carry)], dtype=np.uint64)


# Bit counting adds up bytes that are 0 or 1, eight at a time as the bytes
# of a uint64: a byte counts up to _SUMMED without carrying into the next.
_SUMMED = 255
_FEW_HASHES = 1024  # below this, unpacking the bits is quicker
_ROW_STARTS = np.arange(0, _FEW_HASHES, _SUMMED)
_EVERY_BYTES_LOW_BIT = np.array(0x0101010101010101, dtype=np.uint64)
_BIT_IN_BYTE = np.arange(8, dtype=np.uint64)[:, None]


def _bit_counts(hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """How many of ``hashes`` have each bit set, bit 0 (least significant) first.

    Much less work than expanding every hash into 64 numbers.
    """
    if len(hashes) <= _FEW_HASHES:
        # One byte per bit; lanes[i, j] holds bits 8 * j to 8 * j + 7 of hash i.
        bits = np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8), bitorder="little")
        lanes = bits.view("<u8").reshape(-1, 8)
        sums = np.add.reduceat(lanes, _ROW_STARTS[: -(-len(hashes) // _SUMMED)], axis=0)
        octets = sums.view(np.uint8).reshape(-1, 64)
        few_counts: npt.NDArray[np.int64] = np.add.reduce(octets, axis=0, dtype=np.int64)
        return few_counts
    # Many: quicker to pick bit k of every byte of each hash with a shift and
    # a mask; byte b of spread[k, i] is then bit 8 * b + k of hash i.
    rows = -(-len(hashes) // _SUMMED)
    padded = np.zeros(rows * _SUMMED, dtype=np.uint64)  # zeros count no bits
    padded[: len(hashes)] = hashes
    spread = padded >> _BIT_IN_BYTE
    spread &= _EVERY_BYTES_LOW_BIT
    sums = np.add.reduce(spread.reshape(8, rows, _SUMMED), axis=2).astype("<u8", copy=False)
    # counts[k, b] is how many hashes have bit 8 * b + k set.
    octets = sums.view(np.uint8).reshape(8, rows, 8)
    counts: npt.NDArray[np.int64] = np.add.reduce(octets, axis=1, dtype=np.int64)
    return counts.T.ravel()


def simhash(text: str, tokenisation: int = 1) -> int | None:
    """The fingerprint of ``text`` as a signed 64-bit integer (SQL bigint), profile
    ``default/1`` (``default/2`` with ``tokenisation=2``).

    Returns ``None`` when the text has no word tokens.  Other profiles:
    :func:`nearsim.simhash` with a profile name.

    >>> simhash("In the beginning God created the heaven and the earth.")
    -8749841501232166640
    """
    if not isinstance(text, str):
        raise TypeError(f"simhash() needs a str, not {type(text).__name__}")
    check_tokenisation(tokenisation)
    return vote(_feature_hashes(text, tokenisation))


def vote(feature_hashes: Iterable[npt.NDArray[np.uint64]]) -> int | None:
    """Steps 5 and 6: the signed fingerprint from the hashes of every feature.

    ``None`` when there are no hashes at all.
    """
    counts = None
    total = 0
    for hashes in feature_hashes:
        piece_counts = _bit_counts(hashes)
        counts = piece_counts if counts is None else counts + piece_counts
        total += len(hashes)
    if counts is None or total == 0:
        return None
    # More than half the features (ties give 0).  Bit i of the fingerprint
    # is bit i % 8 of byte i // 8, little-endian.
    majority = np.packbits(counts > total // 2, bitorder="little")
    return int.from_bytes(majority.tobytes(), "little", signed=True)


# simhash_many fingerprints texts of up to about this many characters in all
# at once; a document marker token keeps their shingles apart.
_MANY_CHARS = 1 << 20
_MARKER = 0x01  # a control character: the byte table makes any in a text a space


def simhash_many(texts: Sequence[str], tokenisation: int = 1) -> list[int | None]:
    """``[simhash(t, tokenisation) for t in texts]``, quicker for many short texts.

    The texts' tokens go into one buffer, so the array work of hashing and
    voting is shared instead of paid again for each text.
    """
    check_tokenisation(tokenisation)
    results: list[int | None] = [None] * len(texts)
    batch: list[int] = []
    size = 0
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"simhash() needs a str, not {type(text).__name__}")
        if len(text) > _text.PIECE_CHARS:
            results[index] = simhash(text, tokenisation)  # in pieces, to bound the memory
            continue
        batch.append(index)
        size += len(text)
        if size >= _MANY_CHARS:
            _simhash_together(texts, batch, results, tokenisation)
            batch, size = [], 0
    _simhash_together(texts, batch, results, tokenisation)
    return results


def _simhash_together(
    texts: Sequence[str], indexes: list[int], results: list[int | None], tokenisation: int
) -> None:
    """Set ``results[i]`` to the fingerprint of ``texts[i]`` for ``i`` in ``indexes``.

    The buffer holds each text's tokens as ``_feature_hashes`` would for a
    text of one piece, with a marker token between texts; shingles that
    include a marker are left out.
    """
    if not indexes:
        return
    separator = b" " + bytes([_MARKER]) + b" "
    tokens = separator.join(_separated_utf8(texts[i], tokenisation) for i in indexes)
    buffer = b"".join((b" ", tokens, _END))
    joined = _single_spaced(np.frombuffer(buffer, dtype=np.uint8))
    spaces = (joined == _SPACE).nonzero()[0]
    marker = joined[spaces[:-1] + 1] == _MARKER  # one per token
    document = np.cumsum(marker) - marker  # of each token: markers before it
    words = np.bincount(document[~marker], minlength=len(indexes))

    # Texts of one or two tokens have one feature, all of it: its hash.
    for number in np.flatnonzero((words > 0) & (words < SHINGLE_WORDS)).tolist():
        first = int(np.searchsorted(document, number))
        last = first + int(words[number])  # the token after the text's last
        feature = joined[spaces[first] + 1 : spaces[last]].tobytes()
        results[indexes[number]] = to_signed(xxhash.xxh64_intdigest(feature))

    whole = ~(marker[:-2] | marker[1:-1] | marker[2:])  # shingles within one text
    starts = spaces[: -SHINGLE_WORDS][whole] + 1
    if len(starts) == 0:
        return
    hashes = xxh64_ranges(joined, starts, spaces[SHINGLE_WORDS:][whole] - starts)
    owner = document[: -SHINGLE_WORDS + 1][whole]  # the text of each shingle
    numbers, first_shingle, shingle_count = np.unique(owner, return_index=True,
                                                      return_counts=True)  # fmt: skip
    counts = _bit_counts_per_text(hashes, first_shingle, shingle_count)
    majority = np.packbits(counts > (shingle_count // 2)[:, None], axis=1, bitorder="little")
    for number, value in zip(numbers.tolist(), majority.view("<i8").ravel().tolist(),
                             strict=True):  # fmt: skip
        results[indexes[number]] = value


def _bit_counts_per_text(
    hashes: npt.NDArray[np.uint64], starts: npt.NDArray[np.intp], lengths: npt.NDArray[np.intp]
) -> npt.NDArray[np.int64]:
    """Bit counts (as ``_bit_counts``) of each run ``hashes[start : start + length]``.

    The hashes' bits become bytes of 0 or 1, eight to a uint64, and runs of
    at most 255 rows are added as uint64: no byte carries into the next.
    """
    bits = np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8), bitorder="little")
    lanes = bits.view("<u8").reshape(-1, 8)
    chunks = -(-lengths // _SUMMED)
    first_chunk = np.cumsum(chunks) - chunks
    within = np.arange(int(chunks.sum())) - np.repeat(first_chunk, chunks)
    chunk_starts = np.repeat(starts, chunks) + _SUMMED * within
    sums = np.add.reduceat(lanes, chunk_starts, axis=0).astype("<u8", copy=False)
    octets = sums.view(np.uint8).reshape(-1, BITS)  # column 8 * l + j: bit 8 * l + j
    counts: npt.NDArray[np.int64] = np.add.reduceat(octets, first_chunk, axis=0,
                                                    dtype=np.int64)  # fmt: skip
    return counts


