"""E-mail read as a reviewer reads it: .eml, .mbox and Outlook .msg files.

A message is a document of its decoded text body (the plain-text
alternative where there is one, else the HTML one as text), without its
headers; the headers a reviewer needs come along as fields
(:data:`HEADER_FIELDS`), which ``nearsim-load --column`` stores in a table
of your own.  Each attachment is a document of its own, read by the same
extractors as a file (PDF, Word, HTML, text; an attached message is read as
a message), keyed by its message's key, its place among the message's
attachments and its file name::

    /mail/thread.eml                      the message
    /mail/thread.eml#2:contract.pdf       its second attachment
    /mail/box.mbox#3                      the third message of an mbox
    /mail/box.mbox#3#1:memo.docx          that message's first attachment
    /mail/fwd.eml#1:original.eml#2:a.pdf  an attachment of an attached message

Attachments that are images, audio or video are passed over (no text to
read); their places still count, so keys do not move.  A message without a
text body but with attachments is not a document (its attachments are).

A text part's declared charset decides its encoding (``us-ascii`` and
``iso-8859-1`` read as cp1252, as mail readers do); a part without one, or
whose bytes its charset cannot read, is detected as a file with
``--encoding auto`` is (:mod:`.charsets`).

Mail is recognised by its suffix (:data:`MAIL_SUFFIXES`) or, for a file
without the suffix of a document format (such as Maildir's, which end in a
host name or flags), by content: RFC 822 headers at its start (an mbox
starts with a ``From`` line).
"""

from __future__ import annotations

import email
import email.policy
import mailbox
import os
import re
import stat
from collections.abc import Iterator
from email.message import EmailMessage, Message
from typing import Any, NamedTuple

from .charsets import Decoded, Undecodable, codec_name, decode
from .extract import (
    FileText,
    InputError,
    check_document,
    document_text,
    html_text,
    input_error,
)  # fmt: skip

__all__ = ["HEADER_FIELDS", "MAIL_SUFFIXES", "MailDocument", "mail_documents", "mail_kind"]

MAIL_SUFFIXES = {".eml": "eml", ".mbox": "mbox", ".mbx": "mbox", ".msg": "msg"}

HEADER_FIELDS = (("from", "From"), ("to", "To"), ("cc", "Cc"), ("bcc", "Bcc"),
                 ("reply_to", "Reply-To"), ("date", "Date"), ("subject", "Subject"),
                 ("message_id", "Message-ID"), ("in_reply_to", "In-Reply-To"),
                 ("references", "References"))  # fmt: skip
"""The fields of a message (and of its attachments) named after its headers:
(field, header).  ``date`` is ISO 8601 (as a ``timestamptz`` column reads
it), None if the header cannot be read as a date.  ``headers`` holds all of
them as a JSON object, by header name, as written (the date too);
attachments also have ``attachment`` (the file name), ``content_type``
and ``message`` (the key of the message it is attached to)."""

MAX_DEPTH = 3  # messages attached to messages attached to messages...

_SKIPPED_TYPES = ("image", "audio", "video")
_HEADER_LINE = re.compile(rb"[!-9;-~]+:")
_KNOWN = re.compile(rb"(?i)(from|to|date|subject|message-id|received|return-path|mime-version"
                    rb"|delivered-to|cc|reply-to|sender|x-[!-9;-~]*):")  # fmt: skip
_SNIFF_BYTES = 4096
_CHARSET_AS_READ = {"ascii": "cp1252", "iso8859-1": "cp1252"}  # as mail readers do (WHATWG)
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f#]+")


class Attachment(NamedTuple):
    """An attachment's bytes, to be read as a file of its name would be (by the
    loader's workers: the extractors are the costly part of reading mail)."""

    data: bytes
    name: str
    content_type: str
    charset: str | None  # declared, for a text part

    def read(self, max_bytes: int) -> FileText:
        """Its text, checked as any document's; :class:`InputError` if it has none."""
        if len(self.data) > max_bytes:
            raise InputError("too-large", f"an attachment of {len(self.data):,} bytes, over"
                             f" --max-bytes {max_bytes:,}")  # fmt: skip
        name = self.name
        if self.content_type.startswith("text/") and self.charset:
            text = declared(self.data, self.charset)
            body = html_text(text.text) if self.content_type == "text/html" else text.text
            return FileText(*check_document(body, max_bytes=max_bytes), text.encoding)
        if self.content_type == "text/html" and not name.lower().endswith((".html", ".htm")):
            name += ".html"
        return document_text(self.data, name, max_bytes=max_bytes, encoding="auto")


