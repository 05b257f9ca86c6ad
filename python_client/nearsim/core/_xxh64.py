"""XXH64 (seed 0) of many byte ranges of one buffer at once, with numpy.

The fingerprint hashes every word 3-shingle of a text.  Calling the xxhash
library once per shingle spends most of the time in the interpreter rather
than in hashing, so here the shingles of a block go through each step of
XXH64 together, as uint64 array operations that wrap modulo 2**64 like the
C code.  The results are those of ``xxhash.xxh64_intdigest`` bit for bit;
the tests compare the two on random inputs of every length.

XXH64, as xxHash's doc/xxhash_spec.md specifies it: an input of 32 bytes or
more is consumed one 32-byte stripe at a time by four accumulators, which
are then merged into one; a shorter input starts from PRIME64_5 instead.
The input length is added, the remaining (fewer than 32) bytes are mixed in
as 8-byte lanes, at most one 4-byte lane and single bytes, and an avalanche
spreads every input bit over the result.

Every range of a block goes through the same sequence of steps; where a
range has no input for a step (its third lane, say), a mask keeps its value
unchanged.  The arrays are never sorted or regrouped, so a hash lands at
the index of its range.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import xxhash

Hashes = npt.NDArray[np.uint64]
Offsets = npt.NDArray[np.intp]


_PRIMES = (
    0x9E3779B185EBCA87,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0x85EBCA77C2B2AE63,
    0x27D4EB2F165667C5,
)


def _constant(value: int) -> Hashes:
    """A 0-d uint64 array: the quickest operand for numpy's uint64 arithmetic."""
    return np.array(value % (1 << 64), dtype=np.uint64)


PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME64_5 = map(_constant, _PRIMES)
_SHIFTS = [_constant(bits) for bits in range(65)]
_LOW_32_BITS = _constant(0xFFFFFFFF)
_LOW_8_BITS = _constant(0xFF)

# The four accumulators of a long input before its first stripe (seed 0).
_ACCUMULATORS_START = np.array(
    [(_PRIMES[0] + _PRIMES[1]) % (1 << 64), _PRIMES[1], 0, -_PRIMES[0] % (1 << 64)],
    dtype=np.uint64,
)
# How far each accumulator is rotated when they are merged into one.
_MERGE_ROTATIONS = np.array([1, 7, 12, 18], dtype=np.uint64)[:, None]

_STRIPE = 32
_LANE_OFFSETS = np.arange(0, _STRIPE, 8)[:, None]  # of the lanes in a stripe or tail
_BYTE_SHIFTS = np.arange(0, 24, 8, dtype=np.uint64)[:, None]  # of the single bytes


def _tail_steps(length: int) -> list[bool]:
    """Which steps mix in a tail of ``length`` (< 32) bytes.

    The steps are three 8-byte lanes, a 4-byte lane and three single bytes.
    """
    lanes, quad, singles = length // 8, length & 4, length & 3
    return [lanes > 0, lanes > 1, lanes > 2, quad > 0, singles > 0, singles > 1, singles > 2]


# _TAIL_STEPS[step, length]: does a tail of this length take this step?
_TAIL_STEPS = np.array([_tail_steps(length) for length in range(_STRIPE)]).T.copy()
_LANE_STEPS, _QUAD_STEP, _SINGLE_STEPS = slice(0, 3), 3, slice(4, 7)
# How far the single bytes are shifted in the last 8 bytes of the tail.
_SINGLES_SHIFT = np.array([8 * (length & 4) for length in range(_STRIPE)], dtype=np.uint64)

PADDING = 32
"""Bytes that ``data`` must have after every range, whatever their values.

Every range goes through every step of its block, and a step that is not
for it reads (and ignores) up to this many bytes past its end.
"""

# Inputs with more stripes than this are hashed by the xxhash library: they
# are rare (a word of hundreds of letters), and a stripe costs as many
# array operations as it would for thousands of inputs.
_MAX_STRIPES = 8

