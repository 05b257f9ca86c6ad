"""Run a command with the libpq environment (PGHOST, PGPORT, ...) of a DSN.

pg_regress and other PostgreSQL tools read the standard environment
variables rather than a connection string.

    python scripts/with_dsn.py "host=/tmp port=5432 dbname=x" make installcheck
"""

from __future__ import annotations

import os
import sys

from psycopg.conninfo import conninfo_to_dict

ENVIRONMENT = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "port": "PGPORT",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "sslmode": "PGSSLMODE",
}


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(f"usage: {sys.argv[0]} DSN COMMAND [ARG...]")
    params = conninfo_to_dict(sys.argv[1])
    for key, variable in ENVIRONMENT.items():
        if key in params:
            os.environ[variable] = str(params[key])
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