class MailDocument(NamedTuple):
    """A message or attachment: its key, text and fields, or why it cannot be read;
    or an attachment still to be read (``attachment``, with no text yet)."""

    key: str
    text: str
    encoding: str  # "" for PDF and Word attachments
    fields: dict[str, Any]
    error: InputError | None = None
    attachment: Attachment | None = None

    def read(self, max_bytes: int) -> MailDocument:
        """The document with its attachment read: its text, or the error."""
        if self.attachment is None:
            return self
        try:
            text, _, encoding = self.attachment.read(max_bytes)
        except InputError as error:
            return self._replace(error=error, attachment=None)
        return self._replace(text=text, encoding=encoding, attachment=None)


def mail_kind(path: str) -> str | None:
    """``eml``, ``mbox`` or ``msg`` if ``path`` is an e-mail file, else None."""
    name = os.path.basename(path)
    kind = MAIL_SUFFIXES.get(os.path.splitext(name)[1].lower())
    if kind is not None:
        return kind
    if not _sniffable(name):
        return None
    try:
        with open(path, "rb") as file:
            head = file.read(_SNIFF_BYTES)
    except OSError:
        return None  # the reader reports it
    return sniff(head)


_DOCUMENT_SUFFIXES = frozenset((
    ".txt", ".text", ".md", ".markdown", ".rst", ".html", ".htm", ".xhtml", ".xml", ".pdf",
    ".docx", ".docm", ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".parquet"))
"""Suffixes that say what a file is: their files are never taken for mail."""


def _sniffable(name: str) -> bool:
    """A name whose suffix does not say what the file is: none, or not a document
    format's (Maildir's names end in a host name, or in ``:2,S`` and such)."""
    return os.path.splitext(name)[1].lower() not in _DOCUMENT_SUFFIXES


def sniff(head: bytes) -> str | None:
    """``mbox`` or ``eml`` if ``head`` starts as one does, else None."""
    lines = head.split(b"\n")
    kind = "eml"
    if lines[0].startswith(b"From "):
        kind, lines = "mbox", lines[1:]
    headers = known = 0
    for line in lines[:-1]:  # the last may be cut
        line = line.rstrip(b"\r")
        if not line:
            break
        if line[:1] in (b" ", b"\t") and headers:
            continue  # a folded header
        if not _HEADER_LINE.match(line):
            return None
        headers += 1
        known += bool(_KNOWN.match(line))
    return kind if headers >= 2 and known >= 1 else None


def mail_documents(
    path: str, key: str, kind: str, *, max_bytes: int, defer: bool = False
) -> Iterator[MailDocument]:
    """The documents of the mail file at ``path``, keyed from ``key`` (its own).

    Nothing raises: a file or part that cannot be read is a document with
    its error (keyed by the file for the whole file).  With ``defer`` the
    attachments come unread (:attr:`MailDocument.attachment`).
    """
    for document in _mail_documents(path, key, kind, max_bytes):
        yield document if defer else document.read(max_bytes)


def _mail_documents(path: str, key: str, kind: str, max_bytes: int) -> Iterator[MailDocument]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block
            raise InputError("not-a-file", "not a regular file (FIFO, socket or device)")
        if kind == "mbox":
            yield from _mbox(path, key, max_bytes)
        elif kind == "msg":
            yield from _outlook(path, key, max_bytes)
        else:
            yield from _message(_read_mail(path, max_bytes), key, max_bytes)
    except InputError as error:
        yield MailDocument(key, "", "", {}, error)
    except OSError as error:
        yield MailDocument(key, "", "", {}, input_error(path, error))


def _message(data: bytes, key: str, max_bytes: int) -> list[MailDocument]:
    """The documents of one message, all or (if the email package fails on it) none."""
    try:
        message = email.message_from_bytes(data, policy=email.policy.default)
        return list(_documents(message, key, max_bytes, 0))
    except Exception as error:  # the email package raises whatever a broken message provokes
        return [MailDocument(key, "", "", {}, InputError(
            "corrupt-mail", f"cannot parse the message: {_first_line(error)}"))]


