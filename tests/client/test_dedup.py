"""The deduplicated corpus out: records keep their fields when loaded, and
``nearsim dedup`` writes one document of each group and every other one, with
all of their fields, to JSON Lines, CSV, Parquet or a new table."""

from __future__ import annotations

import csv
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

from nearsim.client.cli import cli
from nearsim.core.survivors import Keep, survivor

WORDS = ("river stone lantern orchard velvet harbor meadow signal copper thistle"
         " granite willow beacon saddle crimson falcon ember quarry lattice marble"
         " tundra violet anchor bramble cinder dapple fennel garnet hollow juniper").split()


def text_of(seed: int, extra: int = 0) -> str:
    """80 words of their own for each seed; ``extra`` more words make a near-duplicate."""
    words = [f"{WORDS[(seed * 7 + i * 3) % len(WORDS)]}{(seed * 31 + i) % 97}" for i in range(80)]
    return " ".join(words + ["postscript"] * extra)


# Three groups and three documents without a near-duplicate.  Ids are numbers
# (10 before 9 as text, not as numbers), "fetched" ISO dates, one missing.
RECORDS: list[dict[str, Any]] = [
    {"id": 9, "url": "https://a.example/9", "fetched": "2024-03-01", "text": text_of(1, 2)},
    {"id": 10, "url": "https://a.example/10", "fetched": "2024-05-01", "text": text_of(1)},
    {"id": 11, "url": "https://a.example/11", "text": text_of(1, 5)},
    {"id": 20, "url": "https://b.example/20", "fetched": "2023-01-01", "text": text_of(2, 1),
     "tags": ["x", "y"], "score": 1.5},
    {"id": 21, "url": "https://b.example/21", "fetched": "2023-01-02", "text": text_of(2),
     "tags": [], "score": 2},
    {"id": 30, "url": "https://c.example/30", "fetched": "2022-07-07", "text": text_of(3),
     "ok": True},
    {"id": 31, "url": "https://c.example/31", "fetched": "2022-07-07", "text": text_of(3, 1),
     "ok": False},
    {"id": 40, "url": "https://d.example/40", "fetched": "2021-01-01", "text": text_of(4)},
    {"id": 41, "url": "https://d.example/41", "fetched": "2021-01-01", "text": text_of(5)},
    {"id": 42, "url": "https://d.example/42", "fetched": "2021-01-01", "text": text_of(6)},
]
GROUPS = [[9, 10, 11], [20, 21], [30, 31]]


