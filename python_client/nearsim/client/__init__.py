"""What runs on a user's machine: connecting, tables of documents, loading, the CLI.

- :mod:`~nearsim.client.connect`: which database, connecting, the extension check;
- :mod:`~nearsim.client.documents`: an enabled table and its questions
  (similar, pairs, clusters, stats);
- :mod:`~nearsim.client.loader`: bulk loading (``nearsim-load``), fed by
  :mod:`~nearsim.client.sources` (files, directories, records) and
  :mod:`~nearsim.client.extract` (text out of HTML, PDF, Word...), written by
  :mod:`~nearsim.client.writers` (one way to declare the fingerprints and
  to stage a batch, for every writer);
- :mod:`~nearsim.client.dedup`: the survivors of a table's groups out
  (``nearsim dedup``), to files by :mod:`~nearsim.client.records_out`;
- :mod:`~nearsim.client.kept_fields`: a record's other fields, as the loader keeps them;
- :mod:`~nearsim.client.report`: the side-by-side HTML page of ``nearsim report``;
- :mod:`~nearsim.client.output`: plain-text tables and storable names for the commands;
- :mod:`~nearsim.client.samples`: the sample corpus (the King James Bible);
- :mod:`~nearsim.client.cli`: the ``nearsim`` and ``nearsim-load`` commands,
  which only parse arguments and call the modules above.

The client builds on :mod:`nearsim.core` and never imports server code.
"""