OUTLOOK_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""The first bytes of a compound file, the container of an Outlook .msg."""


def _read_mail(path: str, max_bytes: int) -> bytes:
    from .extract import _read_bytes  # the same checks as for any file

    return _read_bytes(path, max_bytes)


def _mbox(path: str, key: str, max_bytes: int) -> Iterator[MailDocument]:
    """The messages of an mbox, read one at a time (each within ``max_bytes``)."""
    with open(path, "rb") as file:
        head = file.read(_SNIFF_BYTES)
    if not head:
        raise InputError("empty", "an empty file (0 bytes)")
    if not head.startswith(b"From ") and sniff(head) == "eml":  # one message, named .mbox
        yield from _message(_read_mail(path, max_bytes), key, max_bytes)
        return
    box = mailbox.mbox(path, factory=None, create=False)
    try:
        keys = box.keys()
        if not keys:
            raise InputError("corrupt-mail", "an mbox without messages (no 'From ' line)")
        for number, message_key in enumerate(keys, 1):
            message_key_text = f"{key}#{number}"
            data = box.get_bytes(message_key)
            if len(data) > max_bytes:
                yield MailDocument(message_key_text, "", "", {}, InputError(
                    "too-large", f"message {number} is {len(data):,} bytes, over --max-bytes"
                    f" {max_bytes:,}"))  # fmt: skip
                continue
            yield from _message(data, message_key_text, max_bytes)
    finally:
        box.close()


def _documents(
    message: Message, key: str, max_bytes: int, depth: int
) -> Iterator[MailDocument]:
    """A message's body and its attachments, as documents."""
    fields = headers_of(message)
    attachments = list(_attachments(message, key, fields, max_bytes, depth))
    try:
        body = _body(message)
    except InputError as error:
        yield MailDocument(key, "", "", fields, error)
    else:
        if body is not None and (body.text.strip() or not attachments):
            yield MailDocument(key, body.text, body.encoding, fields)
        elif not attachments:
            yield MailDocument(key, "", "", fields,
                               InputError("empty", "a message without a text body"))
    yield from attachments


def _body(message: Message) -> Decoded | None:
    """The message's text: its plain-text alternative, else the HTML one as text."""
    if not isinstance(message, EmailMessage):
        return None
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return None
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return None
    decoded = declared(payload, part.get_content_charset())
    if part.get_content_subtype() == "html":
        return Decoded(html_text(decoded.text), decoded.encoding, False)
    return decoded


def declared(data: bytes, charset: str | None) -> Decoded:
    """Bytes of a text part in the charset it declares, if that reads them; else
    detected (:func:`.charsets.decode` with ``auto``)."""
    if charset:
        try:
            name = codec_name(charset)
            name = _CHARSET_AS_READ.get(name, name)
            return Decoded(data.decode(name), name, name == "utf-8")
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return decode(data, "auto")
    except Undecodable as error:
        raise InputError("invalid-encoding", "a text part in no encoding that could be"
                         " detected" if error.offset is None else
                         f"invalid {error.encoding} at byte {error.offset}",
                         error.offset) from None  # fmt: skip


def _attachments(
    message: Message, key: str, fields: dict[str, Any], max_bytes: int, depth: int
) -> Iterator[MailDocument]:
    if not isinstance(message, EmailMessage) or not message.is_multipart():
        return
    for number, part in enumerate(message.iter_attachments(), 1):
        content_type = part.get_content_type()  # parsed at each call: once
        if content_type.partition("/")[0] in _SKIPPED_TYPES:
            continue
        name = attachment_name(part.get_filename(), number)
        part_key = f"{key}#{number}:{name}"
        about = {**fields, "attachment": name, "content_type": content_type, "message": key}
        if content_type == "message/rfc822":
            inner = part.get_payload()
            inner = inner[0] if isinstance(inner, list) and inner else inner
            if isinstance(inner, Message) and depth < MAX_DEPTH:
                for document in _documents(inner, part_key, max_bytes, depth + 1):
                    yield document._replace(fields={**document.fields, "attachment": name,
                                                    "message": key})  # fmt: skip
                continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or not data:
            yield MailDocument(part_key, "", "", about, InputError("empty", "an empty attachment"))
            continue
        yield attachment_document(part_key, data, name, content_type,
                                  part.get_content_charset(), about)


def attachment_document(key: str, data: bytes, name: str, content_type: str,
                        charset: str | None, fields: dict[str, Any]) -> MailDocument:  # fmt: skip
    """An attachment, to be read as a file of its name would be."""
    return MailDocument(key, "", "", fields, attachment=Attachment(data, name, content_type,
                                                                    charset))  # fmt: skip


def attachment_name(filename: str | None, number: int) -> str:
    """An attachment's file name as its key shows it (no control characters or ``#``)."""
    name = _UNSAFE_NAME.sub(" ", os.path.basename((filename or "").replace("\\", "/"))).strip()
    return name or f"attachment-{number}"


