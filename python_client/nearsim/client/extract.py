"""The text of a document file: plain text, Markdown, HTML, PDF or Word.

Everything that can go wrong with one input becomes an :class:`InputError`
with a short reason code (see :data:`REASONS`) and a message that says what
to do, so a loader can report it and go on with the next file.  Nothing here
opens a file that is not a regular file (a FIFO would block), and nothing is
read beyond ``max_bytes`` + 1 bytes.
"""

from __future__ import annotations

import codecs
import errno
import io
import logging
import os
import stat
import zipfile
from typing import Any, NamedTuple

from .charsets import BOM_PREFIXES, Decoded, Undecodable, codec_name, decode, utf16_without_bom

REASONS: dict[str, str] = {
    "not-found": "the path does not exist (or is a dangling symbolic link)",
    "vanished": "the file was listed but had gone when it was read",
    "unreadable": "permission denied or an I/O error",
    "symlink-loop": "symbolic links that point back to themselves",
    "not-a-file": "a FIFO, socket or device, not a regular file",
    "too-large": "over --max-bytes (checked before sending)",
    "empty": "no bytes, or only whitespace",
    "binary": "not text: an image, archive, executable or other binary data",
    "invalid-encoding": "not valid in the encoding (--encoding); the byte offset is reported",
    "nul-bytes": "contains NUL bytes, which PostgreSQL text cannot hold",
    "corrupt-pdf": "a PDF that cannot be parsed",
    "encrypted-pdf": "a PDF that needs a password",
    "no-text": "a PDF or Word file without extractable text (scanned images need OCR)",
    "corrupt-docx": "a Word file that cannot be parsed",
    "corrupt-mail": "an e-mail file (.eml, .mbox, .msg) that cannot be parsed",
    "needs-package": "a format read by an optional package that is not installed"
                     " (Outlook .msg: extract-msg)",
    "invalid-record": "a JSON Lines or CSV record that is malformed or lacks the text field",
    "duplicate-key": "a key loaded earlier in this run, or stored from another source",
}
"""Every reason an input can be rejected for, with what it means."""

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
DOCX_SUFFIXES = (".docx", ".docm")

# Leading bytes of common binary formats (PDF and ZIP are handled apart).
_MAGIC = {
    b"\x89PNG\r\n\x1a\n": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF87a": "a GIF image",
    b"GIF89a": "a GIF image",
    b"II*\x00": "a TIFF image",
    b"MM\x00*": "a TIFF image",
    b"\x1f\x8b": "gzip-compressed data",
    b"BZh": "bzip2-compressed data",
    b"\xfd7zXZ\x00": "xz-compressed data",
    b"(\xb5/\xfd": "zstd-compressed data",
    b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive",
    b"Rar!\x1a\x07": "a RAR archive",
    b"\x7fELF": "an executable (ELF)",
    b"MZ": "a Windows executable",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an old Office document (.doc/.xls): save it as .docx",
    b"SQLite format 3\x00": "an SQLite database",
    b"OggS": "Ogg audio or video",
    b"ID3": "MP3 audio",
    b"fLaC": "FLAC audio",
}
_MAGIC_PREFIXES = tuple(_MAGIC)
_SNIFF_BYTES = 8192
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\v\f\r\x1b")
_BINARY_CONTROL_SHARE = 0.10


class InputError(Exception):
    """One input that cannot be loaded: ``reason`` is a key of :data:`REASONS`."""

    def __init__(self, reason: str, message: str, offset: int | None = None) -> None:
        assert reason in REASONS, reason
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.offset = offset  # byte offset of the problem, where there is one


def check_encoding(name: str) -> str:
    """``name`` if Python knows the encoding (or it is ``auto``); else ValueError."""
    if name == "auto":
        return name
    try:
        codecs.lookup(name)
    except LookupError:
        raise ValueError(f"unknown encoding {name!r}: use a name such as utf-8, latin-1, "
                         "cp1252 or 'auto' to detect it") from None
    return name


class FileText(NamedTuple):
    """A document's text, its UTF-8 encoding, and the encoding it was read in
    ("" for PDF and Word files, whose text is not in an encoding of the file's)."""

    text: str
    encoded: bytes
    encoding: str


def read_text(path: str | os.PathLike[str], *, max_bytes: int, encoding: str = "utf-8") -> str:
    """The text of the document file at ``path``, or :class:`InputError`.

    The format is recognised from the content (PDF, ZIP-based Word files)
    and the name (HTML); anything else is plain text in ``encoding``
    (``auto`` detects it; see :mod:`.charsets` for the rules).
    """
    return read_file(path, max_bytes=max_bytes, encoding=encoding).text


def read_document(
    path: str | os.PathLike[str], *, max_bytes: int, encoding: str = "utf-8"
) -> tuple[str, bytes]:
    """:func:`read_text`, with the text's UTF-8 encoding (often the file itself)."""
    text, encoded, _ = read_file(path, max_bytes=max_bytes, encoding=encoding)
    return text, encoded


