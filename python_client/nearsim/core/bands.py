"""The band layout of the bucket index (multi-index hashing).

The 64 bits of a fingerprint are cut into ``bands`` contiguous bands, most
significant first; the first ``64 % bands`` bands get one bit more.  If two
fingerprints differ in at most k bits, then with ``k = bands * r + a``
(``0 <= a < bands``) one of the first ``a + 1`` bands differs in at most r
bits, or one of the others in at most ``r - 1``: otherwise the bands would
add up to more than k.  A search probes every value within that radius of
the query's band in each band's index, then checks the full distance, so it
returns exactly the rows within k bits.

The server computes band values and probes in C (``extension/src/bands.c``,
whose limits ``extension/src/nearsim.h`` declares); this module holds the
same rules for the code that chooses and checks layouts, and a test ties the
two together.
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
    """``bands``, or BandsError if the bucket index has no such layout."""
    if not MIN_BANDS <= bands <= MAX_BANDS:
        raise BandsError(f"bands must be between {MIN_BANDS} and {MAX_BANDS}, not {bands}")
    return bands


def default_bands(rows: int) -> int:
    """Number of bands for a table of ``rows`` documents.

    Fewer, wider bands mean more probes per search and fewer candidates per
    probe.  ``make bench`` measures both costs; with them, 5 bands are best
    below 30,000 rows, 4 bands below 750,000 (they tie with 3 at 500,000),
    3 beyond (1.3x faster than 4 at one million rows, k = 6).

    >>> default_bands(1_000), default_bands(100_000), default_bands(10_000_000)
    (5, 4, 3)
    """
    if rows < 30_000:
        return 5
    if rows < 750_000:
        return 4
    return 3


def band_width(bands: int, band: int) -> int:
    """Width in bits of band ``band`` (0 = most significant) of ``bands``."""
    return BITS // bands + (1 if band < BITS % bands else 0)


def band_radius(max_distance: int, bands: int, band: int) -> int:
    """Bits within which band ``band`` is probed for a search within ``max_distance``.

    -1 means the band needs no probe at all.
    """
    radius = max_distance // bands
    return radius if band <= max_distance % bands else radius - 1
