"""What runs inside PostgreSQL: the PL/Python side of the nearsim extension.

Every PL/Python function of ``extension/sql/nearsim.sql`` calls one function
of :mod:`nearsim.server.functions` with ``plpy`` and its arguments; the
modules behind it work through :class:`nearsim.server.database.Session`:

- :mod:`~nearsim.server.catalog`: tables, their keys and columns, the
  registry, profiles the server can compute, acting as a table's owner;
- :mod:`~nearsim.server.ddl`: the rotation indexes, trigger and search
  functions nearsim generates for an enabled table;
- :mod:`~nearsim.server.maintenance`: enable, disable, verify, rebuild;
- :mod:`~nearsim.server.search`: all pairs, clusters and verified search.

Nothing here is imported by client code, and nothing here imports a client
library (psycopg, click...): the server's Python has only what
``scripts/install.sh`` installs for it.
"""
