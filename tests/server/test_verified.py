"""Verified search: exactly the documents whose measured similarity passes.

Candidates come from within the radius, or from the sketch index at any distance.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

import nearsim
from nearsim.client.samples import kjv_chapters
from nearsim.core import calibration, measures, profiles

from tables import enabled_table


def edited(rng: random.Random, text: str) -> str:
    """Seed 003's kind of edit: a random stretch deleted, or foreign words inserted."""
    words = text.split()
    cut = rng.randrange(len(words))
    length = rng.randrange(1, max(2, len(words) // 3))
    if rng.random() < 0.5:
        return " ".join(words[:cut] + words[cut + length:])
    return " ".join(words[:cut] + ["selah", "amen"] * (length // 2) + words[cut:])


@pytest.fixture(scope="module")
def corpus(database: str) -> Iterator[tuple[str, dict[int, str]]]:
    rng = random.Random(3)
    texts = [c.text for c in kjv_chapters(["Genesis", "Exodus", "Ruth", "Psalms"])][:250]
    bodies = dict(enumerate(texts))
    for number in range(250, 400):
        bodies[number] = edited(rng, rng.choice(texts))
    bodies[400] = "a very short note"
    table = f"verified_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies)
    yield table, bodies
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))


def brute_force(bodies: dict[int, str], query: str, radius: int, minimum: float,
                measure: str) -> dict[str, float]:
    fingerprint = nearsim.simhash(query)
    assert fingerprint is not None
    found = {}
    for key, body in bodies.items():
        si = nearsim.simhash(body)
        if si is None or nearsim.hamming(si, fingerprint) > radius:
            continue
        value = (measures.resemblance(query, body) if measure == "s_r"
                 else getattr(measures.compare(query, body), measure))  # fmt: skip
        if value >= minimum:
            found[str(key)] = value
    return found


@pytest.mark.parametrize("minimum", [0.6, 0.8, 0.9])
def test_exactly_the_passing_candidates_within_the_calibrated_radius(
    database: str, corpus: tuple[str, dict[int, str]], minimum: float
) -> None:
    table, bodies = corpus
    rng = random.Random(int(minimum * 100))
    answered = 0
    with psycopg.connect(database) as conn:
        for _ in range(8):
            query = edited(rng, bodies[rng.randrange(250)])
            rows = conn.execute(
                "SELECT key, distance, similarity, short FROM nearsim_similar_verified(%s, %s, %s,"
                " 's_r')", [table, query, minimum]).fetchall()
            expected = brute_force(bodies, query, calibration.radius_for(minimum), minimum, "s_r")
            assert {key: similarity for key, _, similarity, _ in rows} == pytest.approx(expected)
            assert [row[2] for row in rows] == sorted((row[2] for row in rows), reverse=True)
            assert not any(row[3] for row in rows)
            answered += bool(rows)
    assert answered >= 4  # the edited chapters' originals are in the table


SEARCH_BY = ("SELECT key, distance, similarity, short"
             " FROM nearsim_similar_verified(%s, %s, %s, %s)")


@pytest.mark.parametrize("minimum", [0.5, 0.87, 0.95])
def test_by_s_l_exactly_the_s_r_candidates_whose_s_l_passes(
    database: str, corpus: tuple[str, dict[int, str]], minimum: float
) -> None:
    """Without a radius, S_L takes as candidates the documents at least
    CANDIDATE_RESEMBLANCE similar by S_R within that threshold's radius, and
    measures them in C (src/literal.c) as the reference does."""
    table, bodies = corpus
    radius = calibration.radius_for(measures.CANDIDATE_RESEMBLANCE)
    rng = random.Random(int(minimum * 1000) + 7)
    answered = 0
    with psycopg.connect(database) as conn:
        for attempt in range(6):
            original = bodies[rng.randrange(250)]
            query = edited(rng, original) if attempt % 2 else original + " amen"
            rows = conn.execute(SEARCH_BY, [table, query, minimum, "s_l"]).fetchall()
            fingerprint = nearsim.simhash(query)
            assert fingerprint is not None
            expected = {}
            for key, body in bodies.items():
                si = nearsim.simhash(body)
                if (si is None or nearsim.hamming(si, fingerprint) > radius
                        or measures.resemblance(query, body) < measures.CANDIDATE_RESEMBLANCE):
                    continue
                value = measures.compare(query, body).s_l
                if value >= minimum:
                    expected[str(key)] = value
            assert {key: similarity for key, _, similarity, _ in rows} == expected
            assert [(-s, d, k) for k, d, s, _ in rows] == sorted((-s, d, k) for k, d, s, _ in rows)
            answered += bool(rows)
    assert answered >= 3


def set_measure(measure: str, query: str, body: str) -> float:
    """The measure as src/verified.c takes it: containment of the query in the document."""
    return (measures.resemblance(query, body) if measure == "s_r"
            else measures.containment(query, body))  # fmt: skip


@pytest.mark.parametrize("measure", ["s_r", "containment"])
@pytest.mark.parametrize("minimum", [0.5, 0.52, 0.83, 0.95])
def test_the_calibrated_radius_at_the_ends_and_between_thresholds(
    database: str, corpus: tuple[str, dict[int, str]], minimum: float, measure: str
) -> None:
    """The radius the C search takes is the Python calibration's, for both set measures."""
    table, bodies = corpus
    radius = calibration.radius_for(minimum)
    rng = random.Random(int(minimum * 1000))
    with psycopg.connect(database) as conn:
        for _ in range(4):
            query = edited(rng, bodies[rng.randrange(250)])
            rows = conn.execute(SEARCH_BY, [table, query, minimum, measure]).fetchall()
            fingerprint = nearsim.simhash(query)
            assert fingerprint is not None
            expected = {}
            for key, body in bodies.items():
                si = nearsim.simhash(body)
                if si is not None and nearsim.hamming(si, fingerprint) <= radius:
                    value = set_measure(measure, query, body)
                    if value >= minimum:
                        expected[str(key)] = value
            assert {key: similarity for key, _, similarity, _ in rows} == pytest.approx(expected)
            assert all(distance <= radius for _, distance, _, _ in rows)


def test_a_query_without_words_finds_nothing_within_the_radius(
    database: str, corpus: tuple[str, dict[int, str]]
) -> None:
    table, _ = corpus
    with psycopg.connect(database) as conn:
        for query in ("", "  ...  ", "\u2603"):
            for measure in ("s_r", "containment"):
                assert conn.execute(SEARCH_BY, [table, query, 0.8, measure]).fetchall() == []
                assert conn.execute(SEARCH_BY[:-1] + ", max_distance => 64)",
                                    [table, query, 0.3, measure]).fetchall() == []


def test_another_profile_takes_the_radius_of_its_own_calibration(database: str) -> None:
    rng = random.Random(11)
    texts = [c.text for c in kjv_chapters(["Ruth", "Jude", "Obadiah", "Genesis"])][:60]
    bodies = dict(enumerate(texts))
    for number in range(60, 120):
        bodies[number] = edited(rng, rng.choice(texts))
    profile = "english/1"
    table = f"english_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(
            sql.Identifier(table)))
        conn.execute("SELECT nearsim_enable(%s, 'body', profile => %s)", [table, profile])
        conn.cursor().executemany(
            sql.SQL("INSERT INTO {} (id, body) VALUES (%s, %s)").format(sql.Identifier(table)),
            list(bodies.items()))
        try:
            for minimum, measure in ((0.8, "s_r"), (0.6, "containment")):
                radius = calibration.radius_for(minimum, profile)
                for key in (60, 75, 90):
                    query = bodies[key]
                    fingerprint = profiles.simhash(query, profile)
                    assert fingerprint is not None
                    rows = conn.execute(SEARCH_BY,
                                        [table, query, minimum, measure]).fetchall()
                    expected = {}
                    for other, body in bodies.items():
                        si = profiles.simhash(body, profile)
                        if si is not None and nearsim.hamming(si, fingerprint) <= radius:
                            value = set_measure(measure, query, body)
                            if value >= minimum:
                                expected[str(other)] = value
                    assert {k: similarity for k, _, similarity, _ in rows} == pytest.approx(
                        expected)
                    assert str(key) in expected
        finally:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))


