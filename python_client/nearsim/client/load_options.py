"""The options of a load (:class:`LoadOptions`), shared by the loader and its rooms."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LoadOptions:
    max_bytes: int = DEFAULT_MAX_BYTES
    encoding: str = "utf-8"
    batch_rows: int = 2000
    batch_bytes: int = 32 * 1024 * 1024
    workers: int | None = None  # default: one per CPU
    server_side: bool = False  # let the database compute the fingerprints
    profile: str | None = None  # fingerprint profile; by default the table's
    replace: bool = False  # overwrite documents whose key is stored from another source
    # A table of the user's own: its key and text columns (by default the
    # ones it is enabled with), and (record field, column) pairs for others.
    key_column: str | None = None
    text_column: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    # Near-duplicates of stored documents (or of earlier ones of the same
    # load) within near_distance bits: None (written as any other), "error"
    # (a near-duplicate failure), "skip" (left out, counted) or "record"
    # (written, and linked in <table>_nearsim_links).
    on_near_duplicate: str | None = None
    near_distance: int = 3
