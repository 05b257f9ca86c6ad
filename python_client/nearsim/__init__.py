"""nearsim: near-duplicate documents in PostgreSQL.

Fingerprints computed here are bit-identical to the database's
``simhash(text)`` and ``simhash(text, profile)``, so a client can compute
them and store them next to the server's::

    >>> import nearsim
    >>> nearsim.simhash("In the beginning God created the heaven and the earth.")
    -8749841501232166640
    >>> a = nearsim.simhash("the quick brown fox jumps over the lazy dog")
    >>> b = nearsim.simhash("the quick brown fox jumped over the lazy dog")
    >>> nearsim.hamming(a, b) <= 32
    True

and, with a database (see :func:`connect` for where it is found)::

    conn = nearsim.connect()
    docs = nearsim.DocumentTable(conn, "docs")
    for match in docs.similar("text of a new document", max_distance=6):
        print(match.key, match.distance)
    nearsim.load(["letters/"], table="letters", create=True)
    nearsim.dedup(conn, "docs", nearsim.DedupOptions(keep=nearsim.Keep.parse("longest")),
                  output="corpus.jsonl")

The package has three rooms: :mod:`nearsim.core` (pure computation, also
installed into the server), :mod:`nearsim.server` (the extension's
PL/Python side) and :mod:`nearsim.client` (connections, tables, loading,
the command line).  The client names below are imported on first use, so
``import nearsim`` needs no database driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.bits import bits, from_bits, hamming
from .core.fingerprint import PROFILE, shingles
from .core.profiles import Profile, ProfileError, simhash, simhash_many
from .core.survivors import Keep
from .core.text import tokens

__version__ = "0.4.0"

if TYPE_CHECKING:
    from .client.connect import connect
    from .client.dedup import DedupOptions, dedup
    from .client.documents import DocumentTable
    from .client.loader import load_paths as load

# Client names, imported when first used: the server imports this package
# too and has no psycopg.
_CLIENT = {
    "connect": ("nearsim.client.connect", "connect"),
    "DocumentTable": ("nearsim.client.documents", "DocumentTable"),
    "load": ("nearsim.client.loader", "load_paths"),
    "dedup": ("nearsim.client.dedup", "dedup"),
    "DedupOptions": ("nearsim.client.dedup", "DedupOptions"),
}


def __getattr__(name: str) -> Any:
    if name in _CLIENT:
        from importlib import import_module

        module, attribute = _CLIENT[name]
        value = getattr(import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nearsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CLIENT})


__all__ = [
    "PROFILE",
    "DedupOptions",
    "DocumentTable",
    "Keep",
    "Profile",
    "ProfileError",
    "__version__",
    "bits",
    "connect",
    "dedup",
    "from_bits",
    "hamming",
    "load",
    "shingles",
    "simhash",
    "simhash_many",
    "tokens",
]