def test_other_measures_and_an_explicit_radius(database: str,
                                               corpus: tuple[str, dict[int, str]]) -> None:
    table, bodies = corpus
    query = edited(random.Random(9), bodies[17])
    with psycopg.connect(database) as conn:
        for measure in ("s_l", "s_j", "containment", "information_s_l"):
            rows = conn.execute(
                "SELECT key, similarity FROM nearsim_similar_verified(%s, %s, 0.7, %s,"
                " max_distance => 20)", [table, query, measure]).fetchall()
            assert dict(rows) == pytest.approx(brute_force(bodies, query, 20, 0.7, measure))
            assert "17" in dict(rows)


def test_short_documents_are_flagged(database: str, corpus: tuple[str, dict[int, str]]) -> None:
    table, _ = corpus
    with psycopg.connect(database) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = conn.execute("SELECT key, short FROM nearsim_similar_verified(%s, %s, 0.9,"
                            " max_distance => 64)", [table, "a very short note"]).fetchall()
        assert rows == [("400", True)]
        assert any("unreliable" in notice for notice in notices)


def test_bad_arguments_are_named(database: str, corpus: tuple[str, dict[int, str]]) -> None:
    table, _ = corpus
    with psycopg.connect(database, autocommit=True) as conn:
        assert conn.execute("SELECT * FROM nearsim_similar_verified(%s, NULL)",
                            [table]).fetchall() == []
        for function in ("nearsim_pairs_verified", "nearsim_clusters_verified"):
            with pytest.raises(psycopg.Error, match="the table must not be NULL"):
                conn.execute(f"SELECT * FROM {function}(NULL)")
        for arguments, message in (
            (("s_r", 1.5, None), "min_similarity must be between 0 and 1"),
            (("cosine", 0.8, None), "unknown measure 'cosine'"),
            (("s_r", 0.99, None), "between 0.5 and 0.95"),
            (("s_r", 0.8, 65), "max_distance must be between 0 and 64"),
        ):
            measure, minimum, radius = arguments
            with pytest.raises(psycopg.Error, match=message):
                conn.execute("SELECT * FROM nearsim_similar_verified(%s, 'some text here', %s,"
                             " %s, %s)", [table, minimum, measure, radius])