def expected(keep: Keep, records: list[dict[str, Any]] = RECORDS,
             groups: list[list[int]] = GROUPS) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """The survivors (by id) and removed -> kept, by the reference policy."""
    by_id = {record["id"]: record for record in records}
    removed: dict[Any, Any] = {}
    for group in groups:
        kept = survivor(keep, [by_id[key] for key in group], "id", "text")["id"]
        removed.update((key, kept) for key in group if key != kept)
    return sorted((r for r in records if r["id"] not in removed), key=lambda r: r["id"]), removed


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def load(database: str, table: str, *paths: Path, extra: tuple[str, ...] = ()) -> Result:
    result = CliRunner().invoke(cli, ["load", *map(str, paths), "--dsn", database, "--table",
                                      table, "--quiet", "--json", "--workers", "1", *extra],
                                catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    return result


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_id(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: r["id"])


@pytest.fixture(scope="module")
def crawl(database: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The records loaded into nearsim-load's own table."""
    directory = tmp_path_factory.mktemp("crawl")
    table = f"crawl_{uuid.uuid4().hex[:8]}"
    load(database, table, write_jsonl(directory / "crawl.jsonl", RECORDS), extra=("--create",))
    return table


def select(dsn: str, query: sql.Composable | str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query if not isinstance(query, str) else query.encode(),
                            list(params) or None).fetchall()


# -- nearsim dedup from nearsim-load's own table ------------------------------------------


@pytest.mark.parametrize("policy", ["first", "longest", "newest:fetched"])
def test_each_policy_keeps_the_documents_the_reference_keeps(
        database: str, crawl: str, tmp_path: Path, policy: str) -> None:  # fmt: skip
    out, mapping = tmp_path / "out.jsonl", tmp_path / "removed.jsonl"
    result = run("dedup", crawl, "--dsn", database, "--keep", policy, "-o", str(out),
                 "--mapping", str(mapping), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    survivors, removed = expected(Keep.parse(policy))
    assert by_id(read_jsonl(out)) == survivors
    assert {row["removed"]: row["kept"] for row in read_jsonl(mapping)} == removed
    summary = json.loads(result.stdout)
    assert (summary["documents"], summary["groups"], summary["survivors"],
            summary["removed"]) == (10, 3, len(survivors), len(removed))


def test_first_is_the_smallest_id_as_a_number(database: str, crawl: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert run("dedup", crawl, "--dsn", database, "-o", str(out)).exit_code == 0
    assert 9 in {record["id"] for record in read_jsonl(out)}  # not 10, as text would have it


def test_the_summary_goes_to_stderr(database: str, crawl: str, tmp_path: Path) -> None:
    result = run("dedup", crawl, "--dsn", database, "-o", str(tmp_path / "o.jsonl"))
    assert result.stdout == ""
    assert "10 documents, 3 groups of near-duplicates: 6 survivors, 4 removed" in result.stderr


def test_csv_holds_every_field_of_the_survivors(database: str, crawl: str,
                                                tmp_path: Path) -> None:  # fmt: skip
    out, mapping = tmp_path / "out.csv", tmp_path / "removed.csv"
    result = run("dedup", crawl, "--dsn", database, "-o", str(out), "--mapping", str(mapping))
    assert result.exit_code == 0, result.output
    with open(out, newline="") as file:
        rows = list(csv.DictReader(file))
    assert list(rows[0]) == ["id", "fetched", "ok", "score", "tags", "url", "text"]
    survivors, removed = expected(Keep())
    written = {int(row["id"]): row for row in rows}
    assert sorted(written) == [r["id"] for r in survivors]
    for record in survivors:
        row = written[record["id"]]
        assert row["text"] == record["text"] and row["url"] == record["url"]
        assert row["fetched"] == record.get("fetched", "")
        assert row["tags"] == (json.dumps(record["tags"]) if "tags" in record else "")
        assert row["ok"] == {True: "true", False: "false", None: ""}[record.get("ok")]
    with open(mapping, newline="") as file:
        assert {int(r["removed"]): int(r["kept"]) for r in csv.DictReader(file)} == removed


def test_parquet_holds_every_field_of_the_survivors_typed(database: str, crawl: str,
                                                          tmp_path: Path) -> None:  # fmt: skip
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out.parquet"
    assert run("dedup", crawl, "--dsn", database, "-o", str(out), "--keep", "longest").exit_code \
        == 0
    table = pq.read_table(out)
    assert str(table.schema.field("id").type) == "int64"
    assert str(table.schema.field("score").type) == "double"
    assert str(table.schema.field("ok").type) == "bool"
    rows = [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]
    survivors, _ = expected(Keep.parse("longest"))
    for row in rows:  # lists are written as JSON text
        if "tags" in row:
            row["tags"] = json.loads(row["tags"])
    assert by_id(rows) == survivors


def test_into_table_makes_a_table_like_the_source_and_its_mapping(
        database: str, crawl: str) -> None:  # fmt: skip
    target = f"{crawl}_dedup"
    result = run("dedup", crawl, "--dsn", database, "--into-table", target, "--keep", "longest")
    assert result.exit_code == 0, result.output
    survivors, removed = expected(Keep.parse("longest"))
    rows = select(database, sql.SQL("SELECT key, body, fields FROM {} ORDER BY key::int").format(
        sql.Identifier(target)))
    assert [(int(key), body) for key, body, _ in rows] == [(r["id"], r["text"]) for r in survivors]
    assert select(database, sql.SQL("SELECT removed::int, kept::int FROM {} ORDER BY 1").format(
        sql.Identifier(f"{target}_removed"))) == sorted(removed.items())
    # a plain table, of the loader's layout: nearsim_enable makes it one to load into
    assert select(database, "SELECT count(*) FROM nearsim_tables WHERE tbl = %s::regclass",
                  target) == [(0,)]
    again = run("dedup", crawl, "--dsn", database, "--into-table", target)
    assert again.exit_code == 2 and f'table "{target}" exists' in again.stderr
    assert run("dedup", crawl, "--dsn", database, "--into-table", target,
               "--overwrite").exit_code == 0


def test_into_the_table_itself_is_refused(database: str, crawl: str) -> None:
    result = run("dedup", crawl, "--dsn", database, "--into-table", crawl, "--overwrite")
    assert result.exit_code == 2
    assert "is the table deduplicated" in result.stderr
    assert select(database, sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier(crawl))) == [(10,)]


def test_an_existing_output_is_refused_without_overwrite(database: str, crawl: str,
                                                         tmp_path: Path) -> None:  # fmt: skip
    out = tmp_path / "out.jsonl"
    out.write_text("mine\n")
    result = run("dedup", crawl, "--dsn", database, "-o", str(out))
    assert result.exit_code == 2 and "exists" in result.stderr
    assert out.read_text() == "mine\n"


def test_hamming_groups_as_clusters_does(database: str, crawl: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = run("dedup", crawl, "--dsn", database, "--hamming", "-k", "0", "-o", str(out),
                 "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    clusters = json.loads(run("clusters", "--table", crawl, "--dsn", database, "--hamming", "-k",
                              "0", "--json").stdout)  # fmt: skip
    assert json.loads(result.stdout)["removed"] == sum(len(c["members"]) - 1 for c in clusters)


# -- tables of the user's own -------------------------------------------------------------


@pytest.fixture
def hostile(database: str) -> Iterator[str]:
    """A table with a name and columns that need quoting; NULL texts; bigint keys."""
    name = f'we"ird tab le {uuid.uuid4().hex[:6]}'
    table = sql.Identifier(name)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL('CREATE TABLE {} (id bigint PRIMARY KEY, "the ""text""" text,'
                             ' "fetched at" timestamptz, "Url" text)').format(table))
        conn.execute("SELECT nearsim_enable(%s, 'the \"text\"')", [table.as_string(conn)])
        with conn.cursor().copy(sql.SQL('COPY {} (id, "the ""text""", "fetched at", "Url")'
                                        " FROM STDIN").format(table)) as copy:
            for record in RECORDS:
                copy.write_row((record["id"], record["text"], record.get("fetched"),
                                record["url"]))
            copy.write_row((50, None, "2020-01-01", "https://e.example/50"))
            copy.write_row((51, None, None, None))
    yield table.as_string(psycopg.connect(database))
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(table))
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(f"{name}_x")))
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
            sql.Identifier(f"{name}_x_removed")))


