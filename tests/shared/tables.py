"""Enabled tables for the tests that compare nearsim's answers with a reference."""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg import sql


def enabled_table(conn: psycopg.Connection, table: str, bodies: Mapping[int, str | None],
                  profile: str | None = None) -> None:
    """A table ``(id bigint, body text)``, enabled (with ``profile``, else the default
    one) before ``bodies`` are copied in, as a user loads one."""
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(
        sql.Identifier(table)))
    if profile is None:
        conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
    else:
        conn.execute("SELECT nearsim_enable(%s, 'body', profile => %s)", [table, profile])
    with conn.cursor().copy(sql.SQL("COPY {} (id, body) FROM STDIN").format(
            sql.Identifier(table))) as copy:
        for key, body in bodies.items():
            copy.write_row((key, body))