def every_pair(bodies: dict[int, str], minimum: float) -> dict[tuple[str, str], float]:
    """Every pair (a < b) at least ``minimum`` similar in S_R, by comparing all of them."""
    shingled = {key: measures.Shingled(body) for key, body in bodies.items() if body}
    found = {}
    for a in sorted(shingled):
        for b in sorted(shingled):
            if a < b:
                value = measures.set_resemblance(shingled[a].shingles, shingled[b].shingles)
                if value >= minimum and value > 0:
                    found[(str(a), str(b))] = value
    return found


def test_verified_pairs_and_clusters_are_the_brute_force_ones(
    database: str, corpus: tuple[str, dict[int, str]]
) -> None:
    table, bodies = corpus
    expected = every_pair(bodies, 0.8)
    radius = calibration.radius_for(0.8)
    fingerprints = {key: nearsim.simhash(body) for key, body in bodies.items()}
    beyond = [(a, b) for a, b in expected
              if nearsim.hamming(fingerprints[int(a)] or 0, fingerprints[int(b)] or 0) > radius]
    assert len(expected) >= 20 and beyond
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT a, b, distance, similarity FROM"
                            " nearsim_pairs_verified(%s, 0.8, 's_r')", [table]).fetchall()
        # every pair, whatever its distance: none is missed for lying beyond the radius
        assert {(a, b): value for a, b, _, value in rows} == expected
        for a, b, distance, _ in rows:
            fa, fb = fingerprints[int(a)], fingerprints[int(b)]
            assert fa is not None and fb is not None and distance == nearsim.hamming(fa, fb)
        # with a radius, the candidates within it (as before)
        within = conn.execute("SELECT a, b FROM nearsim_pairs_verified(%s, 0.8,"
                              " 's_r', max_distance => %s)", [table, radius]).fetchall()
        assert set(within) == set(expected) - set(beyond)
        groups = conn.execute("SELECT key, cluster FROM nearsim_clusters_verified(%s, 0.8, 's_r')",
                              [table]).fetchall()
    cluster_of = dict(groups)
    assert set(cluster_of) == {key for pair in expected for key in pair}
    for a, b in expected:
        assert cluster_of[a] == cluster_of[b]
    for cluster in set(cluster_of.values()):
        assert cluster == min(k for k, c in cluster_of.items() if c == cluster)


