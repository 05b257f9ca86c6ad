"""The shingle sets of many texts at once: the sets of the exact S_R join, quickly.

:func:`shingle_sets` gives, for each text, the distinct 64-bit hashes of its
word 3-shingles (the features of the default profile, those
:func:`nearsim.core.fingerprint._feature_hashes` yields), sorted as unsigned
numbers and viewed as signed ``int64``: what
``np.unique(np.concatenate(list(_feature_hashes(text))))`` gives, text by
text.  Like :func:`nearsim.core.fingerprint.simhash_many`, it puts the
tokens of many texts into one buffer with a marker token between texts, so
the array work of tokenising, hashing and sorting is paid once per batch
instead of once per text; texts longer than one piece are hashed piece by
piece, as the fingerprint does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..core import text as _text
from ..core._xxh64 import xxh64_ranges
from ..core.fingerprint import (
    _END,
    _MARKER,
    _SPACE,
    SHINGLE_WORDS,
    _bit_counts_per_text,
    _feature_hashes,
    _separated_utf8,
    _single_spaced,
    simhash,
)

__all__ = ["fingerprints_and_sets", "shingle_set", "shingle_sets"]

_MANY_CHARS = 1 << 20
"""Texts are hashed together up to about this many characters at a time."""

Hashes = npt.NDArray[np.int64]


def shingle_set(text: str, tokenisation: int = 1) -> Hashes:
    """The distinct shingle hashes of one text, ascending as unsigned, as ``int64``."""
    pieces = list(_feature_hashes(text, tokenisation))
    if not pieces:
        return np.array([], dtype=np.int64)
    unique: Hashes = np.unique(np.concatenate(pieces)).view(np.int64)
    return unique


def shingle_sets(texts: Sequence[str | None], tokenisation: int = 1) -> list[Hashes | None]:
    """:func:`shingle_set` of each text (None for None), many texts at a time."""
    return _shingled(texts, None, tokenisation)


def fingerprints_and_sets(texts: Sequence[str | None], tokenisation: int = 1,
                          ) -> tuple[list[int | None], list[Hashes | None]]:  # fmt: skip
    """The default profile's fingerprint and :func:`shingle_set` of each text, from one
    tokenising and hashing of the texts (None and None for None)."""
    fingerprints: list[int | None] = [None] * len(texts)
    return fingerprints, _shingled(texts, fingerprints, tokenisation)


def _shingled(texts: Sequence[str | None], fingerprints: list[int | None] | None,
              tokenisation: int) -> list[Hashes | None]:  # fmt: skip
    """The shingle sets of the texts, batch by batch; with ``fingerprints``, each
    text's fingerprint set there too, voted from the same hashes."""
    sets: list[Hashes | None] = [None] * len(texts)
    batch: list[int] = []
    size = 0
    for index, text in enumerate(texts):
        if text is None:
            continue
        if len(text) > _text.PIECE_CHARS:  # in pieces, to bound the memory
            sets[index] = shingle_set(text, tokenisation)
            if fingerprints is not None:
                fingerprints[index] = simhash(text, tokenisation)
            continue
        batch.append(index)
        size += len(text)
        if size >= _MANY_CHARS:
            _together(texts, batch, sets, fingerprints, tokenisation)
            batch, size = [], 0
    _together(texts, batch, sets, fingerprints, tokenisation)
    return sets


def _together(texts: Sequence[str | None], indexes: list[int], sets: list[Hashes | None],
              fingerprints: list[int | None] | None, tokenisation: int) -> None:  # fmt: skip
    """Set ``sets[i]`` (and ``fingerprints[i]``) for ``i`` in ``indexes``.

    The buffer holds each text's tokens as ``_feature_hashes`` would for a
    text of one piece, with a marker token between texts; shingles that
    include a marker are left out (as ``simhash_many`` does).
    """
    if not indexes:
        return
    separator = b" " + bytes([_MARKER]) + b" "
    tokens = separator.join(_separated_utf8(str(texts[i]), tokenisation) for i in indexes)
    buffer = b"".join((b" ", tokens, _END))
    joined = _single_spaced(np.frombuffer(buffer, dtype=np.uint8))
    spaces = (joined == _SPACE).nonzero()[0]
    marker = joined[spaces[:-1] + 1] == _MARKER  # one per token
    document = np.cumsum(marker) - marker  # of each token: markers before it
    words = np.bincount(document[~marker], minlength=len(indexes))
    for number in np.flatnonzero(words == 0).tolist():
        sets[indexes[number]] = np.array([], dtype=np.int64)
    # Texts of one or two tokens have one feature, all of it: its hash.
    for number in np.flatnonzero((words > 0) & (words < SHINGLE_WORDS)).tolist():
        first = int(np.searchsorted(document, number))
        last = first + int(words[number])  # the token after the text's last
        start = spaces[first] + 1
        feature = xxh64_ranges(joined, np.array([start]), np.array([spaces[last] - start]))
        sets[indexes[number]] = feature.view(np.int64).copy()
        if fingerprints is not None:
            fingerprints[indexes[number]] = int(feature.view(np.int64)[0])
    whole = ~(marker[:-2] | marker[1:-1] | marker[2:])  # shingles within one text
    starts = spaces[:-SHINGLE_WORDS][whole] + 1
    if len(starts) == 0:
        return
    hashes = xxh64_ranges(joined, starts, spaces[SHINGLE_WORDS:][whole] - starts)
    owner = document[: -SHINGLE_WORDS + 1][whole]  # the text of each shingle, ascending
    numbers, first_shingle, shingle_count = np.unique(owner, return_index=True,
                                                      return_counts=True)  # fmt: skip
    if fingerprints is not None:  # the vote, before the sort below reorders the hashes
        counts = _bit_counts_per_text(hashes, first_shingle, shingle_count)
        majority = np.packbits(counts > (shingle_count // 2)[:, None], axis=1,
                               bitorder="little")  # fmt: skip
        for number, value in zip(numbers.tolist(), majority.view("<i8").ravel().tolist(),
                                 strict=True):  # fmt: skip
            fingerprints[indexes[number]] = value
    # One small sort per text: quicker than sorting the batch by text and hash.
    for number, piece in zip(numbers.tolist(), np.split(hashes, first_shingle[1:]), strict=True):
        piece.sort()
        keep = np.empty(len(piece), dtype=bool)
        keep[0] = True
        np.not_equal(piece[1:], piece[:-1], out=keep[1:])
        sets[indexes[number]] = piece[keep].view(np.int64)
