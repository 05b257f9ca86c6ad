"""nearsim-load and the other commands in databases whose encoding is not UTF-8.

What the database's encoding holds is stored exactly as given, with the
fingerprints of the stored text (computed by the client, or by the server
with --server-side); a document with a character it cannot hold is one
failure, on one line naming the document and the encoding, and the rest of
the load goes on.  An SQL_ASCII database stores the UTF-8 bytes as they are.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql
from psycopg.conninfo import make_conninfo

from nearsim.client.cli import cli
from nearsim.client.documents import DocumentTable
from nearsim.client.loader import LoadOptions, load
from nearsim.client.sources import SourceOptions, iter_inputs

ENCODINGS = ("LATIN1", "EUC_JP", "SQL_ASCII")

TEXTS = {
    "cafe.txt": "Un café crème et un croissant doré, servis chauds au comptoir du matin.\n",
    "euro.txt": "Le menu du jour coûte 12 € avec le dessert et le café compris ce midi.\n",
    "japanese.txt": "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。\n",
    "emoji.txt": "The launch went well 🚀 and the whole team cheered loudly afterwards.\n",
    # Python's euc_jp codec encodes U+00A5; PostgreSQL's EUC_JP cannot hold it
    "yen.txt": "The ticket cost ¥ 500 at the kiosk near the north exit of the station.\n",
    # PostgreSQL's EUC_JP takes U+00A6 but gives another character back
    "broken-bar.txt": "A broken bar ¦ is not the vertical line | in most of the fonts today.\n",
}
# The first character of each file that each database cannot store exactly.
UNSTORABLE = {
    "LATIN1": {"euro.txt": "€", "japanese.txt": "吾", "emoji.txt": "🚀"},
    "EUC_JP": {"euro.txt": "€", "emoji.txt": "🚀", "yen.txt": "¥", "broken-bar.txt": "¦"},
    "SQL_ASCII": {},
}


@pytest.fixture(scope="module")
def databases(dsn: str) -> Iterator[dict[str, str]]:
    """A database in each of ENCODINGS (C collation), with the extension: their DSNs."""
    made: dict[str, str] = {}
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for encoding in ENCODINGS:
                name = f"nearsim_encoding_{encoding.lower()}"
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))
                conn.execute(sql.SQL(
                    "CREATE DATABASE {} ENCODING {} LC_COLLATE 'C' LC_CTYPE 'C'"
                    " TEMPLATE template0").format(sql.Identifier(name), sql.Literal(encoding)))
                made[encoding] = make_conninfo(dsn, dbname=name)
        for database in made.values():
            with psycopg.connect(database, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION nearsim CASCADE")
        yield made
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for database in made.values():
                name = psycopg.conninfo.conninfo_to_dict(database)["dbname"]
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(str(name))))


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def utf8(database: str) -> psycopg.Connection[Any]:
    """A connection of the test's own that reads texts as UTF-8."""
    return psycopg.connect(database, autocommit=True, client_encoding="UTF8")


def stored(database: str, table: str) -> dict[str, tuple[str, bytes, bytes]]:
    """key -> (text, its bytes as UTF-8 by the server, content hash)."""
    with utf8(database) as conn:
        return {key: (body, bytes(raw), bytes(digest)) for key, body, raw, digest in conn.execute(
            sql.SQL("SELECT key, body, pg_catalog.convert_to(body, 'UTF8'), content_hash"
                    " FROM {}").format(sql.Identifier(table)))}


def assert_fingerprints_clean(database: str, table: str) -> None:
    """Every stored fingerprint is the server's simhash of the stored text."""
    with utf8(database) as conn:
        cursor = conn.execute("SELECT * FROM nearsim_verify(%s, fingerprints => true)", [table])
        names = [column.name for column in cursor.description or ()]
        health = dict(zip(names, cursor.fetchone() or (), strict=True))
        differing = conn.execute(sql.SQL(
            "SELECT count(*) FROM {} WHERE si IS DISTINCT FROM simhash(body)").format(
                sql.Identifier(table))).fetchone()
    assert health["ok"] and health["stale"] == 0, str(health)
    assert differing == (0,)


def failure_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.endswith("[database-encoding]")]