def assert_c_answers_as_pl_python(conn: psycopg.Connection, table: str, minimum: float,
                                  measure: str, method: str, fewest: int) -> None:  # fmt: skip
    """The C route of verified pairs and groups gives the rows of their PL/Python
    bodies (the route of the other measures), in the same order."""
    for function, arguments in (
            ("nearsim_pairs_verified", f"%s, %s, '{measure}', NULL"),
            ("nearsim_clusters_verified", f"%s, %s, '{measure}', NULL, '{method}', 1"),
            ("nearsim_clusters_verified", f"%s, %s, '{measure}', NULL, '{method}', 3")):
        in_c = conn.execute(f"SELECT * FROM {function}({arguments})", [table, minimum]).fetchall()
        in_python = conn.execute(f"SELECT * FROM {function}_python({arguments})",
                                 [table, minimum]).fetchall()
        assert in_c == in_python, function
        assert len(in_c) >= fewest, function


@pytest.mark.parametrize("minimum", [0.3, 0.8])
@pytest.mark.parametrize("method", ["components", "pivot"])
def test_verified_pairs_and_groups_by_s_r_in_c_equal_the_pl_python_ones(
    database: str, corpus: tuple[str, dict[int, str]], minimum: float, method: str
) -> None:
    """By S_R without a radius both answer in C."""
    with psycopg.connect(database) as conn:
        assert_c_answers_as_pl_python(conn, corpus[0], minimum, "s_r", method, 20)


@pytest.mark.parametrize("minimum", [0.5, 0.87])
@pytest.mark.parametrize("method", ["components", "pivot"])
def test_verified_pairs_and_groups_by_s_l_in_c_equal_the_pl_python_ones(
    database: str, corpus: tuple[str, dict[int, str]], minimum: float, method: str
) -> None:
    """By S_L without a radius, from CANDIDATE_RESEMBLANCE up, both answer in C
    (the pairs of the exact join at 0.5, measured by nearsim_literal_similarity)."""
    with psycopg.connect(database) as conn:
        assert_c_answers_as_pl_python(conn, corpus[0], minimum, "s_l", method, 10)


@pytest.mark.parametrize("key_type", ["text", "integer", "uuid"])
def test_verified_pairs_by_s_l_of_odd_documents_and_keys(database: str, key_type: str) -> None:
    """Empty, NULL, one-word, repeated and Unicode texts under keys of several types."""
    bodies = {number: body for number, body in ODD_BODIES.items()}
    table = f"odd_sl_{uuid.uuid4().hex[:8]}"
    key = {"text": "'k' || {n}", "integer": "{n}",
           "uuid": "('00000000-0000-0000-0000-' || lpad('{n}', 12, '0'))::uuid"}[key_type]
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id {} PRIMARY KEY, body text)").format(
            sql.Identifier(table), sql.SQL(key_type)))
        for number, body in bodies.items():
            conn.execute(sql.SQL("INSERT INTO {} VALUES ({}, %s)").format(
                sql.Identifier(table), sql.SQL(key.format(n=number))), [body])
        conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
        try:
            in_c = conn.execute("SELECT * FROM nearsim_pairs_verified(%s, 0.5, 's_l')",
                                [table]).fetchall()
            in_python = conn.execute("SELECT * FROM nearsim_pairs_verified_python(%s, 0.5,"
                                     " 's_l', NULL)", [table]).fetchall()
        finally:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))
    assert in_c == in_python
    assert len(in_c) >= 3


ODD_BODIES = {
    1: "", 2: None, 3: "one", 4: "one", 5: "two words", 6: "words two", 7: "two words",
    8: "a b c", 9: "a b c a b c a b c", 10: "a b c d", 11: "!!! ... ???",
    12: "Straße und STRASSE", 13: "strasse und strasse", 14: "café CAFÉ cafe\u0301",
    15: "the same three words " * 3, 16: "the same three words " * 3,
    17: "the same three words", 18: "x " * 5000, 19: "x " * 3, 20: "naïve façade résumé",
}