def read_file(
    path: str | os.PathLike[str], *, max_bytes: int, encoding: str = "utf-8"
) -> FileText:
    """:func:`read_document`, with the encoding the text was read in."""
    data = _read_bytes(os.fspath(path), max_bytes)
    return document_text(data, os.fspath(path), max_bytes=max_bytes, encoding=encoding)


def document_text(data: bytes, name: str, *, max_bytes: int, encoding: str) -> FileText:
    """The text of a document's bytes, whose file is called ``name`` (a file,
    or an attachment of an e-mail): PDF, Word, HTML or plain text."""
    name = name.lower()
    if data.startswith(b"%PDF-") or (name.endswith(".pdf") and b"%PDF-" in data[:1024]):
        return FileText(*check_document(_pdf_text(data), max_bytes=max_bytes), "")
    if data.startswith(b"PK\x03\x04"):
        return FileText(*check_document(_docx_text(data, name), max_bytes=max_bytes), "")
    text, used, is_utf8 = _decode(data, encoding)
    if name.endswith(HTML_SUFFIXES) or _looks_like_html(text):
        text = html_text(text)
    elif is_utf8:
        return FileText(*check_document(text, max_bytes=max_bytes, encoded=data), used)
    return FileText(*check_document(text, max_bytes=max_bytes), used)


def check_text(text: str, *, max_bytes: int) -> str:
    """``text`` if PostgreSQL can store it and it is worth loading; else InputError."""
    return check_document(text, max_bytes=max_bytes)[0]


def check_document(
    text: str, *, max_bytes: int, encoded: bytes | None = None
) -> tuple[str, bytes]:
    """:func:`check_text`, with the text's UTF-8 encoding (``encoded``, if given, is it)."""
    if encoded is None:
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError as error:
            offset = len(text[: error.start].encode("utf-8", "replace"))
            raise InputError("invalid-encoding", f"contains a lone surrogate "
                             f"U+{ord(text[error.start]):04X} at byte {offset}, which is not "
                             "valid Unicode text", offset) from None  # fmt: skip
    nul = encoded.find(b"\x00")  # in UTF-8, the byte 0 is U+0000 and nothing else
    if nul >= 0:
        raise InputError("nul-bytes", _nul_message(nul), nul)
    if len(encoded) > max_bytes:
        raise InputError("too-large",
                         f"its text is {len(encoded):,} bytes, over --max-bytes {max_bytes:,}")
    if not text or text.isspace():
        raise InputError("empty", "no text (empty or only whitespace)")
    return text, encoded


def _nul_message(offset: int) -> str:
    return (f"NUL byte at offset {offset}: PostgreSQL text cannot hold NUL characters "
            "(is it a binary file or UTF-16 without a byte order mark?)")


# -- reading -----------------------------------------------------------------------


