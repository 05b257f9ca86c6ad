"""Steps 1 to 3 of every profile: a text's normalised word tokens.

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
   character (those scripts put no spaces between words).  Tokenisation 2
   (profile version 2) also makes each letter of Thai, Lao, Myanmar, Khmer
   and the other scripts written without spaces whose words only a
   dictionary finds (table ``CLUSTERED``) start a token, which the combining
   marks after it continue.  Under tokenisation 1 a token of those scripts
   is a whole phrase between spaces, so one typo changes the phrase and
   every shingle around it.

These steps are part of the stored data format of every profile (see
:mod:`nearsim.core.fingerprint` and :mod:`nearsim.core.profiles`); the C
fingerprint in the server uses tables generated from this module.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from functools import cache
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from . import _unicode14
from .interrupts import LimitExceeded, checkpoint

# Texts are processed in pieces of about this many characters, cut before
# ASCII whitespace, so huge documents need memory for one piece at a time.
# Such a cut changes neither normalisation nor tokens: an ASCII space is a
# starter that composes with nothing and is never part of a token.
PIECE_CHARS = 1 << 20
_CUT = re.compile(r"[\t\n\v\f\r ]")

MAX_UNSTABLE_RUN = 2048
"""The most characters in a row that are not stable (see below: combining
marks, compatibility forms...) a text may have.  Normalisation orders
combining marks by a sort whose time grows with the square of such a run, in
one call that nothing interrupts (the server's C code, PostgreSQL's
unicode_normalize(), alike), so a longer run is refused, by both."""


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
            f"nearsim's text normalisation needs Unicode "
            f"{_unicode14.UNICODE_VERSION} or newer (Python 3.11+); this Python "
            f"has Unicode {unicodedata.unidata_version}"
        )


_check_unicode_database()
_PINNED = _Pinned(_unicode14.IGNORABLE, _unicode14.UNASSIGNED)
_SEPARATORS = _Separators(_unicode14.JOINED, _unicode14.SOLO)


def pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > PIECE_CHARS:
        cut = _CUT.search(text, start + PIECE_CHARS)
        if cut is None:
            break
        yield text[start : cut.start()]
        start = cut.start()
    yield text[start:]


def normalize(text: str) -> str:
    """Steps 1 and 2: ignorables, pinned Unicode, NFKC, casefold."""
    if not text.isascii():
        text = text.translate(_PINNED)
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


TOKENISATIONS = (1, 2)
"""The tokenisations nearsim computes: a profile of version N uses tokenisation N."""


def check_tokenisation(tokenisation: int) -> None:
    if tokenisation not in TOKENISATIONS:
        raise ValueError(f"tokenisation {tokenisation!r} is unknown to this nearsim, which"
                         f" computes {' and '.join(map(str, TOKENISATIONS))}")


def token_batches(text: str, tokenisation: int = 1) -> Iterator[list[str]]:
    check_tokenisation(tokenisation)
    for piece in pieces(text):
        checkpoint()
        # Word characters are never whitespace, so splitting on whitespace
        # after the separators became spaces leaves exactly the tokens.
        separated_piece = separated_quickly(piece)
        if tokenisation == 2:
            separated_piece = clusters_apart(separated_piece)
        batch = separated_piece.split()
        if batch:
            yield batch


def tokens(text: str, tokenisation: int = 1) -> Iterator[str]:
    """The normalised word tokens of ``text``, in order."""
    for batch in token_batches(text, tokenisation):
        yield from batch


_CLUSTERED, _MARK = 1, 2  # kinds in the cluster table (0: anything else)


@cache
def _cluster_tables() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64],
                               npt.NDArray[np.int64], npt.NDArray[np.uint8]]:  # fmt: skip
    """The kind of each code point below U+10000, and the ranges above (starts, ends,
    kinds) of the tables ``CLUSTERED`` and ``MARKS``."""
    kinds = np.zeros(_SMALL, dtype=np.uint8)
    large: list[tuple[int, int, int]] = []
    for kind, table in ((_CLUSTERED, _unicode14.CLUSTERED), (_MARK, _unicode14.MARKS)):
        for first, last in zip(*_parse_table(table), strict=True):
            kinds[first : min(last + 1, _SMALL)] = kind
            if last >= _SMALL:
                large.append((max(first, _SMALL), last, kind))
    large.sort()
    starts, ends, large_kinds = (np.array(column, dtype=dtype) for column, dtype in zip(
        zip(*large, strict=True), (np.int64, np.int64, np.uint8), strict=True))
    return kinds, starts, ends, large_kinds


def _cluster_kinds(points: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    small, starts, ends, large_kinds = _cluster_tables()
    kinds: npt.NDArray[np.uint8] = small[np.minimum(points, _SMALL - 1)]
    above = np.flatnonzero(points >= _SMALL)
    if len(above):
        values = points[above].astype(np.int64)
        at = np.searchsorted(starts, values, side="right") - 1
        inside = (at >= 0) & (values <= ends[np.maximum(at, 0)])
        kinds[above] = np.where(inside, large_kinds[np.maximum(at, 0)], 0)
    return kinds


def clusters_apart(separated_text: str) -> str:
    """Step 3 of tokenisation 2 on text that step 3 of tokenisation 1 has separated:
    each letter of ``CLUSTERED`` with the combining marks (``MARKS``) after it becomes
    a token, as if a space were put before it and after its last mark.

    Exact on separated text: the letters and marks are word characters, so
    they stand in it as they are, and a space around them only ends tokens.
    Text cut into pieces before ASCII whitespace gives the same tokens.
    """
    if separated_text.isascii():
        return separated_text
    points = _code_points(separated_text)
    kinds = _cluster_kinds(points)
    clustered = kinds == _CLUSTERED
    if not clustered.any():
        return separated_text
    mark = kinds == _MARK
    # the last character before each that is not a mark: a letter of CLUSTERED
    # there means this character continues its token only if it is a mark
    position = np.arange(len(points))
    last_base = np.maximum.accumulate(np.where(mark, -1, position))
    before = np.concatenate(([-1], last_base[:-1]))
    after_letter = (before >= 0) & clustered[np.maximum(before, 0)]
    space_before = clustered | (after_letter & ~mark)
    counts = 1 + space_before.astype(np.intp)
    out = np.repeat(points, counts)
    out[np.cumsum(counts)[space_before] - 2] = ord(" ")
    return out.astype("<u4").tobytes().decode("utf-32-le")


def separated(text: str) -> str:
    """Steps 1 to 3 without the split: every character that is not part of a
    token is a space, and ideographs and hiragana have spaces around them."""
    return normalize(text).translate(_SEPARATORS)


# -- the same steps by tables, for text that needs no normalisation ------------
# Text made only of code points of the STABLE table is its own NFKC and step 1
# keeps it, and a text may be cut before any of them without changing steps 1
# to 3.  So such stretches need only casefold() and step 3, which tables of
# the code points below U+10000 do for a whole stretch at once; only the
# stretches around other characters take the steps one character at a time.

_SMALL = 0x10000  # the code points the tables hold
_JOINS, _ALONE = 1, 2  # step 3's kinds in the word table (0: a space)
_QUICK_CHARS = 64  # shorter text is quicker one character at a time
# A stretch costs a Python call, about as long as normalising a hundred
# characters of the whole text at once; text with more stretches than one per
# this many characters is normalised whole.
_CHARS_PER_STRETCH = 128


@cache
def _tables() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8]]:
    """Whether each code point below U+10000 is stable (one more entry, False, stands
    for every code point above), and its kind in step 3."""
    stable = np.zeros(_SMALL + 1, dtype=np.bool_)
    for first, last in zip(*_parse_table(_unicode14.STABLE), strict=True):
        stable[first : min(last + 1, _SMALL)] = True
    kinds = np.zeros(_SMALL, dtype=np.uint8)
    for kind, table in ((_JOINS, _unicode14.JOINED), (_ALONE, _unicode14.SOLO)):
        for first, last in zip(*_parse_table(table), strict=True):
            kinds[first : min(last + 1, _SMALL)] = kind
    return stable, kinds


def _code_points(text: str) -> npt.NDArray[np.uint32]:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _separated_stable(text: str) -> str:
    """``separated(text)`` of text made of stable code points below U+10000."""
    folded = text.casefold()
    points = _code_points(folded)
    if len(points) == 0 or int(points.max()) >= _SMALL:
        return folded.translate(_SEPARATORS)
    kinds = _tables()[1][points]
    out = np.where(kinds == 0, np.uint32(ord(" ")), points)
    alone = kinds == _ALONE
    if alone.any():
        counts = np.where(alone, 3, 1)
        out = np.repeat(out, counts)
        ends = np.cumsum(counts)[alone]
        out[ends - 3] = out[ends - 1] = ord(" ")
    return out.astype("<u4").tobytes().decode("utf-32-le")


def _longest_unstable_run(stable: npt.NDArray[np.bool_]) -> int:
    """The most False entries in a row."""
    edges = np.flatnonzero(np.concatenate(([True], stable, [True])))
    return int(np.diff(edges).max()) - 1


def _check_unstable_runs(points: npt.NDArray[np.uint32],
                         quick: npt.NDArray[np.bool_]) -> None:  # fmt: skip
    """Refuse a run of more than :data:`MAX_UNSTABLE_RUN` code points that are not
    stable.  ``quick`` calls every code point above U+FFFF unstable, so only
    when its longest run is too long are those looked up in the table."""
    if _longest_unstable_run(quick) <= MAX_UNSTABLE_RUN:
        return
    starts, ends = (np.array(bound, dtype=np.int64) for bound in _stable_ranges())
    at = np.searchsorted(starts, points, side="right") - 1
    exact = (at >= 0) & (points <= ends[np.maximum(at, 0)])
    if _longest_unstable_run(exact | (points < 0x80)) > MAX_UNSTABLE_RUN:
        raise LimitExceeded(
            f"the text has more than {MAX_UNSTABLE_RUN} characters in a row that Unicode"
            " normalisation may reorder or join",
            hint="Such a run (combining marks, compatibility forms) is refused: normalising"
            " it takes time that grows with its square.")


@cache
def _stable_ranges() -> tuple[list[int], list[int]]:
    return _parse_table(_unicode14.STABLE)


def separated_quickly(text: str) -> str:
    """``separated(text)``, equal to it on every text; text that normalisation
    leaves alone once step 1 and compatibility forms are dealt with takes
    casefold() and a table whole (:func:`_separated_whole`), other text takes
    them on its stretches of stable code points, and the steps per character
    around the rest (or all at once, when the stretches are many and short)."""
    if len(text) < _QUICK_CHARS or text.isascii():
        return separated(text)
    points = _code_points(text)
    stable = _tables()[0][np.minimum(points, _SMALL)]
    _check_unstable_runs(points, stable)
    whole = _separated_whole(points)
    if whole is not None:
        return whole
    # A character that is not stable goes with the stable one before it (the
    # cut before that one is safe; composition may join the two) and with
    # those up to the next stable one.
    slow = ~stable
    slow[:-1] |= slow[1:]
    changes = np.flatnonzero(slow[1:] != slow[:-1]) + 1
    if len(changes) * _CHARS_PER_STRETCH > len(text):
        return separated(text)
    edges = [0, *changes.tolist(), len(slow)]
    return "".join(
        separated(text[start:end]) if slow[start] else _separated_stable(text[start:end])
        for start, end in pairwise(edges)
    )


# -- whole texts that are normalised once step 1 and compatibility forms are done
# Most text that is not stable throughout is so only because of a few code
# points: zero-width spaces between Khmer or Thai words (step 1 removes them),
# marks such as the Khmer coeng that NFKC leaves where they are, and full-width
# punctuation in Chinese (NFKC maps U+FF0C to ",").  Cutting such text into
# stretches costs a Python call per stretch.  Instead step 1 is done on the
# whole text with a table, and so is NFKC of each code point alone; if NFKC
# then has nothing left to do (unicodedata.is_normalized), steps 2 and 3 are
# casefold() and a table.  That is exact: replacing code points by their NFKC
# changes no NFKD (NFKD of a text is the canonical reordering of the NFKD of
# its code points, and NFKD(NFKC(c)) = NFKD(c)), so it changes no NFKC either,
# and a text in NFKC is its own.

_KEEP, _REMOVE, _SPACE = 0, 1, 2  # step 1
_LONGER = 0xFFFFFFFF  # a code point whose NFKC alone is longer: kept until it is put in


@cache
def _whole_tables() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], dict[int, str]]:
    """Step 1 of each code point below U+10000; its NFKC alone when that is another
    single code point (0: itself, :data:`_LONGER`: longer); the longer ones."""
    step1 = np.zeros(_SMALL, dtype=np.uint8)
    for kind, table in ((_REMOVE, _unicode14.IGNORABLE), (_SPACE, _unicode14.UNASSIGNED)):
        for first, last in zip(*_parse_table(table), strict=True):
            step1[first : min(last + 1, _SMALL)] = kind
    single = np.zeros(_SMALL, dtype=np.uint32)
    longer: dict[int, str] = {}
    for cp in np.flatnonzero(~_tables()[0][:_SMALL] & (step1 == _KEEP)).tolist():
        if 0xD800 <= cp < 0xE000:
            continue
        nfkc = unicodedata.normalize("NFKC", chr(cp))
        if len(nfkc) == 1:
            single[cp] = ord(nfkc) if nfkc != chr(cp) else 0
        else:
            single[cp] = _LONGER
            longer[cp] = nfkc
    return step1, single, longer


def _separated_whole(points: npt.NDArray[np.uint32]) -> str | None:
    """``separated()`` of the text of ``points`` by tables, or None when the text needs
    the general steps (see above)."""
    top = int(points.max())  # code points beyond the tables, and surrogates: not here
    if top >= _SMALL or (top >= 0xD800 and bool(((points >= 0xD800) & (points < 0xE000)).any())):
        return None
    step1, single, longer = _whole_tables()
    kinds = step1[points]
    if kinds.any():
        points = np.where(kinds == _SPACE, np.uint32(ord(" ")), points)[kinds != _REMOVE]
        if len(points) == 0:
            return ""
    forms = single[points]
    if forms.any():
        points = np.where((forms != 0) & (forms != _LONGER), forms, points)
    text = points.astype("<u4").tobytes().decode("utf-32-le")
    if not unicodedata.is_normalized("NFKC", text):
        # Longer forms ("…" is "...") are put in where they are, then checked again.
        at = np.flatnonzero(forms == _LONGER).tolist()
        if not at:
            return None
        parts = [text[: at[0]]]
        for here, after in zip(at, [*at[1:], len(text)], strict=True):
            parts += (longer[ord(text[here])], text[here + 1 : after])
        text = "".join(parts)
    if not unicodedata.is_normalized("NFKC", text):
        return None
    return _separated_stable(text)