@pytest.mark.parametrize("minimum", [0.01, 0.3, 0.5, 0.8, 1.0])
def test_verified_pairs_of_odd_documents(database: str, minimum: float) -> None:
    """Empty, NULL, one-word, repeated, identical and Unicode texts: the exact pairs."""
    rng = random.Random(5)
    texts = [c.text for c in kjv_chapters(["Ruth"])]
    bodies: dict[int, str | None] = dict(ODD_BODIES)
    for number in range(100, 160):
        base = rng.choice(texts)
        bodies[number] = base if number % 7 == 0 else edited(rng, base)
    table = f"odd_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies)
        try:
            rows = conn.execute("SELECT a, b, similarity, short FROM"
                                " nearsim_pairs_verified(%s, %s, 's_r')",
                                [table, minimum]).fetchall()
        finally:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))
    expected = every_pair({k: v for k, v in bodies.items() if v}, minimum)
    assert len(rows) == len({(a, b) for a, b, *_ in rows})
    assert {(a, b): value for a, b, value, _ in rows} == expected
    shingles = {k: measures.Shingled(v) for k, v in bodies.items() if v}
    for a, b, _, short in rows:
        assert short == (shingles[int(a)].short or shingles[int(b)].short)


def test_verified_pairs_keep_key_order_and_row_security(database: str) -> None:
    """Text keys in their own order; a reader sees only the rows its policy shows."""
    texts = [c.text for c in kjv_chapters(["Ruth"])]
    bodies = {"b10": texts[0], "b9": texts[0] + " amen", "a": texts[1], "Z": texts[1],
              "hidden": texts[0]}
    table = f"keys_{uuid.uuid4().hex[:8]}"
    role = f"reader_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(table)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (k text COLLATE \"C\" PRIMARY KEY, body text)"
                             ).format(ident))
        conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
        for key, body in bodies.items():
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(ident), [key, body])
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(ident, sql.Identifier(role)))
        conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(ident))
        conn.execute(sql.SQL("CREATE POLICY visible ON {} FOR SELECT USING (k <> 'hidden')"
                             ).format(ident))
        try:
            owner = conn.execute("SELECT a, b FROM nearsim_pairs_verified(%s, 0.5)"
                                 " ORDER BY a, b", [table]).fetchall()
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            reader = conn.execute("SELECT a, b FROM nearsim_pairs_verified(%s, 0.5)"
                                  " ORDER BY a, b", [table]).fetchall()
            conn.execute("RESET ROLE")
        finally:
            conn.execute("RESET ROLE")
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(ident))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    # "C" order: Z < a < b10 < b9 < hidden
    assert owner == [("Z", "a"), ("b10", "b9"), ("b10", "hidden"), ("b9", "hidden")]
    assert reader == [("Z", "a"), ("b10", "b9")]


def test_resemblance_of_two_texts_is_the_reference(database: str) -> None:
    rng = random.Random(9)
    texts = [c.text for c in kjv_chapters(["Ruth"])]
    pairs = [(a, b) for a in ODD_BODIES.values() for b in ODD_BODIES.values() if a and b]
    pairs += [(t, edited(rng, t)) for t in texts]
    with psycopg.connect(database) as conn:
        for a, b in pairs:
            row = conn.execute("SELECT nearsim_resemblance(%s, %s)", [a, b]).fetchone()
            assert row == (measures.resemblance(a, b),), (a[:40], b[:40])


def test_shingle_sets_of_every_size_the_sort_meets_are_the_reference(database: str) -> None:
    """A text's shingle hashes are sorted to make its set: by insertion below 32, by
    buckets of their top bits below 8,192, 8 bits at a time from there, and a bucket
    that many equal shingles overflow 8 bits at a time too.  Every size on each side
    of those limits gives the reference's set."""
    rng = random.Random(31)
    vocabulary = [f"w{i}" for i in range(5000)]

    def words(count: int) -> list[str]:
        return [rng.choice(vocabulary) for _ in range(count)]

    # a text of n words has n - 2 shingles before duplicates go
    texts = [" ".join(words(n)) for n in (3, 30, 33, 34, 35, 300, 8193, 8194, 8195, 20000)]
    texts.append(" ".join(["same"] * 3000))
    texts.append(" ".join(["same"] * 2000 + words(500) + ["same"] * 2000))
    texts.append("a b c " * 1500)
    texts.append(" ".join(words(4000) * 2))
    other = texts[-1]
    with psycopg.connect(database) as conn:
        for text in texts:
            row = conn.execute("SELECT nearsim_shingle_count(%s), nearsim_resemblance(%s, %s),"
                               " nearsim_containment(%s, %s)",
                               [text, other, text, other, text]).fetchone()
            assert row == (len(set(measures.word_shingles(text))),
                           measures.resemblance(other, text),
                           measures.containment(other, text)), text[:40]


