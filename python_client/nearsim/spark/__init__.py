"""nearsim on Apache Spark: the answers of the extension's table functions, on a cluster.

``fingerprints`` adds SQL ``simhash(text, profile)`` to a DataFrame,
``pairs`` and ``verified_pairs`` are ``nearsim_pairs`` and
``nearsim_pairs_verified``, ``components`` and ``clusters`` are
``nearsim_clusters(tbl, k, 'components')``, ``pivots`` and ``clusters(...,
method="pivot")`` ``nearsim_clusters(tbl, k, 'pivot')``; ``read_documents`` and
``write_parquet`` read and write files, ``write_table`` writes rows with
their fingerprints into a nearsim-enabled table by COPY from the executors
(appending, skipping or replacing stored keys).
docs/SPARK.md tells how to run it.
Needs ``pip install 'nearsim[spark]'`` and a Java runtime.
"""

from __future__ import annotations

from .database import ON_CONFLICT, WriteError, Written, write_table
from .documents import FORMATS, good_documents, read_documents, write_parquet
from .fingerprinting import fingerprints, simhash_column
from .graph import components, group_components, star_components
from .grouping import METHODS, Summary, clusters, dedup, verified_clusters
from .pivots import group_pivots, pivots
from .runtime import session, stop
from .search import GroupPairs, hamming_groups, pairs, verified_groups, verified_pairs

__all__ = [
    "FORMATS",
    "METHODS",
    "ON_CONFLICT",
    "GroupPairs",
    "Summary",
    "WriteError",
    "Written",
    "clusters",
    "components",
    "dedup",
    "fingerprints",
    "good_documents",
    "group_components",
    "group_pivots",
    "hamming_groups",
    "pairs",
    "pivots",
    "read_documents",
    "session",
    "simhash_column",
    "star_components",
    "stop",
    "verified_clusters",
    "verified_groups",
    "verified_pairs",
    "write_parquet",
    "write_table",
]
