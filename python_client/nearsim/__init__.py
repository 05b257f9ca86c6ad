"""nearsim: near-duplicate documents in PostgreSQL.

The fingerprint functions here compute exactly what the database's
``simhash(text)`` computes (they are the same code), so fingerprints made by
a client can be stored next to fingerprints made by the server.
"""

from .fingerprint import (
    PROFILE,
    bits,
    from_bits,
    hamming,
    shingles,
    simhash,
    simhash_many,
    tokens,
)

__version__ = "0.2.0"

__all__ = [
    "PROFILE",
    "__version__",
    "bits",
    "from_bits",
    "hamming",
    "shingles",
    "simhash",
    "simhash_many",
    "tokens",
]
