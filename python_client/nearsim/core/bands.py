"""The band layout of the rotation index (multi-index hashing).

The 64 bits of a fingerprint are cut into ``bands`` contiguous bands, most
significant first; the first ``64 % bands`` bands get one bit more.  If two
fingerprints differ in at most k bits, then with ``k = bands * r + a``
(``0 <= a < bands``) one of the first ``a + 1`` bands differs in at most r
bits, or one of the others in at most ``r - 1``: otherwise the bands would
add up to more than k.  A search probes every value within that radius of
the query's band in each band's index, then checks the full distance, so it
returns exactly the rows within k bits.

Each band has a btree over the fingerprint rotated so that the band comes
first (``nearsim_rotate(si, band_start)``, the rotation index).  A search
enumerates the values of the band's first p bits within its radius and reads
each as a range of keys; p is chosen at query time from the index's size
(``extension/src/search.c``), so one layout serves a table of any size.

The server computes band values, rotations and probes in C (``extension/
src/bands.c``, ``search.c``, whose limits ``extension/src/nearsim.h``
declares); this module holds the same rules for the code that chooses and
checks layouts, and a test ties the two together.
"""

from __future__ import annotations

from .bits import BITS

MIN_BANDS = 3
"""Fewest bands: a band of at most 22 bits fits a PostgreSQL integer."""

MAX_BANDS = 16
"""Most bands: narrower bands only add index probes."""


class BandsError(ValueError):
    """A number of bands outside ``MIN_BANDS`` to ``MAX_BANDS``."""


def check_bands(bands: int) -> int:
    """``bands``, or BandsError if the rotation index has no such layout."""
    if not MIN_BANDS <= bands <= MAX_BANDS:
        raise BandsError(f"bands must be between {MIN_BANDS} and {MAX_BANDS}, not {bands}")
    return bands


DEFAULT_BANDS = MIN_BANDS
"""Bands of a new table, whatever its size.

Fewer, wider bands mean fewer candidates; a search of a rotation index
chooses how many of a band's bits to enumerate from the index's present
size, so 3 bands serve small tables with few probes and large ones with few
candidates (``make bench`` measures it from 1,000 to 10 million rows).
"""


def default_bands(rows: int) -> int:
    """Number of bands for a table of ``rows`` documents: DEFAULT_BANDS at any size.

    >>> default_bands(1_000), default_bands(100_000), default_bands(10_000_000)
    (3, 3, 3)
    """
    return DEFAULT_BANDS


def band_width(bands: int, band: int) -> int:
    """Width in bits of band ``band`` (0 = most significant) of ``bands``."""
    return BITS // bands + (1 if band < BITS % bands else 0)


def band_start(bands: int, band: int) -> int:
    """The first bit of band ``band`` (0 = most significant): its rotation index's shift.

    >>> [band_start(3, band) for band in range(3)]
    [0, 22, 43]
    """
    return sum(band_width(bands, earlier) for earlier in range(band))


def band_radius(max_distance: int, bands: int, band: int) -> int:
    """Bits within which band ``band`` is probed for a search within ``max_distance``.

    -1 means the band needs no probe at all.
    """
    radius = max_distance // bands
    return radius if band <= max_distance % bands else radius - 1