# Below this many ranges, calling the xxhash library for each one is quicker
# than numpy, whose every operation costs about a microsecond however short
# the arrays.
_FEW = 400

# Ranges hashed together: arrays of this many uint64 stay in the CPU cache.
_BLOCK = 1 << 13


def xxh64_ranges(data: npt.NDArray[np.uint8], starts: Offsets, lengths: Offsets) -> Hashes:
    """``xxh64_intdigest(data[s : s + n])`` for each ``s, n`` of ``starts, lengths``.

    ``data`` must go on for ``PADDING`` bytes after the end of every range;
    this is not checked.
    """
    count = len(starts)
    if count < _FEW:
        raw = data.tobytes()
        ends = (starts + lengths).tolist()
        return np.fromiter(
            [xxhash.xxh64_intdigest(raw[s:e]) for s, e in zip(starts.tolist(), ends, strict=True)],
            dtype=np.uint64,
            count=count,
        )
    if count <= _BLOCK:
        return _hash_block(data, starts, lengths)
    hashes = np.empty(count, dtype=np.uint64)
    for first in range(0, count, _BLOCK):
        block = slice(first, first + _BLOCK)
        low = int(starts[block].min())
        high = int((starts[block] + lengths[block]).max()) + PADDING
        hashes[block] = _hash_block(data[low:high], starts[block] - low, lengths[block])
    return hashes


def _hash_block(data: npt.NDArray[np.uint8], starts: Offsets, lengths: Offsets) -> Hashes:
    """``xxh64_ranges`` for ranges whose arrays fit in the cache."""
    # words[i] is the little-endian uint64 of data[i : i + 8].  Copying them
    # into an aligned array once is quicker than gathering unaligned words
    # several times.
    words = np.ndarray(
        (len(data) - 7,), dtype="<u8", buffer=data, offset=0, strides=(1,)
    ).astype(np.uint64)
    hashes = np.add(lengths, PRIME64_5, dtype=np.uint64, casting="unsafe")
    longest = int(lengths.max())
    if longest < _STRIPE:
        return _finish(words, hashes, starts, lengths, longest)

    long = np.flatnonzero(lengths >= _STRIPE)
    tails = lengths & (_STRIPE - 1)  # what is left after the whole stripes
    if len(long) < _FEW:
        # The steps below compute garbage for the long inputs (reading only
        # their own bytes), which the library's hashes then replace.
        by_library = long
        hashes = _finish(words, hashes, starts, tails, int(tails.max()))
    else:
        stripes = lengths[long] // _STRIPE
        hashes[long] = _consume_stripes(words, starts[long], lengths[long], stripes)
        by_library = long[stripes > _MAX_STRIPES]
        hashes = _finish(words, hashes, starts + (lengths - tails), tails, int(tails.max()))
    for index in by_library.tolist():
        start = int(starts[index])
        hashes[index] = xxhash.xxh64_intdigest(data[start : start + lengths[index]].tobytes())
    return hashes


def _rotate_left(x: Hashes, bits: int, scratch: Hashes) -> None:
    """Rotate ``x`` left by ``bits`` in place."""
    np.left_shift(x, _SHIFTS[bits], out=scratch)
    np.right_shift(x, _SHIFTS[64 - bits], out=x)
    x |= scratch


def _round_of_zero(lanes: Hashes, scratch: Hashes) -> None:
    """lanes = round(0, lanes), in place."""
    lanes *= PRIME64_2
    _rotate_left(lanes, 31, scratch)
    lanes *= PRIME64_1


def _round(accumulators: Hashes, lanes: Hashes, scratch: Hashes) -> None:
    """XXH64's round, in place: acc = rotl(acc + lane * PRIME64_2, 31) * PRIME64_1.

    ``lanes`` is overwritten.
    """
    lanes *= PRIME64_2
    accumulators += lanes
    _rotate_left(accumulators, 31, scratch)
    accumulators *= PRIME64_1