def test_verified_pairs_on_random_sets_near_every_threshold(database: str) -> None:
    """Many small documents over a few words: S_R values on and around each threshold."""
    rng = random.Random(21)
    vocabulary = "alpha beta gamma delta epsilon zeta eta theta".split()
    bodies: dict[int, str] = {}
    for key in range(220):
        words = [rng.choice(vocabulary) for _ in range(rng.randrange(1, 14))]
        bodies[key] = " ".join(words)
        if key % 11 == 0 and key:
            bodies[key] = bodies[key - 1]  # identical to the one before
    table = f"random_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies)
        try:
            for minimum in (0.2, 1 / 3, 0.5, 0.6, 2 / 3, 0.75, 0.8, 0.9, 1.0):
                rows = conn.execute("SELECT a, b, similarity FROM"
                                    " nearsim_pairs_verified(%s, %s, 's_r')",
                                    [table, minimum]).fetchall()
                expected = every_pair(bodies, minimum)
                assert {(a, b): value for a, b, value in rows} == expected, minimum
                assert len(rows) == len(expected)
        finally:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))


# --- The sketch index: candidates by S_R at any distance

SEARCH = ("SELECT key, distance, similarity, short"
          " FROM nearsim_similar_verified(%s, %s, %s, 's_r')")


def sketch_index(conn: psycopg.Connection, table: str) -> None:
    conn.execute(sql.SQL("CREATE INDEX {} ON {} USING gin (nearsim_sketch(body))").format(
        sql.Identifier(f"{table}_sketch"), sql.Identifier(table)))


@pytest.fixture(scope="module")
def sketched(database: str) -> Iterator[tuple[str, dict[int, str]]]:
    """KJV chapters, edited copies of them, copies cut short, and a short note; indexed."""
    rng = random.Random(5)
    texts = [c.text for c in kjv_chapters(["Genesis", "Ruth", "Psalms"])][:200]
    bodies = dict(enumerate(texts))
    for number in range(200, 320):
        bodies[number] = edited(rng, rng.choice(texts))
    for number in range(320, 360):  # a third to two thirds of a chapter: S_R 0.3 to 0.7
        words = rng.choice(texts).split()
        bodies[number] = " ".join(words[:rng.randrange(len(words) // 3, 2 * len(words) // 3)])
    bodies[360] = "a very short note"
    table = f"sketched_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies)
        sketch_index(conn, table)
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
    yield table, bodies
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))


def any_distance(bodies: dict[int, str], query: str, minimum: float) -> dict[str, float]:
    """Every document at least ``minimum`` similar to ``query`` in S_R, at any distance."""
    found = {}
    for key, body in bodies.items():
        value = measures.resemblance(query, body)
        if value >= minimum:
            found[str(key)] = value
    return found


def sketch_queries(bodies: dict[int, str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [edited(rng, bodies[rng.randrange(200)]) if i % 2 else bodies[rng.randrange(360)]
            for i in range(count)]


@pytest.mark.parametrize("minimum", [0.5, 0.6, 0.8, 0.9, 1.0])
def test_every_document_brute_force_finds_at_any_distance(
    database: str, sketched: tuple[str, dict[int, str]], minimum: float
) -> None:
    table, bodies = sketched
    beyond_radius = 0
    with psycopg.connect(database) as conn:
        for query in sketch_queries(bodies, 12, int(minimum * 100)):
            rows = conn.execute(SEARCH, [table, query, minimum]).fetchall()
            expected = any_distance(bodies, query, minimum)
            assert {key: similarity for key, _, similarity, _ in rows} == pytest.approx(expected)
            fingerprint = nearsim.simhash(query)
            assert fingerprint is not None
            for key, distance, _, short in rows:
                si = nearsim.simhash(bodies[int(key)])
                assert si is not None and distance == nearsim.hamming(si, fingerprint)
                assert short == (measures.Shingled(query).short
                                 or measures.Shingled(bodies[int(key)]).short)
            order = [(-similarity, distance, key) for key, distance, similarity, _ in rows]
            assert order == sorted(order)
            if minimum < 0.96:
                radius = calibration.radius_for(minimum)
                beyond_radius += sum(distance > radius for _, distance, _, _ in rows)
    if minimum <= 0.6:
        # the cut copies lie far from their chapters: the radius would miss them
        assert beyond_radius > 0


def test_the_sketch_finds_what_the_radius_misses(
    database: str, sketched: tuple[str, dict[int, str]]
) -> None:
    """Without the index the same call takes candidates within the radius, and misses some."""
    table, bodies = sketched
    asked = sketch_queries(bodies, 24, 7)
    with psycopg.connect(database, autocommit=True) as conn:
        with_index = [conn.execute(SEARCH, [table, q, 0.5]).fetchall() for q in asked]
        conn.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
            sql.Identifier(f"{table}_sketch"), sql.Identifier(f"{table}_kept")))
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(f"{table}_kept")))
        try:
            without = [conn.execute(SEARCH, [table, q, 0.5]).fetchall() for q in asked]
        finally:
            sketch_index(conn, table)
    found_with = sum(len(rows) for rows in with_index)
    found_without = sum(len(rows) for rows in without)
    for more, fewer in zip(with_index, without, strict=True):
        assert set(fewer) <= set(more)
    assert found_with > found_without


