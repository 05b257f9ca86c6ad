"""Files named to ``nearsim check``, ``similar --file`` and ``compare``, read as
``nearsim-load`` reads them.

A document file is one document; an e-mail file (:mod:`.mail`) is its
messages and attachments, named as the loader keys them but from the name
given (``drafts/thread.eml#2:contract.pdf``).  Such a name also reads the
one part: ``nearsim compare thread.eml#2:contract.pdf contract.pdf``.  A
mail file named alone, where one document is wanted, stands for its first
message.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from .charsets import override_note
from .extract import FileText, InputError, check_document, read_file
from .mail import mail_documents, mail_kind
from .output import storable
from .sources import file_key

__all__ = ["NamedRead", "is_file_name", "named_documents", "read_named"]


class NamedRead(NamedTuple):
    """A document of a file named: its name, its text or why it has none, and what
    to tell about its encoding (a file valid UTF-8 read against --encoding)."""

    name: str
    read: FileText | InputError
    note: str | None = None


def named_documents(
    name: str, *, max_bytes: int, encoding: str = "utf-8"
) -> Iterator[NamedRead]:
    """Each document of the file ``name`` (or of a part it names), as nearsim-load
    reads it."""
    path, part = _split(name)
    kind = mail_kind(path) if os.path.isfile(path) else None
    if kind is None:
        try:
            read = read_file(name, max_bytes=max_bytes, encoding=encoding)
        except InputError as error:
            yield NamedRead(name, error)
        else:
            yield NamedRead(name, read, override_note(encoding, read.encoding))
        return
    key = file_key(path)
    found = False
    for document in mail_documents(path, key, kind, max_bytes=max_bytes):
        named = path + storable(document.key)[len(key):]
        if part is not None and named != name:
            continue
        found = True
        if document.error is not None:
            yield NamedRead(named, document.error)
            continue
        try:
            text, encoded = check_document(document.text, max_bytes=max_bytes)
        except InputError as error:
            yield NamedRead(named, error)
        else:
            yield NamedRead(named, FileText(text, encoded, document.encoding))
    if part is not None and not found:
        yield NamedRead(name, InputError("not-found", f"{path} has no part {part!r}"))


def read_named(name: str, *, max_bytes: int, encoding: str = "utf-8") -> NamedRead:
    """The one document ``name`` stands for (a mail file: its first message), its
    ``read`` a FileText; :class:`InputError` if it cannot be read."""
    for named in named_documents(name, max_bytes=max_bytes, encoding=encoding):
        if isinstance(named.read, InputError):
            raise named.read
        return named
    raise InputError("empty", "no documents in it")


def is_file_name(name: str) -> bool:
    """Whether ``name`` names a file (or a part of an e-mail file), not a stored key."""
    path, part = _split(name)
    return os.path.exists(name) or (part is not None and os.path.isfile(path)
                                    and mail_kind(path) is not None)  # fmt: skip


def _split(name: str) -> tuple[str, str | None]:
    """``name`` as the file and the part it names (``thread.eml``, ``#2:contract.pdf``),
    if it is not itself a file; else (name, None)."""
    if os.path.exists(name) or "#" not in name:
        return name, None
    cut = name.find("#")
    while cut >= 0:
        if os.path.isfile(name[:cut]):
            return name[:cut], name[cut:]
        cut = name.find("#", cut + 1)
    return name, None