def write_texts(root: Path) -> Path:
    root.mkdir()
    for name, text in TEXTS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("server_side", [False, True], ids=["client", "server-side"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_what_the_encoding_holds_is_stored_exactly_and_the_rest_refused_by_name(
    databases: dict[str, str], tmp_path: Path, encoding: str, server_side: bool
) -> None:
    database = databases[encoding]
    root = write_texts(tmp_path / "texts")
    table = f"docs_{uuid.uuid4().hex[:8]}"
    arguments = ["load", str(root), "--dsn", database, "--table", table, "--create",
                 "--workers", "1", "--quiet", "--json",
                 *(["--server-side"] if server_side else [])]
    result = run(*arguments)
    unstorable = UNSTORABLE[encoding]
    assert result.exit_code == (1 if unstorable else 0), result.output
    assert "Traceback" not in result.output

    # each refused document: one line naming it, the encoding and the character
    lines = failure_lines(result)
    assert len(lines) == len(unstorable), result.stderr
    for name, character in unstorable.items():
        path = root / name
        offset = TEXTS[name].encode().find(character.encode())
        line = next(line for line in lines if line.startswith(f"{path}: "))
        assert (f"document '{path}' has characters the database encoding {encoding} cannot store"
                f" (first: U+{ord(character):04X} ") in line
        assert f" at byte {offset} of its text)" in line
    summary = json.loads(result.stdout)
    assert summary["loaded"] == len(TEXTS) - len(unstorable)
    assert summary["failed_by_reason"] == ({"database-encoding": len(unstorable)}
                                           if unstorable else {})  # fmt: skip
    if encoding == "SQL_ASCII":
        assert "warning: the database encoding is SQL_ASCII" in result.stderr

    # the rest: the text given, character for character and byte for byte
    expected = {str(root / name): text for name, text in TEXTS.items() if name not in unstorable}
    documents = stored(database, table)
    assert {key: body for key, (body, _, _) in documents.items()} == expected
    for key, (_, raw, digest) in documents.items():
        assert raw == expected[key].encode()
        assert digest == hashlib.sha256(raw).digest()
    assert_fingerprints_clean(database, table)

    again = run(*arguments)
    assert again.exit_code == result.exit_code, again.output
    assert json.loads(again.stdout)["unchanged"] == len(expected), again.output
    assert len(failure_lines(again)) == len(unstorable)


def test_keys_and_fields_the_encoding_cannot_hold_are_refused_by_name(
    databases: dict[str, str], tmp_path: Path
) -> None:
    database = databases["LATIN1"]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in [
        {"id": "été", "text": "première ligne du texte à charger", "title": "Été"},
        {"id": "k€", "text": "une clé que la base ne peut pas garder", "title": "clé"},
        {"id": "k3", "text": "le titre de celui-ci ne tient pas", "title": "“guillemets”"},
    ]), encoding="utf-8")
    table = f"records_{uuid.uuid4().hex[:8]}"
    # twice: the second run looks the keys up in the table that now has rows
    for loaded in (1, 0):
        result = run("load", str(records), "--dsn", database, "--table", table, "--create",
                     "--workers", "1", "--quiet", "--json")
        assert result.exit_code == 1, result.output
        assert json.loads(result.stdout)["loaded"] == loaded
        [line, fields] = failure_lines(result)
        assert line.startswith(f"{records}:2: document 'k€' has characters the database"
                               " encoding LATIN1 cannot store (first: U+20AC EURO SIGN at byte 1"
                               " of its key)")
        # the loader's own table keeps the other fields (title), which must be stored too
        assert fields.startswith(f"{records}:3: document 'k3' has characters the database"
                                 " encoding LATIN1 cannot store (first: U+201C LEFT DOUBLE"
                                 " QUOTATION MARK at byte ")
        assert "of its fields)" in fields
    assert {key: body for key, (body, _, _) in stored(database, table).items()} == {
        "été": "première ligne du texte à charger"}

    own = f"articles_{uuid.uuid4().hex[:8]}"
    with utf8(database) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id text PRIMARY KEY, title text, content text)")
                     .format(sql.Identifier(own)))
        conn.execute("SELECT nearsim_enable(%s, 'content')", [own])
    result = run("load", str(records), "--dsn", database, "--table", own, "--column",
                 "title=title", "--workers", "1", "--quiet", "--json")
    assert result.exit_code == 1, result.output
    lines = failure_lines(result)
    assert len(lines) == 2
    assert "document 'k€'" in lines[0] and "of its key)" in lines[0]
    assert lines[1].startswith(f"{records}:3: document 'k3' has characters the database encoding"
                               " LATIN1 cannot store (first: U+201C LEFT DOUBLE QUOTATION MARK at"
                               " byte 0 of its field 'title')")
    with utf8(database) as conn:
        rows = conn.execute(sql.SQL("SELECT id, title, content, si = simhash(content) FROM {}")
                            .format(sql.Identifier(own))).fetchall()
    assert rows == [("été", "Été", "première ligne du texte à charger", True)]


