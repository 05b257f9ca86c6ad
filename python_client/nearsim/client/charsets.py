"""Which encoding a text file is in, and its text.

The rules, in order (:func:`decode`):

1. A byte order mark decides: UTF-8, UTF-16 or UTF-32.
2. Text that is valid UTF-8 is read as UTF-8 (``ascii`` when it is all
   ASCII, which reads the same in any ASCII-based encoding).  A legacy
   encoding given with ``--encoding`` is not applied to such a file: text
   in a legacy encoding with bytes outside ASCII is almost never valid
   UTF-8, while UTF-8 read as cp1252 turns ``é`` into ``Ã©`` without a
   word.  The reader says so (:func:`override_note`), once per file.
3. ``auto``: UTF-16 without a byte order mark is recognised by its zero
   bytes; anything else is detected with charset-normalizer, with a
   preference for cp1252 (Windows' Western code page, a superset of the
   printable Latin-1): between single-byte code pages that read the bytes
   equally well, cp1252 wins, and another only when charset-normalizer
   finds clearly less mess (:data:`STRONG_MESS`) or a clearly better
   language fit (:data:`STRONG_COHERENCE`).  Short texts give it little
   to go on, and on its own it picks cp1250 or cp775 for a French memo
   with a euro sign as readily as cp1252.
4. Any other ``--encoding NAME`` is applied as given (strictly).

:class:`Decoded` carries the encoding used, by its Python codec name, so
that the loader and ``nearsim check`` can report it per file.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from charset_normalizer.models import CharsetMatch

__all__ = ["Decoded", "Undecodable", "decode", "file_encoding", "forced_legacy",
           "override_note"]

WESTERN = "cp1252"
"""The code page preferred among single-byte ones that read a text equally well."""

_WESTERN_FAMILY = frozenset({"cp1252", "iso8859-1", "iso8859-15", "ascii"})

STRONG_MESS = 0.1
"""How much less mess (charset-normalizer's chaos, 0 to 1) another code page must
show than cp1252 to be chosen over it."""

STRONG_COHERENCE = 0.2
"""How much better a language fit (charset-normalizer's coherence, 0 to 1)
another code page must show than cp1252 to be chosen over it."""

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"),
         (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))  # fmt: skip
BOM_PREFIXES = tuple(bom for bom, _ in _BOMS)

_UTF16_SNIFF = 4096
_CONTROLS = frozenset(chr(code) for code in range(32) if chr(code) not in "\t\n\v\f\r\x1b")


class Decoded(NamedTuple):
    """A text, the codec it was read with, and whether the bytes are its UTF-8."""

    text: str
    encoding: str  # a Python codec name: ascii, utf-8, utf-8-sig, utf-16, cp1252, ...
    is_utf8: bool


class Undecodable(Exception):
    """The bytes are not valid in the encoding: ``offset`` is the first bad byte."""

    def __init__(self, encoding: str, offset: int | None, byte: bytes = b"") -> None:
        super().__init__(encoding)
        self.encoding = encoding
        self.offset = offset
        self.byte = byte


def codec_name(encoding: str) -> str:
    """Python's canonical name of ``encoding`` (``cp1252`` for ``windows-1252``)."""
    return codecs.lookup(encoding).name


def forced_legacy(encoding: str) -> bool:
    """Whether ``encoding`` is one UTF-8 text is never meant to be read in: an
    ASCII-based encoding other than UTF-8 (not UTF-16/32, which a file of
    ASCII and zero bytes can be in and still be valid UTF-8)."""
    if encoding == "auto":
        return False
    name = codec_name(encoding)
    if name.startswith(("utf-8", "utf-16", "utf-32", "utf-7")):
        return False
    try:
        return b"A\n".decode(name) == "A\n"
    except (UnicodeDecodeError, LookupError):
        return False


def override_note(asked: str, used: str) -> str | None:
    """What to tell the user when a file asked to be read in ``asked`` was read in ``used``."""
    if forced_legacy(asked) and used in ("utf-8", "utf-8-sig"):
        return (f"valid UTF-8 with characters outside ASCII: read as UTF-8, not as"
                f" --encoding {asked}")
    return None


def decode(data: bytes, encoding: str) -> Decoded:
    """The text of ``data`` (see the module's rules); :class:`Undecodable` if it has none."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return Decoded(_strict(data, codec), codec, False)
    if encoding != "auto" and codec_name(encoding).startswith(("utf-16", "utf-32")):
        name = codec_name(encoding)
        return Decoded(_strict(data, name), name, False)
    if data.isascii():
        return Decoded(data.decode("ascii"), "ascii", True)
    if encoding == "auto" or forced_legacy(encoding) or codec_name(encoding) == "utf-8":
        try:
            return Decoded(data.decode("utf-8"), "utf-8", True)
        except UnicodeDecodeError as error:
            if encoding != "auto":
                if codec_name(encoding) == "utf-8":
                    raise Undecodable("utf-8", error.start,
                                      data[error.start:error.start + 1]) from None
    if encoding != "auto":
        name = codec_name(encoding)
        return Decoded(_strict(data, name), name, False)
    return _detect(data)


def utf16_without_bom(data: bytes) -> str | None:
    """The codec of UTF-16 text without a byte order mark, if ``data`` looks like
    it: zero bytes in every other place (most text is ASCII or Latin), and
    no control characters once decoded.  None otherwise."""
    head = data[:_UTF16_SNIFF]
    if len(data) % 2 or len(head) < 4:
        return None
    even, odd = head[0::2], head[1::2]
    for codec, zeros, other in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if zeros.count(0) >= 0.6 * len(zeros) and other.count(0) == 0:
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                return None
            if not _CONTROLS.intersection(text[:_UTF16_SNIFF]):
                return codec
    return None


def _strict(data: bytes, codec: str) -> str:
    try:
        return data.decode(codec)
    except UnicodeDecodeError as error:
        # utf-8-sig counts from after the byte order mark; the offset is the file's
        offset = error.start + (len(codecs.BOM_UTF8) if codec == "utf-8-sig" else 0)
        raise Undecodable(codec_name(codec), offset, data[offset:offset + 1]) from None


def _detect(data: bytes) -> Decoded:
    """Not UTF-8 nor with a byte order mark: UTF-16 by its zeros, else a guess."""
    codec = utf16_without_bom(data)
    if codec is not None:
        return Decoded(data.decode(codec), codec, False)
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    western = from_bytes(data, cp_isolation=[WESTERN]).best()
    if western is not None and (best is None or _prefer_western(best, western)):
        return Decoded(data.decode(WESTERN), WESTERN, False)
    if best is None:
        raise Undecodable("auto", None)
    return Decoded(str(best), codec_name(best.encoding), False)


def _prefer_western(best: CharsetMatch, western: CharsetMatch) -> bool:
    """Whether cp1252's reading is as good as charset-normalizer's best one."""
    if codec_name(best.encoding) in _WESTERN_FAMILY:
        return True
    less_mess = western.chaos - best.chaos >= STRONG_MESS
    better_fit = best.coherence - western.coherence >= STRONG_COHERENCE
    return not (less_mess or better_fit)


_SCAN_BYTES = 1 << 20
DETECT_SAMPLE_BYTES = 1 << 20
"""How much of a record file ``auto`` detects its encoding from (its start, cut
at a line's end): a CSV file is read as it streams, in one encoding."""


class FileEncoding(NamedTuple):
    """How to read a record file: the codec, the encoding to report, and a note."""

    codec: str  # for an incremental decoder (utf-8-sig: a byte order mark is skipped)
    encoding: str  # reported: ascii, utf-8, utf-16, cp1252, ...
    note: str | None  # valid UTF-8 read against the encoding asked


def file_encoding(path: str, asked: str) -> FileEncoding:
    """The encoding of a file read as a stream (a CSV file), by the rules of
    :func:`decode` for the whole file: a byte order mark; UTF-8 if all of it is
    (scanned in pieces); else the encoding asked, or with ``auto`` the one
    detected from its first :data:`DETECT_SAMPLE_BYTES`.  OSError if it
    cannot be read."""
    with open(path, "rb") as file:
        head = file.read(4)
        for bom, codec in _BOMS:
            if head.startswith(bom):
                return FileEncoding(codec, codec, None)
        file.seek(0)
        if asked != "auto" and not forced_legacy(asked):
            name = codec_name(asked)
            return FileEncoding("utf-8-sig" if name == "utf-8" else name, name, None)
        decoder = codecs.getincrementaldecoder("utf-8")()
        ascii_only = valid = True
        while piece := file.read(_SCAN_BYTES):
            ascii_only = ascii_only and piece.isascii()
            try:
                decoder.decode(piece)
            except UnicodeDecodeError:
                valid = False
                break
        if valid:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                valid = False
        if valid:
            used = "ascii" if ascii_only else "utf-8"
            return FileEncoding("utf-8-sig", used, override_note(asked, used))
        if asked != "auto":
            name = codec_name(asked)
            return FileEncoding(name, name, None)
        file.seek(0)
        sample = file.read(DETECT_SAMPLE_BYTES + 1)
    if len(sample) > DETECT_SAMPLE_BYTES:
        sample = sample[:sample.rfind(b"\n", 0, DETECT_SAMPLE_BYTES) + 1] or sample
    try:
        detected = decode(sample, "auto").encoding
    except Undecodable:
        return FileEncoding("utf-8-sig", "utf-8", None)  # its lines fail, each named
    return FileEncoding(detected, detected, None)