def test_only_a_whole_valid_index_of_the_text_column_is_used(database: str) -> None:
    """A partial index, or one over another column, leaves the radius path (and its answer)."""
    texts = [c.text for c in kjv_chapters(["Genesis"])][6:8]
    words = texts[0].split()
    # the first half of Genesis 7: S_R 0.52, 22 bits from the chapter (beyond the radius)
    bodies = {0: texts[0], 1: " ".join(words[:len(words) // 2]), 2: texts[1]}
    table = f"partial_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(table)
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies)
        conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN other text").format(ident))
        conn.execute(sql.SQL("UPDATE {} SET other = body").format(ident))
        try:
            plain = conn.execute(SEARCH, [table, texts[0], 0.5]).fetchall()
            conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (nearsim_sketch(body))"
                                 " WHERE id > 0").format(ident))
            conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (nearsim_sketch(other))"
                                 ).format(ident))
            assert conn.execute(SEARCH, [table, texts[0], 0.5]).fetchall() == plain
            sketch_index(conn, table)
            sketched_rows = conn.execute(SEARCH, [table, texts[0], 0.5]).fetchall()
        finally:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(ident))
    expected = any_distance(bodies, texts[0], 0.5)
    assert {row[0] for row in sketched_rows} == set(expected)
    assert {row[0] for row in plain} == {"0"}  # the cut copy lies beyond the radius
    assert set(expected) == {"0", "1"}


def test_the_index_follows_updates_deletes_and_transactions(database: str) -> None:
    texts = [c.text for c in kjv_chapters(["Ruth"])]
    table = f"changes_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(table)
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, {1: texts[0], 2: texts[1], 3: texts[2]})
        conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN note text").format(ident))
        sketch_index(conn, table)

        def keys(query: str) -> set[str]:
            return {row[0] for row in conn.execute(SEARCH, [table, query, 0.8]).fetchall()}

        try:
            assert keys(texts[0]) == {"1"}
            # updates of another column are HOT: the index points to the first version
            for _ in range(3):
                conn.execute(sql.SQL("UPDATE {} SET note = 'seen' WHERE id = 1").format(ident))
            assert keys(texts[0]) == {"1"}
            conn.execute(sql.SQL("UPDATE {} SET body = %s WHERE id = 2").format(ident),
                         [texts[0] + " amen"])
            assert keys(texts[0]) == {"1", "2"}
            assert keys(texts[1]) == set()
            conn.execute(sql.SQL("DELETE FROM {} WHERE id = 1").format(ident))
            assert keys(texts[0]) == {"2"}
            with conn.transaction():
                conn.execute(sql.SQL("INSERT INTO {} (id, body) VALUES (9, %s)").format(ident),
                             [texts[0]])
                assert keys(texts[0]) == {"2", "9"}  # the statement's own snapshot
                raise psycopg.Rollback()
            assert keys(texts[0]) == {"2"}
            with conn.transaction():
                conn.execute(sql.SQL("INSERT INTO {} (id, body) VALUES (10, %s)").format(ident),
                             [texts[2]])
                raise psycopg.Rollback()
            assert keys(texts[2]) == {"3"}
        finally:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(ident))