def _read_bytes(path: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular file; errors become InputError."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise input_error(path, error) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InputError("not-a-file", f"{kind} (FIFO, socket or device files are not read)")
    if info.st_size > max_bytes:
        raise InputError("too-large", f"{info.st_size:,} bytes, over --max-bytes {max_bytes:,}")
    try:
        # O_NONBLOCK: if the file was swapped for a FIFO since the stat, open
        # must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise input_error(path, error) from None
    with os.fdopen(fd, "rb", buffering=0) as file:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError("not-a-file", "not a regular file")
            # Read the size the stat saw, then whatever the file has grown by:
            # read(max_bytes + 1) would allocate the whole limit every time.
            data = file.read(info.st_size + 1)
            if len(data) > info.st_size:
                data += file.read(max_bytes + 1 - len(data))
        except OSError as error:
            raise input_error(path, error) from None
    if len(data) > max_bytes:
        raise InputError("too-large", f"grew over --max-bytes {max_bytes:,} while being read")
    if not data:
        raise InputError("empty", "an empty file (0 bytes)")
    return data


def input_error(path: str, error: OSError) -> InputError:
    """The InputError for an OSError met while opening or reading ``path``."""
    if error.errno == errno.ENOENT:
        if os.path.islink(path):
            return InputError("not-found", f"dangling symbolic link to {os.readlink(path)}")
        return InputError("not-found", "no such file")
    if error.errno == errno.ELOOP:
        return InputError("symlink-loop", "too many levels of symbolic links (a link loop)")
    if error.errno in (errno.EACCES, errno.EPERM):
        return InputError("unreadable", "permission denied")
    if error.errno == errno.ENOTDIR:
        return InputError("not-found", "a part of the path is not a directory")
    return InputError("unreadable", f"cannot read: {error.strerror or error}")


# -- plain text ----------------------------------------------------------------------


def _binary_kind(data: bytes) -> str | None:
    """What binary format ``data`` is in, or None if it may be text."""
    if data.startswith(_MAGIC_PREFIXES):
        return next(kind for magic, kind in _MAGIC.items() if data.startswith(magic))
    head = data[:_SNIFF_BYTES]
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if b"\x00" in head and controls >= _BINARY_CONTROL_SHARE * len(head):
        return "binary data (many NUL and control bytes)"
    if controls:
        # Control bytes in what is not UTF-8: random or compressed data (text
        # in a legacy encoding has none; UTF-16 without a byte order mark is
        # ASCII and NULs, valid UTF-8, and gets its own message).
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            return "binary data (control bytes, and not UTF-8)"
    return None


def _decode(data: bytes, encoding: str) -> Decoded:
    """Text from bytes by the rules of :mod:`.charsets`; binary data and NUL
    bytes are refused first (but UTF-16 is recognised by its zero bytes)."""
    if not data.startswith(BOM_PREFIXES):
        wide = encoding != "auto" and codec_name(encoding).startswith(("utf-16", "utf-32"))
        sniffed = utf16_without_bom(data) if encoding == "auto" else None
        if not wide and sniffed is None:
            kind = _binary_kind(data)
            if kind is not None:
                raise InputError("binary", f"{kind}, not text")
            nul = data.find(b"\x00")
            if nul >= 0:
                raise InputError("nul-bytes", _nul_message(nul), nul)
    try:
        return decode(data, encoding)
    except Undecodable as error:
        if error.offset is None:
            raise InputError("invalid-encoding",
                             "could not detect the encoding; use --encoding NAME") from None
        hint = ("use --encoding NAME (e.g. cp1252, latin-1) or --encoding auto"
                if error.encoding == "utf-8" else "check --encoding, or use --encoding auto")
        raise InputError("invalid-encoding", f"invalid {error.encoding} at byte {error.offset}"
                         f" (0x{error.byte.hex()}): {hint}", error.offset) from None


# -- HTML ------------------------------------------------------------------------------

_INVISIBLE = ("script", "style", "noscript", "template", "head > meta", "svg")
_BLOCKS = ("address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
           "figcaption", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
           "li", "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "title",
           "tr", "ul")  # fmt: skip


def _looks_like_html(text: str) -> bool:
    start = text[:1000].lstrip()[:20].lower()
    return start.startswith(("<!doctype html", "<html"))


def html_text(markup: str) -> str:
    """The visible text of an HTML page: no tags, scripts or styles.

    Block elements end lines, so words of adjacent paragraphs stay apart,
    while inline markup (``<b>w</b>ord``) does not split words.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(markup, "lxml")
    for element in soup.select(", ".join(_INVISIBLE)):
        element.decompose()
    for element in soup.find_all(_BLOCKS):
        element.insert_before("\n")
        element.insert_after("\n")
    lines = (line.strip() for line in soup.get_text().splitlines())
    return "\n".join(line for line in lines if line)


# -- PDF ---------------------------------------------------------------------------------


def _pdf_text(data: bytes) -> str:
    import pypdf
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)  # its warnings are not ours
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise InputError("encrypted-pdf", "an encrypted PDF that needs a password")
        pages = [page.extract_text() or "" for page in reader.pages]
    except InputError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            AssertionError, RecursionError, OverflowError, ZeroDivisionError,
            NotImplementedError) as error:  # fmt: skip
        if "decrypt" in str(error).lower() or "password" in str(error).lower():
            raise InputError("encrypted-pdf", f"an encrypted PDF: {error}") from None
        raise InputError("corrupt-pdf", f"cannot parse the PDF: {_first_line(error)}") from None
    if not pages:
        raise InputError("corrupt-pdf", "cannot parse the PDF: no pages found")
    text = "\n".join(pages)
    if not text.strip():
        raise InputError("no-text", f"a PDF of {len(pages)} page(s) without a text layer "
                         "(scanned images need OCR first)")  # fmt: skip
    return text


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


# -- Word ----------------------------------------------------------------------------------


def _docx_text(data: bytes, name: str) -> str:
    """The paragraphs and table cells of a .docx file, in document order."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            is_docx = "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        if name.endswith(DOCX_SUFFIXES):
            raise InputError("corrupt-docx", f"cannot parse the Word file: {error}") from None
        raise InputError("binary", "a damaged ZIP archive, not text") from None
    if not is_docx:
        if name.endswith(DOCX_SUFFIXES):
            raise InputError("corrupt-docx", "not a Word file: word/document.xml is missing")
        raise InputError("binary", "a ZIP archive (not a .docx Word file), not text")
    import docx
    from docx.document import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document: Document = docx.Document(io.BytesIO(data))
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                lines.append(block.text)
            elif isinstance(block, Table):
                lines.extend(_table_lines(block))
    except Exception as error:  # python-docx raises anything a broken file provokes
        message = f"cannot parse the Word file: {_first_line(error)}"
        raise InputError("corrupt-docx", message) from None
    text = "\n".join(lines)
    if not text.strip():
        raise InputError("no-text", "a Word file without text")
    return text


def _table_lines(table: Any) -> list[str]:
    lines = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            if not cells or cell.text != cells[-1]:  # merged cells repeat their text
                cells.append(cell.text)
        lines.append("\t".join(cells))
    return lines
