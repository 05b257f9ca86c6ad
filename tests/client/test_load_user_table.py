"""nearsim-load into a table of the user's own: an existing schema enabled with
nearsim_enable, its key cast to the key column's type, record fields mapped to
columns, and reruns that neither duplicate rows nor overwrite them unasked."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

import nearsim
from nearsim.client.cli import cli
from nearsim.client.documents import TableError
from nearsim.client.loader import ColumnError, LoadOptions, load_paths

GENESIS = "In the beginning God created the heaven and the earth and the earth was without form"
RUTH = "Now it came to pass in the days when the judges ruled that there was a famine in the land"
PSALM = "Blessed is the man that walketh not in the counsel of the ungodly nor standeth in the way"


def run(*args: str) -> Result:
    return CliRunner().invoke(
        cli, ["load", *args, "--quiet", "--json", "--workers", "1"], catch_exceptions=False
    )


def counts(result: Result) -> tuple[int, int, int, int]:
    found: dict[str, Any] = json.loads(result.stdout)
    return found["loaded"], found["updated"], found["unchanged"], found["failed"]


def execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())


def select(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query.encode()).fetchall()


def write_jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


@pytest.fixture
def articles(database: str) -> str:
    name = f"articles_{uuid.uuid4().hex[:8]}"
    execute(
        database,
        f"CREATE TABLE {name} (id bigint PRIMARY KEY, title text, content text)",
        f"SELECT nearsim_enable('{name}', 'content')",
    )
    return name


def test_records_go_into_the_users_columns(database: str, articles: str, tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "data.jsonl",
        {"id": 1, "title": "Genesis", "content": GENESIS},
        {"id": "0042", "title": "Ruth", "content": RUTH},  # the bigint 42
        {"id": 7, "content": PSALM},
    )  # no title: NULL
    result = run(
        str(data),
        "--dsn",
        database,
        "--table",
        articles,
        "--key-column",
        "id",
        "--text-column",
        "content",
        "--column",
        "title=title",
        "--text-field",
        "content",
    )
    assert result.exit_code == 0, result.output
    assert counts(result) == (3, 0, 0, 0)
    rows = select(database, f"SELECT id, title, content, si FROM {articles} ORDER BY id")
    assert rows == [
        (1, "Genesis", GENESIS, nearsim.simhash(GENESIS)),
        (7, None, PSALM, nearsim.simhash(PSALM)),
        (42, "Ruth", RUTH, nearsim.simhash(RUTH)),
    ]
    # bit-identical to the server's own fingerprints, and in the rotation index
    assert select(database, f"SELECT ok FROM nearsim_verify('{articles}', true)") == [(True,)]
    assert select(database, f"SELECT (doc).id FROM {articles}_similar('{RUTH}', 0)") == [(42,)]

    # The key and text columns come from the registry when not given.
    again = run(
        str(data),
        "--dsn",
        database,
        "--table",
        articles,
        "--column",
        "title=title",
        "--text-field",
        "content",
    )
    assert again.exit_code == 0, again.output
    assert counts(again) == (0, 0, 3, 0)  # no duplicates: the same texts are unchanged
    assert select(database, f"SELECT count(*) FROM {articles}") == [(3,)]


def test_changed_rows_are_refused_unless_replace(
    database: str, articles: str, tmp_path: Path
) -> None:
    data = write_jsonl(
        tmp_path / "data.jsonl",
        {"id": 1, "title": "Genesis", "text": GENESIS},
        {"id": 2, "title": "Ruth", "text": RUTH},
    )
    assert (
        run(str(data), "--dsn", database, "--table", articles, "--column", "title=title").exit_code
        == 0
    )
    write_jsonl(
        data,
        {"id": 1, "title": "Genesis", "text": GENESIS + " and void"},
        {"id": 2, "title": "The book of Ruth", "text": RUTH},
        {"id": 3, "title": "Psalm", "text": PSALM},
    )
    refused = run(str(data), "--dsn", database, "--table", articles, "--column", "title=title")
    assert refused.exit_code == 1
    assert counts(refused) == (1, 0, 0, 2)
    assert json.loads(refused.stdout)["failed_by_reason"] == {"duplicate-key": 2}
    assert f"{data}:1: key '1' is stored in" in refused.stderr and "--replace" in refused.stderr
    assert select(database, f"SELECT id, title, content FROM {articles} ORDER BY id") == [
        (1, "Genesis", GENESIS),
        (2, "Ruth", RUTH),
        (3, "Psalm", PSALM),
    ]

    replaced = run(
        str(data), "--dsn", database, "--table", articles, "--column", "title=title", "--replace"
    )
    assert replaced.exit_code == 0, replaced.output
    assert counts(replaced) == (0, 2, 1, 0)
    assert select(database, f"SELECT id, title, content, si FROM {articles} ORDER BY id") == [
        (1, "Genesis", GENESIS + " and void", nearsim.simhash(GENESIS + " and void")),
        (2, "The book of Ruth", RUTH, nearsim.simhash(RUTH)),
        (3, "Psalm", PSALM, nearsim.simhash(PSALM)),
    ]
    assert select(database, f"SELECT ok FROM nearsim_verify('{articles}', true)") == [(True,)]


def test_bad_keys_and_refused_values_are_failures_of_their_records(
    database: str, tmp_path: Path
) -> None:
    name = f"typed_{uuid.uuid4().hex[:8]}"
    execute(
        database,
        f"CREATE TABLE {name} (id integer PRIMARY KEY, body text NOT NULL,"
        " day date, score numeric(4,1) CHECK (score >= 0), tags jsonb)",
        f"SELECT nearsim_enable('{name}', 'body')",
    )
    data = write_jsonl(
        tmp_path / "typed.jsonl",
        {"id": 1, "text": GENESIS, "day": "2024-02-29", "score": 1.5, "tags": ["a", "b"]},
        {"id": "one", "text": RUTH},  # not an integer
        {"id": 2**31, "text": RUTH},  # out of the integer range
        {"id": 3, "text": RUTH, "day": "someday"},  # not a date
        {"id": 4, "text": PSALM, "score": -1},  # against the CHECK
        {"id": 5, "text": PSALM, "score": 2, "tags": {"k": [1, 2]}},
    )
    args = (
        str(data),
        "--dsn",
        database,
        "--table",
        name,
        "--column",
        "day=day",
        "--column",
        "score=score",
        "--column",
        "tags=tags",
    )
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert counts(result) == (2, 0, 0, 4)
    assert json.loads(result.stdout)["failed_by_reason"] == {"invalid-key": 2, "refused": 2}
    assert f"{data}:2: key 'one' cannot be stored in column 'id' of type integer" in result.stderr
    assert f"key '{2**31}' cannot be stored in column 'id' of type integer" in result.stderr
    assert f"{data}:4: table \"{name}\" refused the document with key '3':" in result.stderr
    assert 'invalid input syntax for type date: "someday"' in result.stderr
    assert f"{data}:5: table \"{name}\" refused the document with key '4'" in result.stderr
    assert "Traceback" not in result.output
    assert select(
        database, f"SELECT id, day::text, score::text, tags::text FROM {name} ORDER BY id"
    ) == [(1, "2024-02-29", "1.5", '["a", "b"]'), (5, None, "2.0", '{"k": [1, 2]}')]

    again = run(*args)  # 2.0 in numeric(4,1) is the 2 of the record: unchanged
    assert counts(again) == (0, 0, 2, 4)


def test_hostile_column_names(database: str, tmp_path: Path) -> None:
    table = f'"odd ""{uuid.uuid4().hex[:6]}"" Table"'
    execute(
        database,
        f'CREATE TABLE {table} ("Select" bigint PRIMARY KEY, "a""b" text,'
        ' "100%" text, "from" text)',
        f"SELECT nearsim_enable('{table.replace(chr(39), chr(39) * 2)}', 'from')",
    )
    data = write_jsonl(
        tmp_path / "odd.jsonl",
        {"id": 1, "text": GENESIS, "x": "ab", "p": "pc"},
        {"id": 2, "text": RUTH, "x": "ba", "p": "all"},
    )
    for quoted in (False, True):  # a name as the catalog has it, or as SQL writes it
        quote = (lambda name: '"' + name.replace('"', '""') + '"') if quoted else str
        result = run(
            str(data),
            "--dsn",
            database,
            "--table",
            table,
            "--key-column",
            quote("Select"),
            "--text-column",
            quote("from"),
            "--column",
            f"x={quote('a' + chr(34) + 'b')}",
            "--column",
            f"p={quote('100%')}",
        )
        assert result.exit_code == 0, result.output
        assert counts(result) == ((2, 0, 0, 0) if not quoted else (0, 0, 2, 0))
    rows = select(database, f'SELECT "Select", "a""b", "100%", "from", si FROM {table} ORDER BY 1')
    assert rows == [
        (1, "ab", "pc", GENESIS, nearsim.simhash(GENESIS)),
        (2, "ba", "all", RUTH, nearsim.simhash(RUTH)),
    ]


def test_server_side_text_keys_and_another_unique_key(database: str, tmp_path: Path) -> None:
    name = f"pages_{uuid.uuid4().hex[:8]}"
    execute(
        database,
        f"CREATE TABLE {name} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " url text UNIQUE NOT NULL, body varchar(200))",
        f"SELECT nearsim_enable('{name}', 'body')",
    )
    data = write_jsonl(
        tmp_path / "pages.jsonl",
        {"url": "https://a.example", "text": GENESIS},
        {"url": "https://b.example", "text": RUTH + " x" * 80},
    )  # over 200
    result = run(
        str(data),
        "--dsn",
        database,
        "--table",
        name,
        "--key-column",
        "url",
        "--id-field",
        "url",
        "--server-side",
    )
    assert result.exit_code == 1, result.output
    assert counts(result) == (1, 0, 0, 1)
    assert "value too long for type character varying(200)" in result.stderr
    assert select(database, f"SELECT id IS NOT NULL, url, si FROM {name}") == [
        (True, "https://a.example", nearsim.simhash(GENESIS))
    ]  # the trigger's fingerprint


def test_uuid_keys(database: str, tmp_path: Path) -> None:
    name = f"ids_{uuid.uuid4().hex[:8]}"
    execute(
        database,
        f"CREATE TABLE {name} (id uuid PRIMARY KEY, body text)",
        f"SELECT nearsim_enable('{name}', 'body')",
    )
    key = uuid.uuid4()
    data = write_jsonl(
        tmp_path / "u.jsonl",
        {"id": "{" + key.hex.upper() + "}", "text": GENESIS},
        {"id": str(key), "text": RUTH},  # the same key, written otherwise
        {"id": "not-a-uuid", "text": PSALM},
    )
    result = run(str(data), "--dsn", database, "--table", name)
    assert counts(result) == (1, 0, 0, 2)
    assert "already loaded in this run" in result.stderr and "[invalid-key]" in result.stderr
    assert select(database, f"SELECT id, body FROM {name}") == [(key, GENESIS)]


def test_usage_errors_come_before_any_work(database: str, articles: str, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", {"id": 1, "text": GENESIS})
    base = (str(data), "--dsn", database, "--table", articles)
    cases = {
        ("--column", "title=nope"): "has no column 'nope' (for field 'title')",
        ("--column", "title"): "'title' is not FIELD=COLUMN",
        ("--column", "x=content"): "is the text column, which the loader fills",
        ("--column", "x=si"): "is the fingerprint column",
        ("--column", "a=title", "--column", "b=title"): "has another field already",
        ("--text-column", "title"): "enabled with text column 'content'",
        ("--key-column", "title"): "needs a unique index of its own",
        ("--create", "--column", "title=title"): "--create makes a table of nearsim-load's",
    }
    for extra, message in cases.items():
        result = run(*base, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)
    assert select(database, f"SELECT count(*) FROM {articles}") == [(0,)]

    # NOT NULL without a default and no field for it: said before loading
    name = f"strict_{uuid.uuid4().hex[:8]}"
    execute(
        database,
        f"CREATE TABLE {name} (id int PRIMARY KEY, body text, author text NOT NULL)",
        f"SELECT nearsim_enable('{name}', 'body')",
    )
    result = run(str(data), "--dsn", database, "--table", name)
    assert result.exit_code == 2 and "--column FIELD=author" in result.output
    # not enabled: the loader cannot fill a fingerprint column
    execute(database, f"SELECT nearsim_disable('{name}')")
    result = run(str(data), "--dsn", database, "--table", name, "--column", "author=author")
    assert result.exit_code == 2 and "is not enabled for nearsim" in result.output
    # the loader's own table takes no mapping
    own = f"own_{uuid.uuid4().hex[:8]}"
    assert run(str(data), "--dsn", database, "--table", own, "--create").exit_code == 0
    result = run(str(data), "--dsn", database, "--table", own, "--column", "a=body")
    assert result.exit_code == 2 and "nearsim-load's own columns" in result.output


def test_the_library_takes_the_mapping_as_options(
    database: str, articles: str, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", {"id": 9, "name": "Nine", "text": PSALM})
    summary = load_paths(
        [str(data)],
        articles,
        dsn=database,
        options=LoadOptions(workers=1, columns=(("name", "title"),)),
    )
    assert (summary.loaded, summary.failures) == (1, 0)
    assert select(database, f"SELECT id, title FROM {articles}") == [(9, "Nine")]
    with pytest.raises(ColumnError, match="has no column 'nothing'"):
        load_paths(
            [str(data)],
            articles,
            dsn=database,
            options=LoadOptions(workers=1, key_column="nothing"),
        )
    assert issubclass(ColumnError, TableError)
    with pytest.raises(TableError, match="for a table of your own"):
        load_paths(
            [str(data)],
            articles,
            dsn=database,
            create=True,
            options=LoadOptions(workers=1, columns=(("name", "title"),)),
        )


def test_files_into_a_text_keyed_table(database: str, tmp_path: Path) -> None:
    name = f"notes_{uuid.uuid4().hex[:8]}"
    execute(
        database,
        f"CREATE TABLE {name} (path text PRIMARY KEY, note text)",
        f"SELECT nearsim_enable('{name}', 'note')",
    )
    (tmp_path / "a.txt").write_text(GENESIS)
    (tmp_path / "b.txt").write_text(RUTH)
    result = run(str(tmp_path), "--dsn", database, "--table", name)
    assert counts(result) == (2, 0, 0, 0), result.output
    assert select(
        database,
        sql.SQL("SELECT path, note FROM {} ORDER BY 1").format(sql.Identifier(name)).as_string(),
    ) == [(str(tmp_path / "a.txt"), GENESIS), (str(tmp_path / "b.txt"), RUTH)]
