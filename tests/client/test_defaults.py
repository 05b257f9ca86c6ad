"""The defaults catch a lightly edited copy, and every verified match shows S_L and S_R."""

from __future__ import annotations

import json
import random
import re
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

import nearsim
from nearsim.client.cli import cli
from nearsim.client.samples import kjv_chapters
from nearsim.core import measures
from nearsim.core.pairs import connected_components, pivot_groups

CHAPTERS = {c.ref: c.text for c in kjv_chapters(["Genesis", "Ruth", "Jude", "Obadiah"])}
STORED = ("Genesis 24", "Ruth 1", "Jude 1")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def words_replaced(text: str, share: float, seed: int = 1) -> str:
    """``text`` with ``share`` of its words, drawn at random, replaced by another word."""
    words = list(re.finditer(r"[A-Za-z]+", text))
    chosen = sorted(random.Random(seed).sample(range(len(words)), round(share * len(words))))
    pieces, end = [], 0
    for index in chosen:
        pieces += [text[end : words[index].start()], "changed"]
        end = words[index].end()
    return "".join(pieces) + text[end:]


@pytest.fixture(scope="module")
def stored(database: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A table of three chapters, and the directory they were loaded from."""
    root = tmp_path_factory.mktemp("docs")
    for ref in STORED:
        (root / f"{ref}.txt").write_text(CHAPTERS[ref])
    table = f"docs_{uuid.uuid4().hex[:8]}"
    loaded = run("load", str(root), "--dsn", database, "--table", table, "--create", "--quiet")
    assert loaded.exit_code == 0, loaded.output
    return table, root


@pytest.fixture(scope="module")
def draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ruth 1 with 4% of its words changed: S_L above the default 0.87, S_R below 0.8."""
    path = tmp_path_factory.mktemp("drafts") / "draft.txt"
    path.write_text(words_replaced(CHAPTERS["Ruth 1"], 0.04))
    return path


def test_a_four_percent_edit_is_above_the_default_by_s_l_and_below_it_by_s_r(draft: Path) -> None:
    exact = measures.compare(CHAPTERS["Ruth 1"], draft.read_text())
    assert exact.s_l >= measures.DEFAULT_MIN_SIMILARITY and exact.s_r < 0.8  # S_R's old default
    assert (measures.DEFAULT_MEASURE, measures.DEFAULT_MIN_SIMILARITY) == ("s_l", 0.87)


def test_similar_finds_a_four_percent_edit_at_the_defaults_and_shows_both(
    database: str, stored: tuple[str, Path], draft: Path,
) -> None:  # fmt: skip
    table, root = stored
    exact = measures.compare(CHAPTERS["Ruth 1"], draft.read_text())
    result = run("similar", "--file", str(draft), "--dsn", database, "--table", table, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [Path(m["key"]).name for m in found] == ["Ruth 1.txt"]
    assert found[0]["similarity"] == pytest.approx(exact.s_l)  # S_L selected it
    assert found[0]["s_l"] == pytest.approx(exact.s_l)
    assert found[0]["s_r"] == pytest.approx(exact.s_r)

    text = run("similar", "--file", str(draft), "--dsn", database, "--table", table)
    assert text.stdout.splitlines() == [
        "       S_L         S_R  distance  key",
        f"{exact.s_l:10.1%}  {exact.s_r:10.1%}  {found[0]['distance']:8d}  {root / 'Ruth 1.txt'}",
    ]
    # selected by S_R (the old default misses the draft; -s 0.7 finds it): S_R first, S_L next
    by_s_r = run("similar", "--file", str(draft), "--measure", "s_r", "-s", "0.7", "--dsn",
                 database, "--table", table)  # fmt: skip
    assert by_s_r.stdout.splitlines()[0] == "       S_R         S_L  distance  key"
    assert f"{exact.s_r:10.1%}  {exact.s_l:10.1%}" in by_s_r.stdout.splitlines()[1]
    missed = run("similar", "--file", str(draft), "--measure", "s_r", "-s", "0.8", "--dsn",
                 database, "--table", table)  # fmt: skip
    assert missed.exit_code == 0 and missed.stdout == ""


def test_similar_does_not_find_an_unrelated_chapter(
    database: str, stored: tuple[str, Path], tmp_path: Path,
) -> None:  # fmt: skip
    table, _ = stored
    other = tmp_path / "obadiah.txt"
    other.write_text(CHAPTERS["Obadiah 1"])
    result = run("similar", "--file", str(other), "--dsn", database, "--table", table, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_check_flags_a_four_percent_edit_at_the_defaults_and_passes_an_unrelated_chapter(
    database: str, stored: tuple[str, Path], draft: Path, tmp_path: Path,
) -> None:  # fmt: skip
    table, root = stored
    other = tmp_path / "obadiah.txt"
    other.write_text(CHAPTERS["Obadiah 1"])
    exact = measures.compare(CHAPTERS["Ruth 1"], draft.read_text())
    clean = run("check", str(other), "--dsn", database, "--table", table)
    assert clean.exit_code == 0 and clean.stdout == f"{other}: no near-duplicate\n"
    found = run("check", str(other), str(draft), "--dsn", database, "--table", table)
    assert found.exit_code == 1, found.output
    lines = found.stdout.splitlines()
    assert lines[1] == f"{draft}: 1 near-duplicate"
    assert lines[2].startswith(f"  S_L {exact.s_l:.1%}  S_R {exact.s_r:.1%}  ")
    assert lines[2].endswith(f"bits  {root / 'Ruth 1.txt'}")
    as_json = json.loads(run("check", str(draft), "--json", "--dsn", database, "--table",
                             table).stdout)  # fmt: skip
    match = as_json[0]["near_duplicates"][0]
    assert (match["s_l"], match["s_r"]) == (pytest.approx(exact.s_l), pytest.approx(exact.s_r))
    # the README's strict check, -s 0.9, holds the 4% draft back too
    strict = run("check", str(draft), "-s", "0.9", "--dsn", database, "--table", table)
    assert strict.exit_code == 1, strict.output


def test_compare_decides_by_s_l_and_shows_s_r_next_to_it(
    database: str, stored: tuple[str, Path], draft: Path,
) -> None:  # fmt: skip
    _, root = stored
    original = str(root / "Ruth 1.txt")
    exact = measures.compare(CHAPTERS["Ruth 1"], draft.read_text())
    result = json.loads(run("compare", original, str(draft), "--json").stdout)
    assert result["measure"] == "s_l" and result["near_duplicates"] is True
    assert result["similarity"] == round(exact.s_l, 4)
    assert (result["s_l"], result["s_r"]) == (round(exact.s_l, 4), round(exact.s_r, 4))
    text = run("compare", original, str(draft)).stdout
    assert (f"NEAR-DUPLICATES: s_l {result['similarity']:.1%} >= 87%  (S_L {exact.s_l:.1%},"
            f" S_R {exact.s_r:.1%})") in text
    by_s_r = run("compare", original, str(draft), "--measure", "s_r").stdout
    assert (f"not near-duplicates: s_r {result['s_r']:.1%} < 87%  (S_L {exact.s_l:.1%},"
            f" S_R {exact.s_r:.1%})") in by_s_r


def test_the_library_shows_both_measures_and_can_skip_the_second(
    database: str, stored: tuple[str, Path], draft: Path,
) -> None:  # fmt: skip
    table, _ = stored
    exact = measures.compare(CHAPTERS["Ruth 1"], draft.read_text())
    with nearsim.connect(database, autocommit=True) as conn:
        documents = nearsim.DocumentTable(conn, table)
        [both] = documents.similar_verified(draft.read_text())
        assert (both.similarity, both.s_l) == (pytest.approx(exact.s_l),) * 2
        assert both.s_r == pytest.approx(exact.s_r)
        [alone] = documents.similar_verified(draft.read_text(), 0.7, "s_r", side_by_side=False)
        assert alone.similarity == pytest.approx(exact.s_r)
        assert (alone.s_r, alone.s_l) == (None, None)
        [contained] = documents.similar_verified(draft.read_text(), 0.8, "containment")
        # containment of the query in the document, as the server measures it
        assert contained.similarity == pytest.approx(
            measures.containment(draft.read_text(), CHAPTERS["Ruth 1"]))
        assert (contained.s_l, contained.s_r) == (pytest.approx(exact.s_l),
                                                  pytest.approx(exact.s_r))
        # S_R and S_L whichever measure selected; the value the search measured is kept
        ruth = str(stored[1] / "Ruth 1.txt")
        for measure in ("s_r", "s_l", "containment", "s_j"):
            [match] = [m for m in documents.similar_verified(draft.read_text(), 0.5, measure)
                       if m.key == ruth]
            assert (match.s_r, match.s_l) == (pytest.approx(exact.s_r), pytest.approx(exact.s_l))
            if measure in ("s_r", "s_l"):
                assert getattr(match, measure) == match.similarity


@pytest.fixture(scope="module")
def drafts(database: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A table of three chapters and drafts of two of them, 4% and 5% of the words changed."""
    root = tmp_path_factory.mktemp("drafts-table")
    for ref in STORED:
        (root / f"{ref}.txt").write_text(CHAPTERS[ref])
    (root / "ruth-draft.txt").write_text(words_replaced(CHAPTERS["Ruth 1"], 0.04))
    (root / "genesis-draft.txt").write_text(words_replaced(CHAPTERS["Genesis 24"], 0.05, seed=2))
    table = f"docs_{uuid.uuid4().hex[:8]}"
    loaded = run("load", str(root), "--dsn", database, "--table", table, "--create", "--quiet")
    assert loaded.exit_code == 0, loaded.output
    return table, root


def test_pairs_and_clusters_by_s_l_find_the_drafts_that_s_r_misses(
    database: str, drafts: tuple[str, Path],
) -> None:  # fmt: skip
    table, root = drafts
    texts = {str(path): path.read_text() for path in root.iterdir()}
    expected = {}  # every pair, measured here
    for a in sorted(texts):
        for b in sorted(texts):
            if a < b and measures.compare(texts[a], texts[b]).s_l >= 0.87:
                expected[(a, b)] = measures.compare(texts[a], texts[b]).s_l
    assert {(Path(a).name, Path(b).name) for a, b in expected} == {
        ("Genesis 24.txt", "genesis-draft.txt"), ("Ruth 1.txt", "ruth-draft.txt")}
    found = json.loads(run("pairs", "--dsn", database, "-t", table, "--json").stdout)
    assert {(p["a"], p["b"]): p["similarity"] for p in found} == pytest.approx(expected)
    by_s_r = json.loads(run("pairs", "--measure", "s_r", "--dsn", database, "-t", table,
                            "--json").stdout)  # fmt: skip
    assert by_s_r == []  # each draft is below 0.8 by S_R, so below 0.87
    for method in ("components", "pivot"):
        grouped = json.loads(run("clusters", "--method", method, "--dsn", database, "-t",
                                 table, "--json").stdout)  # fmt: skip
        assert sorted(sorted(Path(k).name for k in g["members"]) for g in grouped) == [
            ["Genesis 24.txt", "genesis-draft.txt"], ["Ruth 1.txt", "ruth-draft.txt"]]
    # most similar first, as the server orders its answers; --limit cuts that order
    ruth = json.loads(run("similar", "--file", str(root / "Ruth 1.txt"), "--dsn", database,
                          "-t", table, "--json").stdout)  # fmt: skip
    assert [Path(m["key"]).name for m in ruth] == ["Ruth 1.txt", "ruth-draft.txt"]
    assert ruth[0]["similarity"] == 1.0 > ruth[1]["similarity"] >= 0.87
    first = json.loads(run("similar", "--file", str(root / "Ruth 1.txt"), "--limit", "1",
                           "--dsn", database, "-t", table, "--json").stdout)  # fmt: skip
    assert first == ruth[:1]
    page = root.parent / "ruth.html"
    shown = run("report", "--cluster", str(root / "ruth-draft.txt"), "--dsn", database, "-t",
                table, "-o", str(page))  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert page.read_text().count("<section>") == 1


def _groups_of(pairs: list[tuple[str, str]], method: str) -> list[tuple[str | None, list[str]]]:
    """The groups the pairs make, by the reference grouping of nearsim.core.pairs:
    largest first, then by smallest key; members pivot first, then by key."""
    keys = sorted({key for pair in pairs for key in pair})
    position = {key: i for i, key in enumerate(keys)}
    first = np.array([position[a] for a, _ in pairs], dtype=np.int64)
    second = np.array([position[b] for _, b in pairs], dtype=np.int64)
    grouping = connected_components if method == "components" else pivot_groups
    members: dict[int, list[str]] = {}
    for key, group in zip(keys, grouping(len(keys), first, second).tolist(), strict=True):
        members.setdefault(group, []).append(key)
    found = [(keys[group] if method == "pivot" else None,
              sorted(group_keys, key=lambda k: (method == "pivot" and k != keys[group], k)))
             for group, group_keys in members.items() if len(group_keys) >= 2]
    return sorted(found, key=lambda g: (-len(g[1]), min(g[1])))


def test_groups_are_the_groups_of_the_pairs(
    database: str, drafts: tuple[str, Path],
) -> None:  # fmt: skip
    """By S_L (the default) and by S_R, the groups are those the verified pairs make."""
    table, _ = drafts
    with nearsim.connect(database, autocommit=True) as conn:
        documents = nearsim.DocumentTable(conn, table)
        for measure in ("s_l", "s_r"):
            found = [(p.a, p.b) for p in documents.pairs_verified(0.5, measure)]
            assert len(found) >= 2
            for method in ("components", "pivot"):
                server = [(c.pivot, c.members)
                          for c in documents.clusters_verified(0.5, measure, method=method)]
                assert _groups_of(found, method) == server


def test_pairs_by_s_l_within_a_radius_are_the_servers_pairs(
    database: str, drafts: tuple[str, Path],
) -> None:  # fmt: skip
    """Within -k bits the word measure is computed here, a batch at a time, with
    the server's answer (nearsim_pairs_verified measures them in PL/Python)."""
    table, _ = drafts
    with nearsim.connect(database, autocommit=True) as conn:
        documents = nearsim.DocumentTable(conn, table)
        for radius in (3, 12, 64):
            here = sorted((p.a, p.b, p.distance, round(p.similarity, 9), p.short)
                          for p in documents.pairs_verified(0.6, "s_l", radius))
            server = sorted((a, b, d, round(s, 9), short) for a, b, d, s, short in conn.execute(
                "SELECT a, b, distance, similarity, short"
                " FROM nearsim_pairs_verified(%s, 0.6, 's_l', %s)", [table, radius]))
            assert here == server
            groups = [(c.pivot, c.members) for c in documents.clusters_verified(
                0.6, "s_l", radius, method="pivot")]
            server_groups = [(c.pivot, c.members) for c in documents._clusters(
                sql.SQL("nearsim_clusters_verified(%s::regclass, 0.6, 's_l', %s, 'pivot', 2)"),
                [table, radius])]
            assert groups == server_groups
        assert len(here) >= 2  # the drafts are found at 64 bits


def test_sql_with_the_client_defaults_answers_as_the_client(database: str, stored: tuple[str, Path],
                                                            draft: Path) -> None:
    """The SQL functions' defaults are the client's (S_L at 0.87), and take the
    client's candidates (S_R from 0.5 up, at any distance): the 4 % draft,
    beyond the radius calibrated for 0.87, is found by SQL without arguments as
    by the library."""
    table, root = stored
    query = draft.read_text()
    with nearsim.connect(database, autocommit=True) as conn:
        documents = nearsim.DocumentTable(conn, table)
        in_client = [(m.key, m.distance, pytest.approx(m.similarity))
                     for m in documents.similar_verified(query)]
        in_sql = conn.execute(
            "SELECT key, distance, similarity FROM nearsim_similar_verified(%s, %s)",
            (table, query)).fetchall()
        assert [key for key, *_ in in_client] == [str(root / "Ruth 1.txt")]
        assert in_sql == in_client
        # the same, as pairs of a table that holds the draft too
        loaded = run("load", str(draft), "--dsn", database, "--table", table, "--quiet")
        assert loaded.exit_code == 0, loaded.output
        pairs_in_client = [(p.a, p.b, p.distance, pytest.approx(p.similarity))
                           for p in documents.pairs_verified()]
        pairs_in_sql = conn.execute(
            "SELECT a, b, distance, similarity FROM nearsim_pairs_verified(%s)",
            (table,)).fetchall()
        assert sorted(pairs_in_sql) == sorted(pairs_in_client)
        assert {(a, b) for a, b, *_ in pairs_in_sql} == {
            tuple(sorted((str(root / "Ruth 1.txt"), str(draft))))}
        conn.execute(sql.SQL("DELETE FROM {} WHERE key = %s").format(sql.Identifier(table)),
                     (str(draft),))


def test_every_sql_function_defaults_to_the_clients_measure_and_threshold(
    database: str, stored: tuple[str, Path],
) -> None:  # fmt: skip
    """nearsim_similar_verified, _pairs_verified, _clusters_verified, a table's typed
    <prefix>_pairs_verified and _clusters_verified, and the guard's measure: one
    default, the client's."""
    table, _ = stored
    threshold = f"DEFAULT {measures.DEFAULT_MIN_SIMILARITY}"
    measure = f"measure text DEFAULT '{measures.DEFAULT_MEASURE}'::text"
    with nearsim.connect(database, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.proname, pg_get_function_arguments(p.oid) FROM pg_proc p"
            " WHERE p.proname IN ('nearsim_similar_verified', 'nearsim_pairs_verified',"
            " 'nearsim_clusters_verified', 'nearsim_guard', %s, %s)",
            [f"{table}_pairs_verified", f"{table}_clusters_verified"]).fetchall()
    arguments = dict(rows)
    assert len(arguments) == 6, sorted(arguments)
    for name, given in arguments.items():
        assert measure in given, (name, given)
        if name != "nearsim_guard":  # whose min_similarity is asked for (or max_distance)
            assert f"min_similarity double precision {threshold}" in given, (name, given)