def test_a_table_of_your_own_with_hostile_names_and_null_texts(database: str, hostile: str,
                                                               tmp_path: Path) -> None:
    out, mapping = tmp_path / "out.jsonl", tmp_path / "m.csv"
    result = run("dedup", hostile, "--dsn", database, "--keep", "newest:fetched at", "-o",
                 str(out), "--mapping", str(mapping), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [{"id": r["id"], "fetched": r.get("fetched"), "text": r["text"]} for r in RECORDS]
    survivors, removed = expected(Keep.parse("newest:fetched"), records)
    written = {row["id"]: row for row in read_jsonl(out)}
    # every column but the fingerprint; the NULL texts have no near-duplicate: they stay
    assert set(written[40]) == {"id", 'the "text"', "fetched at", "Url"}
    assert written[51] == {"id": 51, 'the "text"': None, "fetched at": None, "Url": None}
    assert written[50]["fetched at"].startswith("2020-01-01T00:00:00")
    assert sorted(written) == sorted([r["id"] for r in survivors] + [50, 51])
    with open(mapping, newline="") as file:
        assert {int(r["removed"]): int(r["kept"]) for r in csv.DictReader(file)} == removed
    assert json.loads(result.stdout)["documents"] == 12


def test_a_hostile_table_into_a_hostile_table(database: str, hostile: str) -> None:
    name = json.loads('"' + hostile[1:-1].replace('""', '\\"') + '"')
    target = sql.Identifier(f"{name}_x")
    quoted = target.as_string(psycopg.connect(database))
    result = run("dedup", hostile, "--dsn", database, "--into-table", quoted)
    assert result.exit_code == 0, result.output
    survivors, removed = expected(Keep())
    assert [key for (key,) in select(database, sql.SQL("SELECT id FROM {} ORDER BY id").format(
        target))] == sorted([r["id"] for r in survivors] + [50, 51])
    assert select(database, sql.SQL("SELECT removed, kept FROM {} ORDER BY 1").format(
        sql.Identifier(f"{name}_x_removed"))) == sorted(removed.items())


def test_an_unknown_field_to_keep_by_is_one_line(database: str, hostile: str,
                                                 tmp_path: Path) -> None:  # fmt: skip
    result = run("dedup", hostile, "--dsn", database, "--keep", "newest:nope", "-o",
                 str(tmp_path / "o.jsonl"))  # fmt: skip
    assert result.exit_code == 2
    assert "has no column 'nope'" in result.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_an_empty_table_writes_empty_outputs(database: str, tmp_path: Path) -> None:
    table = f"empty_{uuid.uuid4().hex[:8]}"
    assert run("init", "--dsn", database, "--table", table).exit_code == 0
    for suffix in ("jsonl", "csv", "parquet"):
        out = tmp_path / f"out.{suffix}"
        result = run("dedup", table, "--dsn", database, "-o", str(out), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["documents"] == 0
    assert (tmp_path / "out.jsonl").read_text() == ""
    assert (tmp_path / "out.csv").read_text().strip() == "id,text"


def test_a_table_of_your_own_to_parquet_keeps_its_column_types(database: str, hostile: str,
                                                               tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out.data"
    result = run("dedup", hostile, "--dsn", database, "-o", str(out), "--format", "parquet")
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert [(field.name, str(field.type)) for field in table.schema] == [
        ("id", "int64"), ('the "text"', "string"), ("fetched at", "timestamp[us, tz=UTC]"),
        ("Url", "string")]
    survivors, _ = expected(Keep())
    rows = {row["id"]: row for row in table.to_pylist()}
    assert sorted(rows) == sorted([r["id"] for r in survivors] + [50, 51])
    assert rows[9]['the "text"'] == RECORDS[0]["text"]
    assert rows[9]["fetched at"].isoformat() == "2024-03-01T00:00:00+00:00"


def test_a_record_field_with_a_hostile_name_chooses_and_is_written(database: str,
                                                                   tmp_path: Path) -> None:
    field = 'fetched "at", O\'Neil %s'
    records = [{"id": r["id"], field: r.get("fetched"), "text": r["text"]} for r in RECORDS]
    for record in records:
        if record[field] is None:
            del record[field]
    table = f'odd "{uuid.uuid4().hex[:6]}"'
    quoted = '"' + table.replace('"', '""') + '"'
    load(database, quoted, write_jsonl(tmp_path / "odd.jsonl", records), extra=("--create",))
    out = tmp_path / "out.csv"
    result = run("dedup", quoted, "--dsn", database, "--keep", f"newest:{field}", "-o", str(out))
    assert result.exit_code == 0, result.output
    survivors, _ = expected(Keep.parse(f"newest:{field}"), records)
    with open(out, newline="") as file:
        rows = list(csv.DictReader(file))
    assert list(rows[0]) == ["id", field, "text"]
    assert sorted(int(row["id"]) for row in rows) == [r["id"] for r in survivors]


def test_outputs_that_cannot_be_written_are_one_line_each(database: str, crawl: str,
                                                          tmp_path: Path) -> None:  # fmt: skip
    missing = tmp_path / "no" / "such" / "out.jsonl"
    result = run("dedup", crawl, "--dsn", database, "-o", str(missing))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].endswith(
        f"directory {missing.parent} does not exist")
    result = run("dedup", crawl, "--dsn", database, "--mapping", str(tmp_path / "m.parquet"))
    assert result.exit_code == 2 and "JSON Lines or CSV, not Parquet" in result.stderr
    result = run("dedup", crawl, "--dsn", database, "-o", str(tmp_path / "out.txt"))
    assert result.exit_code == 2 and "cannot tell the format of" in result.stderr
    assert list(tmp_path.iterdir()) == []