def headers_of(message: Message) -> dict[str, Any]:
    """The fields of :data:`HEADER_FIELDS` of a message that has the headers."""
    fields: dict[str, Any] = {}
    written: dict[str, str] = {}
    for field, header in HEADER_FIELDS:
        value = None
        try:
            value = message.get(header)
            text = None if value is None else " ".join(str(value).split())
        except (ValueError, TypeError, IndexError, AttributeError):  # a malformed header
            raw = message.get_all(header, failobj=[""])
            text = " ".join(str(raw[0]).split()) if raw else None
        if text is None:
            continue
        written[header] = text
        fields[field] = text
        if field == "date":
            fields[field] = _iso_date(value)
    fields["headers"] = written
    return fields


def _iso_date(value: Any) -> str | None:
    moment = getattr(value, "datetime", None)
    if moment is None:
        return None
    return str(moment.isoformat())


# -- Outlook ----------------------------------------------------------------------


def _outlook(path: str, key: str, max_bytes: int) -> Iterator[MailDocument]:
    """An Outlook .msg file, read with extract-msg (the ``msg`` extra)."""
    data = _read_mail(path, max_bytes)
    if not data.startswith(OUTLOOK_MAGIC):  # known without the package
        raise InputError("corrupt-mail", "not an Outlook message: no compound file header")
    try:
        import extract_msg  # optional: nearsim[msg] (GPL-3.0, so not a dependency)
    except ImportError:
        raise InputError("needs-package", "reading Outlook .msg files needs extract-msg:"
                         " pip install 'nearsim[msg]'") from None  # fmt: skip
    try:
        message = extract_msg.openMsg(path, delayAttachments=False)
    except Exception as error:  # extract-msg raises whatever a broken file provokes
        raise InputError("corrupt-mail", f"cannot read the Outlook message: {_first_line(error)}"
                         ) from None
    try:
        documents = list(_outlook_documents(message, key, max_bytes, 0))
    except Exception as error:  # as for opening it
        raise InputError("corrupt-mail", f"cannot read the Outlook message:"
                         f" {_first_line(error)}") from None  # fmt: skip
    finally:
        message.close()
    yield from documents


def _outlook_documents(message: Any, key: str, max_bytes: int,
                       depth: int) -> Iterator[MailDocument]:  # fmt: skip
    values = {"From": message.sender, "To": message.to, "Cc": message.cc, "Bcc": message.bcc,
              "Date": message.date, "Subject": message.subject,
              "Message-ID": getattr(message, "messageId", None),
              "In-Reply-To": getattr(message, "inReplyTo", None)}  # fmt: skip
    fields: dict[str, Any] = {}
    written: dict[str, str] = {}
    for field, header in HEADER_FIELDS:
        value = values.get(header)
        if value is None or value == "":
            continue
        written[header] = " ".join(str(value).split())
        fields[field] = value.isoformat() if hasattr(value, "isoformat") else written[header]
    fields["headers"] = written
    attachments: list[MailDocument] = []
    for number, attachment in enumerate(message.attachments, 1):
        name = attachment_name(getattr(attachment, "longFilename", None)
                               or getattr(attachment, "shortFilename", None), number)
        part_key = f"{key}#{number}:{name}"
        about = {**fields, "attachment": name, "message": key,
                 "content_type": getattr(attachment, "mimetype", None)}
        data = attachment.data
        if hasattr(data, "attachments") and depth < MAX_DEPTH:  # an attached message
            attachments += (document._replace(fields={**document.fields, "attachment": name,
                                                      "message": key})
                            for document in _outlook_documents(data, part_key, max_bytes,
                                                               depth + 1))  # fmt: skip
        elif isinstance(data, bytes) and data:
            mimetype = str(about["content_type"] or "")
            if mimetype.split("/")[0] in _SKIPPED_TYPES:
                continue
            attachments.append(attachment_document(part_key, data, name, mimetype, None,
                                                   about))  # fmt: skip
    text = message.body or ""
    encoding = "utf-16"  # Outlook stores its texts as UTF-16
    if not text.strip() and message.htmlBody:
        html = declared(message.htmlBody, None)
        text, encoding = html_text(html.text), html.encoding
    if text.strip() or not attachments:
        try:
            checked, _ = check_document(text, max_bytes=max_bytes)
        except InputError as error:
            yield MailDocument(key, "", "", fields, error)
        else:
            yield MailDocument(key, checked, encoding, fields)
    yield from attachments


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