def test_privileges_and_row_security(database: str) -> None:
    texts = [c.text for c in kjv_chapters(["Ruth"])]
    table = f"guarded_{uuid.uuid4().hex[:8]}"
    role = f"reader_{uuid.uuid4().hex[:8]}"
    ident, who = sql.Identifier(table), sql.Identifier(role)
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, {1: texts[0], 2: texts[0] + " amen", 3: texts[0] + " selah"})
        sketch_index(conn, table)
        conn.execute(sql.SQL("CREATE ROLE {}").format(who))
        try:
            conn.execute(sql.SQL("SET ROLE {}").format(who))
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                conn.execute(SEARCH, [table, texts[0], 0.8])
            conn.execute("RESET ROLE")
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(ident, who))
            conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(ident))
            conn.execute(sql.SQL("CREATE POLICY visible ON {} FOR SELECT USING (id <> 3)"
                                 ).format(ident))
            conn.execute(sql.SQL("SET ROLE {}").format(who))
            seen = {row[0] for row in conn.execute(SEARCH, [table, texts[0], 0.8]).fetchall()}
            conn.execute("RESET ROLE")
            owner = {row[0] for row in conn.execute(SEARCH, [table, texts[0], 0.8]).fetchall()}
        finally:
            conn.execute("RESET ROLE")
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(ident))
            conn.execute(sql.SQL("DROP ROLE {}").format(who))
    assert seen == {"1", "2"}
    assert owner == {"1", "2", "3"}


def test_other_questions_keep_the_radius(database: str,
                                         sketched: tuple[str, dict[int, str]]) -> None:
    """Another measure, an explicit radius or a threshold below 0.5 take the radius path."""
    table, bodies = sketched
    with psycopg.connect(database) as conn:
        missed = 0
        for number in range(320, 360):
            query = bodies[number]
            rows = conn.execute(
                "SELECT key, similarity FROM nearsim_similar_verified(%s, %s, 0.5, 's_r', 20)",
                [table, query]).fetchall()
            assert dict(rows) == pytest.approx(brute_force(bodies, query, 20, 0.5, "s_r"))
            missed += len(any_distance(bodies, query, 0.5)) - len(rows)
        assert missed > 0  # the radius path: the cut copies' chapters lie beyond 20 bits
        query = bodies[321]
        rows = conn.execute(
            "SELECT key, similarity FROM nearsim_similar_verified(%s, %s, 0.9, 'containment')",
            [table, query]).fetchall()
        expected = brute_force(bodies, query, calibration.radius_for(0.9), 0.9,
                                      "containment")
        assert dict(rows) == pytest.approx(expected)
        with pytest.raises(psycopg.Error, match=r"between 0\.5 and 0\.95"):
            conn.execute(SEARCH, [table, query, 0.3])


def test_empty_and_short_queries(database: str, sketched: tuple[str, dict[int, str]]) -> None:
    table, _ = sketched
    with psycopg.connect(database) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert conn.execute(SEARCH, [table, "", 0.8]).fetchall() == []
        assert conn.execute(SEARCH, [table, "... !!", 0.8]).fetchall() == []
        rows = conn.execute(SEARCH, [table, "A very SHORT note.", 0.9]).fetchall()
        assert [(key, short) for key, _, _, short in rows] == [("360", True)]
        assert any("unreliable" in notice for notice in notices)


def test_sketch_of_a_text(database: str) -> None:
    texts = [c.text for c in kjv_chapters(["Ruth", "Psalms"])][:60]
    rng = random.Random(2)
    with psycopg.connect(database) as conn:
        def sketch(text: str | None) -> list[int] | None:
            row = conn.execute("SELECT nearsim_sketch(%s)", [text]).fetchone()
            assert row is not None
            return row[0]

        assert sketch(None) is None
        assert sketch("") is None
        assert sketch(" ,;. ") is None
        assert sketch("word") is not None and len(sketch("word") or []) == 20
        # the same shingle set, the same sketch: case, punctuation and spacing aside
        assert sketch("In the beginning God created") == sketch("in THE beginning, god created!")
        # two texts share a band with probability about S_R squared
        shared = expected = 0.0
        for text in texts:
            other = edited(rng, text)
            a, b = sketch(text), sketch(other)
            assert a is not None and b is not None
            shared += sum(x == y for x, y in zip(a, b, strict=True)) / 20
            expected += measures.resemblance(text, other) ** 2
        assert abs(shared - expected) / len(texts) < 0.05
