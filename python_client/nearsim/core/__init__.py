"""The pure core of nearsim: what clients and the server compute alike.

Installed on clients with the package and into the server with the
extension, it imports neither a database driver nor PL/Python:

- :mod:`~nearsim.core.text`: normalisation and word tokens (every profile);
- :mod:`~nearsim.core.fingerprint`: the default fingerprint ``default/1``;
- :mod:`~nearsim.core.profiles`: other feature profiles, and ``simhash``
  with any profile;
- :mod:`~nearsim.core.bits`: fingerprints as numbers and their distance;
- :mod:`~nearsim.core.bands`: the rotation index's band layout;
- :mod:`~nearsim.core.pairs`: all pairs within a distance, and groups;
- :mod:`~nearsim.core.measures`: exact similarity of texts, MinHash;
- :mod:`~nearsim.core.calibration`: what a distance means in similarity;
- :mod:`~nearsim.core.registry`: the registry row of an enabled table;
- :mod:`~nearsim.core.soundex` and :mod:`~nearsim.core.legacy`: seed 000's
  Soundex and its SI v1 fingerprint, for comparison;
- ``data/``: calibration tables and stop-word lists.
"""