def _consume_stripes(words: Hashes, starts: Offsets, lengths: Offsets, stripes: Offsets) -> Hashes:
    """The hashes of inputs of 32 bytes or more after their whole stripes.

    That is after the four accumulators are merged and the length added;
    the rest of each input (``lengths % 32`` bytes) is still to be mixed in.
    Only the first ``_MAX_STRIPES`` stripes are consumed.
    """
    accumulators = np.repeat(_ACCUMULATORS_START[:, None], len(starts), axis=1)
    scratch = np.empty_like(accumulators)
    for stripe in range(min(int(stripes.max()), _MAX_STRIPES)):
        # An input with fewer stripes reads its last one again, not past its end.
        at = starts + np.minimum(stripes - 1, stripe) * _STRIPE
        lanes = words.take(at + _LANE_OFFSETS)
        advanced = accumulators.copy()
        _round(advanced, lanes, scratch)
        accumulators = np.where(stripes > stripe, advanced, accumulators)
    rotated = np.left_shift(accumulators, _MERGE_ROTATIONS)
    rotated |= accumulators >> (64 - _MERGE_ROTATIONS)
    hashes: Hashes = np.add.reduce(rotated, axis=0, dtype=np.uint64)
    # Then, for each accumulator v: h = (h ^ round(0, v)) * PRIME64_1 + PRIME64_4.
    _round_of_zero(accumulators, scratch)
    for mixed in accumulators:
        hashes ^= mixed
        hashes *= PRIME64_1
        hashes += PRIME64_4
    hashes += lengths.astype(np.uint64)
    return hashes


def _finish(
    words: Hashes, hashes: Hashes, starts: Offsets, lengths: Offsets, longest: int
) -> Hashes:
    """Mix in the last ``lengths`` (< 32) bytes from ``starts`` on; avalanche.

    ``longest`` is at least the largest of ``lengths``: steps beyond it are
    skipped.
    """
    mixed = np.empty_like(hashes)
    scratch = np.empty_like(hashes)
    steps = _TAIL_STEPS.take(lengths, axis=1)
    lanes = longest >> 3
    if lanes:
        values = words.take(starts + _LANE_OFFSETS[:lanes])
        _round_of_zero(values, np.empty_like(values))
        for lane, present in zip(values, steps[_LANE_STEPS][:lanes], strict=True):
            np.bitwise_xor(hashes, lane, out=mixed)
            _rotate_left(mixed, 27, scratch)
            mixed *= PRIME64_1
            mixed += PRIME64_4
            hashes = np.where(present, mixed, hashes)
        starts = starts + (lengths & 24)
    # The last (lengths % 8) bytes, then bytes that do not count.
    rest = words.take(starts)
    if longest >= 4:
        np.bitwise_and(rest, _LOW_32_BITS, out=mixed)
        mixed *= PRIME64_1
        mixed ^= hashes
        _rotate_left(mixed, 23, scratch)
        mixed *= PRIME64_2
        mixed += PRIME64_3
        hashes = np.where(steps[_QUAD_STEP], mixed, hashes)
        rest >>= _SINGLES_SHIFT.take(lengths)
    singles = min(longest, 3)
    if singles:
        values = rest >> _BYTE_SHIFTS[:singles]
        values &= _LOW_8_BITS
        values *= PRIME64_5
        for single, present in zip(values, steps[_SINGLE_STEPS][:singles], strict=True):
            np.bitwise_xor(hashes, single, out=mixed)
            _rotate_left(mixed, 11, scratch)
            mixed *= PRIME64_1
            hashes = np.where(present, mixed, hashes)
    # Avalanche.
    np.right_shift(hashes, _SHIFTS[33], out=scratch)
    hashes ^= scratch
    hashes *= PRIME64_2
    np.right_shift(hashes, _SHIFTS[29], out=scratch)
    hashes ^= scratch
    hashes *= PRIME64_3
    np.right_shift(hashes, _SHIFTS[32], out=scratch)
    hashes ^= scratch
    return hashes
