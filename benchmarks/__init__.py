"""nearsim's benchmarks, run from the repository root as ``python -m benchmarks.<module>``.

Three commands: ``run`` measures speed (its sections: ``throughput``, 1 and 2,
``simhash`` in the database and in the client; ``scan``, 3, the Hamming filter
in a sequential scan; ``search``, 4, search latency through the rotation index
on the document sets of ``docsets``, which also reports their storage, 7;
``layouts``, 5, band layouts; ``allpairs``, 6, ``nearsim_pairs``;
``triggers``, 8, writes into an enabled table against a plain one;
``loading``, 9, ``nearsim-load`` against a plain ``COPY``; ``peers``, 10,
datasketch, pg_trgm and pgvector; and
``common``, what they share); ``quality`` measures detection quality on the
evaluation corpus of ``corpus`` against the exact ground truth of ``truth``;
``docs`` writes docs/BENCHMARKS.md and its figures from the results of both.
"""