def test_the_client_speaks_utf8_whatever_the_dsn_says(
    databases: dict[str, str], tmp_path: Path
) -> None:
    database = databases["LATIN1"]
    root = tmp_path / "texts"
    root.mkdir()
    text = "Un café crème, déjà servi à l'hôtel, coûte trois francs suisses.\n"
    (root / "cafe.txt").write_text(text, encoding="utf-8")
    table = f"docs_{uuid.uuid4().hex[:8]}"
    latin1_dsn = make_conninfo(database, client_encoding="LATIN1")
    result = run("load", str(root), "--dsn", latin1_dsn, "--table", table, "--create",
                 "--workers", "1", "--quiet")
    assert result.exit_code == 0, result.output
    assert stored(database, table)[str(root / "cafe.txt")][0] == text
    assert_fingerprints_clean(database, table)

    # the library's loader takes the caller's connections, and says what it needs
    with psycopg.connect(latin1_dsn, autocommit=True) as conn, \
            psycopg.connect(latin1_dsn) as lookup:
        with pytest.raises(ValueError, match="connect with client_encoding UTF8"):
            load(conn, lookup, DocumentTable(conn, table),
                 iter_inputs([str(root)], SourceOptions()), LoadOptions(workers=1))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_other_commands_work_in_the_database(
    databases: dict[str, str], tmp_path: Path, encoding: str
) -> None:
    database = databases[encoding]
    root = tmp_path / "near"
    root.mkdir()
    base = ("Le café du matin est servi chaud avec un croissant doré, puis la réunion commence"
            " à neuf heures précises dans la grande salle de l'hôtel de ville, où chacun"
            " présente ses idées")
    (root / "a.txt").write_text(base + ".\n", encoding="utf-8")
    (root / "b.txt").write_text(base + " et ses projets.\n", encoding="utf-8")
    foreign = tmp_path / "foreign.txt"
    foreign.write_text(base + " avec un 🚀 pour finir.\n", encoding="utf-8")
    table = f"near_{uuid.uuid4().hex[:8]}"
    a, b = str(root / "a.txt"), str(root / "b.txt")

    result = run("init", "--dsn", database, "--table", table)
    assert result.exit_code == 0, result.output
    result = run("load", str(root), "--dsn", database, "--table", table, "--workers", "1",
                 "--quiet")
    assert result.exit_code == 0, result.output
    assert {key: body for key, (body, _, _) in stored(database, table).items()} == {
        a: base + ".\n", b: base + " et ses projets.\n"}

    checked = run("check", "--dsn", database, "--table", table, "--hamming", "-k", "10",
                  str(foreign))
    if encoding == "SQL_ASCII":
        assert checked.exit_code == 1, checked.output  # near-duplicates of it are stored
        assert a in checked.stdout
    else:
        assert checked.exit_code == 2, checked.output
        [line] = checked.stderr.strip().splitlines()
        assert line.startswith(f"Error: {foreign} has characters the database encoding"
                               f" {encoding} cannot store (first: U+1F680 ROCKET at byte ")

    found = run("similar", "--dsn", database, "--table", table, "--file", a, "--hamming",
                "-k", "10", "--json")
    assert found.exit_code == 0, found.output
    assert [match["key"] for match in json.loads(found.stdout)] == [a, b]
    pairs = run("pairs", "--dsn", database, "--table", table, "-s", "0.5", "--json")
    assert pairs.exit_code == 0, pairs.output
    assert [(pair["a"], pair["b"]) for pair in json.loads(pairs.stdout)] == [(a, b)]
    compared = run("compare", "--dsn", database, "--table", table, a, b, "--json")
    assert compared.exit_code == 0, compared.output
    stats = run("stats", "--dsn", database, "--table", table, "--check-fingerprints", "--json")
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["documents"] == 2
    assert_fingerprints_clean(database, table)
