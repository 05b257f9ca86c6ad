"""Feature profiles: names, options, golden vectors in Python and SQL, tables and loads."""

from __future__ import annotations

import importlib.metadata
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
import xxhash
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

import nearsim
from nearsim.client.cli import cli
from nearsim.core import bits, fingerprint, profiles
from nearsim.core import text as core_text
from nearsim.core.profiles import ALIASES, Profile, ProfileError, canonical

from cases import CASES, GOLDEN_PROFILES, expand, golden_path

SPECS = [*(f"{alias}/1" for alias in ALIASES), "words:1-3", "words:2-4+unique",
         "chars:3-6+unique", "chars:1", "words:2+novowels+unique-words",
         "words:3+stop:french+stem:french", "words:1+stem:german", "words:4+stop:auto",
         "words:3+soundex+unique-words"]  # fmt: skip


def golden(profile: str) -> list[dict[str, Any]]:
    path = golden_path(profile)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def reference_simhash(profile: Profile, text: str) -> int | None:
    """The fingerprint from the profile's feature strings, one xxhash call each."""
    features = profile.features(text)
    hashes = np.array([xxhash.xxh64_intdigest(f.encode()) for f in features], dtype=np.uint64)
    if profile.unique:
        hashes = np.unique(hashes)
    if len(hashes) == 0:
        return None
    counts = ((hashes[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).sum(axis=0)
    value = sum(1 << bit for bit, count in enumerate(counts.tolist()) if count > len(hashes) // 2)
    return bits.to_signed(value)


# -- names ---------------------------------------------------------------------------


def test_canonical_names() -> None:
    assert canonical("words:3") == canonical("default") == canonical("words:3/1") == "default/1"
    assert canonical("words:3+stem:english+stop:english") == "english/1"
    assert canonical("words:3+unique+novowels+stop:danish") == (
        "words:3+stop:danish+novowels+unique/1")
    assert canonical("chars:4-4") == "chars:4/1"
    assert canonical(" set ") == "set/1"
    for alias, spec in ALIASES.items():
        assert Profile.named(alias) == Profile.named(spec)


@pytest.mark.parametrize(("name", "message"), [
    ("words:3/3", "version 3 is unknown to this nearsim, which computes versions 1 and 2"),
    ("words:3/x", "the version after '/' must be a number"),
    ("shingles", "expected a short name"),
    ("words:0", "sizes must satisfy 1 <= N <= M <= 16"),
    ("words:4-2", "sizes must satisfy"),
    ("chars:65", "sizes must satisfy 1 <= N <= M <= 64"),
    ("words:3+stop:klingon", "no stop-word list for 'klingon'"),
    ("words:3+stem:latin", "no stemmer for 'latin'"),
    ("words:3+unique+unique", "option 'unique' is given twice"),
    ("words:3+soundex:1", "unknown option 'soundex:1'"),
    ("words:3+", "unknown option ''"),
])  # fmt: skip
def test_bad_names_are_explained(name: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as caught:
        Profile.named(name)
    assert repr(name) in str(caught.value)


# -- what each option does ---------------------------------------------------------


def test_stop_lists_are_postgresqls() -> None:
    server = Path("/usr/share/postgresql/15/tsearch_data")
    shipped = sorted(profiles.STOP_WORDS_DIR.glob("*.stop"))
    assert [p.stem for p in shipped] == list(profiles.STOP_WORD_LANGUAGES)
    for path in shipped:
        assert path.read_bytes() == (server / path.name).read_bytes(), path.name
    assert len(profiles.stop_words("english")) == 127
    assert {"the", "and", "of"} <= profiles.stop_words("english")



def test_options_change_the_tokens_as_documented() -> None:
    text = "The Runners were RUNNING past Robert's gardens, the runners!"
    assert Profile.named("words:1+stop:english").tokens(text) == [
        "runners", "running", "past", "robert", "gardens", "runners"]  # fmt: skip
    assert Profile.named("english").tokens(text) == [
        "runner", "run", "past", "robert", "garden", "runner"]  # fmt: skip
    assert Profile.named("soundex").tokens(text + " 1611") == [
        "R562", "R552", "P230", "R163", "G635", "R562", "1611"]  # fmt: skip
    assert Profile.named("words:1+novowels").tokens("A été oui strength") == ["t", "strngth"]
    assert Profile.named("words:1+unique-words").tokens("a b a c b d") == ["a", "b", "c", "d"]
    # stop words are normalised like texts: the German list's "daß" matches "dass"
    assert Profile.named("words:1+stop:german").tokens("dass DASS daß Haus") == ["haus"]


def test_features_as_documented() -> None:
    assert Profile.named("words:1-3").features("a b c") == ["a", "b", "c", "a b", "b c", "a b c"]
    assert Profile.named("chars:3").features("Ab, cd") == ["ab ", "b c", " cd"]
    assert Profile.named("chars:5").features("Ab") == ["ab"]  # shorter: one feature, all of it
    assert Profile.named("words:4").features("a b") == ["a b"]
    assert Profile.named("words:3").features("...") == []
    assert Profile.named("chars:2").simhash("...") is None


def test_unique_counts_each_feature_once() -> None:
    repeated = "one two three four " * 40 + "five six seven eight"
    once = "one two three four " * 2 + "five six seven eight"
    assert Profile.named("set").simhash(repeated) == Profile.named("set").simhash(once)
    assert nearsim.simhash(repeated) != nearsim.simhash(once)


def test_auto_uses_the_detected_language() -> None:
    french = dict((c["name"], c) for c in CASES)["lang-french"]["text"]
    german = dict((c["name"], c) for c in CASES)["lang-german"]["text"]
    assert profiles.detect_language(french) == "french"
    assert profiles.detect_language(german) == "german"
    assert profiles.detect_language("12 345 6789") is None  # nothing to place
    assert profiles.detect_language("") is None
    auto = Profile.named("auto")
    assert auto.simhash(french) == Profile.named("words:3+stop:french+stem:french").simhash(french)
    assert auto.simhash(german) == Profile.named("words:3+stop:german+stem:german").simhash(german)
    # the same answer every time, whatever came before
    assert [profiles.detect_language(t) for t in (german, french, german)] == [
        "german", "french", "german"]


def test_other_library_versions_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "3.0.1" if name == "snowballstemmer" else real(name))
    with pytest.raises(RuntimeError, match=r"english/1 needs snowballstemmer 2\.2\.0 exactly "
                       r"\(found 3\.0\.1\)"):
        nearsim.simhash("some words here", "english")
    assert nearsim.simhash("some words here", "chars") is not None  # needs no stemmer


# -- one implementation, checked against a plain one --------------------------------


@pytest.mark.parametrize("spec", SPECS)
def test_default_steps_and_reference_agree(spec: str) -> None:
    profile = Profile.named(spec)
    texts = [expand(c) for c in CASES if "text" in c]
    for text in texts:
        assert profile.simhash(text) == reference_simhash(profile, text), text[:60]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab cé.\n\u00adΣ漢"), max_size=60),
       st.sampled_from(SPECS))  # fmt: skip
def test_reference_agrees_on_generated_texts(text: str, spec: str) -> None:
    profile = Profile.named(spec)
    assert profile.simhash(text) == reference_simhash(profile, text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_general_steps_give_the_default_fingerprint(text: str) -> None:
    assert Profile.named("words:3").simhash(text) == fingerprint.simhash(text)


def test_pieces_do_not_change_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(expand(c) for c in CASES if "text" in c)
    whole = {spec: Profile.named(spec).simhash(text) for spec in SPECS}
    monkeypatch.setattr(core_text, "PIECE_CHARS", 97)  # many pieces, carried features
    assert {spec: Profile.named(spec).simhash(text) for spec in SPECS} == whole


def test_simhash_many_with_a_profile() -> None:
    texts = [expand(c) for c in CASES if "text" in c]
    for spec in ("chars", "english"):
        assert nearsim.simhash_many(texts, spec) == [nearsim.simhash(t, spec) for t in texts]
    with pytest.raises(TypeError):
        nearsim.simhash_many([b"bytes"], "chars")  # type: ignore[list-item]


# -- golden vectors ----------------------------------------------------------------


def test_every_golden_profile_has_its_file() -> None:
    names = {c["name"] for c in CASES}
    assert len(GOLDEN_PROFILES) >= 12
    options = "+".join(Profile.named(p).spec for p in GOLDEN_PROFILES)
    for option in ("chars:", "words:1-3", "stop:", "stem:", "auto", "soundex", "novowels",
                   "unique-words", "unique"):
        assert option in options, option
    for profile in GOLDEN_PROFILES:
        assert canonical(profile) == profile
        assert {c["name"] for c in golden(profile)} == names, profile


@pytest.mark.parametrize("profile", GOLDEN_PROFILES)
def test_golden_vectors(profile: str) -> None:
    texts = {c["name"]: expand(c) for c in CASES}
    wrong = [(case["name"], case["simhash"]) for case in golden(profile)
             if nearsim.simhash(texts[case["name"]], profile) != case["simhash"]]  # fmt: skip
    assert wrong == []
    with_values = [c for c in golden(profile) if c["simhash"] is not None]
    assert all(nearsim.bits(c["simhash"]) == c["bits"] for c in with_values)
    assert len({c["simhash"] for c in with_values}) > len(with_values) // 2


def test_golden_vectors_in_sql(conn: psycopg.Connection) -> None:
    texts = {c["name"]: expand(c) for c in CASES}
    wrong = []
    for profile in GOLDEN_PROFILES:
        cases = golden(profile)
        rows = conn.execute(
            "SELECT simhash(t, %s) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n",
            [profile, [texts[c["name"]] for c in cases]],
        ).fetchall()
        wrong += [(profile, c["name"]) for c, (value,) in zip(cases, rows, strict=True)
                  if value != c["simhash"]]  # fmt: skip
    assert wrong == []


def test_profile_functions_in_sql(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT nearsim_profile('words:3+stem:english+stop:english')"
                        ).fetchone() == ("english/1",)  # fmt: skip
    listed = conn.execute("SELECT name, specification FROM nearsim_profiles()").fetchall()
    assert listed == [(f"{a}/{v}", f"{s}/{v}") for v in (1, 2) for a, s in ALIASES.items()]
    assert conn.execute("SELECT simhash('x y z', 'words:3'), simhash('x y z')").fetchone() == (
        nearsim.simhash("x y z"),) * 2
    khmer = "ព្រះរាជាណាចក្រកម្ពុជា ជាតិ សាសនា"
    # default/2 in C, words:3/2 (the same profile by another name) in PL/Python
    assert conn.execute("SELECT simhash(%s, 'default/2'), simhash(%s, 'words:3/2')",
                        [khmer, khmer]).fetchone() == (nearsim.simhash(khmer, "default/2"),) * 2
    assert nearsim.simhash(khmer, "default/2") != nearsim.simhash(khmer)
    assert conn.execute("SELECT simhash(NULL, 'chars'), simhash('x', NULL)").fetchone() == (
        None, None)
    for bad in ("words:3/3", "words:3+bogus", "chars:99"):
        with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
            with conn.transaction():
                conn.execute("SELECT simhash('x', %s)", [bad])
        assert repr(bad) in str(caught.value)
        assert "nearsim_profiles()" in (caught.value.diag.message_hint or "")


# -- tables ------------------------------------------------------------------------


TEXTS = [
    "The runners were running through the gardens of the old king at dawn",
    "The runner was running through the garden of the old kings at dawn",
    "A completely different text about ships and the sea and the storm",
    "Les coureurs couraient dans les jardins du vieux roi à l'aube",
]


def test_a_table_enabled_with_a_profile(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE pdocs (id int PRIMARY KEY, body text)")
    conn.execute("INSERT INTO pdocs SELECT n, t FROM unnest(%s::text[]) WITH ORDINALITY u(t, n)",
                 [TEXTS])  # fmt: skip
    conn.execute("SELECT nearsim_enable('pdocs', 'body', profile => 'words:3+stem:english')")
    assert conn.execute("SELECT profile FROM nearsim_tables WHERE tbl = 'pdocs'::regclass"
                        ).fetchone() == ("words:3+stem:english/1",)  # fmt: skip
    stored = dict(conn.execute("SELECT id, si FROM pdocs").fetchall())
    assert stored == {i + 1: nearsim.simhash(t, "words:3+stem:english")
                      for i, t in enumerate(TEXTS)}  # fmt: skip
    # a query text is fingerprinted with the table's profile
    query = "The runners were running through the garden of the old kings at dawn"
    found = conn.execute("SELECT (doc).id, distance FROM pdocs_similar(%s, 64) ORDER BY 1",
                         [query]).fetchall()  # fmt: skip
    own = nearsim.simhash(query, "words:3+stem:english")
    assert found == [(i, nearsim.hamming(own, v)) for i, v in sorted(stored.items())]
    assert found[0][1] == 0  # stemmed, the query is the first text
    # inserts, updates and the verification use it too
    conn.execute("INSERT INTO pdocs VALUES (9, 'gardens of kings running runners')")
    conn.execute("UPDATE pdocs SET body = body || ' again' WHERE id = 3")
    report = conn.execute("SELECT ok, stale, profile_ok FROM nearsim_verify('pdocs', true)"
                          ).fetchone()  # fmt: skip
    assert report == (True, 0, True)
    # switching the profile recomputes every fingerprint
    rebuilt = conn.execute("SELECT recomputed FROM nearsim_rebuild('pdocs', profile => 'chars')"
                           ).fetchone()  # fmt: skip
    assert rebuilt == (5,)
    assert dict(conn.execute("SELECT id, si = simhash(body, 'chars/1') FROM pdocs").fetchall()) \
        == dict.fromkeys((1, 2, 3, 4, 9), True)
    assert conn.execute("SELECT ok FROM nearsim_verify('pdocs', true)").fetchone() == (True,)
    assert conn.execute("SELECT count(*) FROM pdocs_similar(%s, 0)",
                        [TEXTS[2] + " again"]).fetchone() == (1,)  # fmt: skip
    # verified search takes its radius from the profile's calibration
    verified = conn.execute("SELECT key FROM nearsim_similar_verified('pdocs', %s, 0.8)",
                            [TEXTS[0]]).fetchall()  # fmt: skip
    assert verified == [("1",)]
    assert conn.execute("SELECT nearsim_radius(0.8, 'chars'), nearsim_radius(0.8)"
                        ).fetchone() == (8, 13)  # fmt: skip


def test_enable_refuses_a_column_of_another_profile(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE pdocs (id int PRIMARY KEY, body text, si bigint)")
    conn.execute("INSERT INTO pdocs SELECT n, t, simhash(t) FROM unnest(%s::text[])"
                 " WITH ORDINALITY u(t, n)", [TEXTS])  # fmt: skip
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as caught:
        with conn.transaction():
            conn.execute("SELECT nearsim_enable('pdocs', 'body', profile => 'english')")
    assert "holds values that are not english/1 fingerprints of column body" in str(caught.value)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown option"):
        with conn.transaction():
            conn.execute("SELECT nearsim_enable('pdocs', 'body', profile => 'words:3+x')")
    conn.execute("SELECT nearsim_enable('pdocs', 'body')")  # they are default/1 ones


def test_uncalibrated_profiles_need_a_radius(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE pdocs (id int PRIMARY KEY, body text)")
    conn.execute("INSERT INTO pdocs VALUES (1, %s)", [TEXTS[0]])
    conn.execute("SELECT nearsim_enable('pdocs', 'body', profile => 'words:2')")
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        with conn.transaction():
            conn.execute("SELECT * FROM nearsim_similar_verified('pdocs', 'x', 0.8)")
    assert "no calibration ships for fingerprint profile words:2/1" in str(caught.value)
    assert "max_distance" in (caught.value.diag.message_hint or "")
    assert conn.execute("SELECT key FROM nearsim_similar_verified('pdocs', %s, 0.8,"
                        " max_distance => 10)", [TEXTS[0]]).fetchall() == [("1",)]  # fmt: skip


# -- the client ------------------------------------------------------------------------


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_init_load_and_compare_with_a_profile(database: str, tmp_path: Path) -> None:
    table = f"profiled_{uuid.uuid4().hex[:8]}"
    try:
        init_load_and_compare(database, tmp_path, table)
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table)))


def init_load_and_compare(database: str, tmp_path: Path, table: str) -> None:
    for i, text in enumerate(TEXTS):
        (tmp_path / f"{i}.txt").write_text(text, encoding="utf-8")
    result = run("init", "--dsn", database, "-t", table, "--profile", "soundex")
    assert result.exit_code == 0, result.output
    result = run("load", str(tmp_path), "--dsn", database, "-t", table, "-q")
    assert result.exit_code == 0, result.output
    with psycopg.connect(database) as conn:
        stored = dict(conn.execute(sql.SQL("SELECT body, si FROM {}").format(
            sql.Identifier(table))).fetchall())
        assert stored == {t: nearsim.simhash(t, "soundex") for t in TEXTS}
        check = conn.execute("SELECT ok, stale FROM nearsim_verify(%s, true)", [table]).fetchone()
        assert check == (True, 0)
    # the server computes the same fingerprints for --server-side
    (tmp_path / "extra.txt").write_text("Rupert met Smyth in the gardens today", encoding="utf-8")
    result = run("load", str(tmp_path / "extra.txt"), "--dsn", database, "-t", table, "-q",
                 "--server-side")  # fmt: skip
    assert result.exit_code == 0, result.output
    with psycopg.connect(database) as conn:
        extra = conn.execute(sql.SQL("SELECT si FROM {} WHERE body LIKE 'Rupert%'").format(
            sql.Identifier(table))).fetchone()
        assert extra == (nearsim.simhash("Rupert met Smyth in the gardens today", "soundex"),)
    (tmp_path / "extra.txt").unlink()
    # another profile for this table is refused, by init and by load
    result = run("init", "--dsn", database, "-t", table, "--profile", "chars")
    assert result.exit_code == 2
    assert f'{table}" is enabled with fingerprint profile soundex/1, not chars/1' in result.output
    result = run("load", str(tmp_path), "--dsn", database, "-t", table, "-q", "-p", "chars")
    assert result.exit_code == 2 and "holds fingerprints of profile soundex/1, not chars/1" in (
        result.output)
    result = run("load", str(tmp_path), "--dsn", database, "-t", table, "-p", "chars:0")
    assert result.exit_code == 2 and "sizes must satisfy" in result.output
    # compare: files with --profile, stored documents with the table's
    files = [str(tmp_path / "0.txt"), str(tmp_path / "1.txt")]
    result = run("compare", *files, "--profile", "english", "--json")
    compared = json.loads(result.output)
    assert compared["profile"] == "english/1"
    assert compared["a"]["fingerprint"] == nearsim.simhash(TEXTS[0], "english")
    assert compared["distance"] == 0
    key = files[0]
    Path(key).unlink()  # no longer a file: the key of a stored document
    result = run("compare", files[1], key, "--dsn", database, "-t", table, "--json")
    assert json.loads(result.output)["profile"] == "soundex/1"
    result = run("compare", files[1], key, "--dsn", database, "-t", table, "-p", "chars")
    assert result.exit_code == 2 and "holds fingerprints of profile soundex/1, not chars/1" in (
        result.output)
