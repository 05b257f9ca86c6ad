"""Every object the extension installs, called by hostile roles: a matrix read from the catalog.

One file of over a thousand lines, for a reason: the matrix is one table,
checked whole against the catalog, so that an object without an entry
fails; split, no part could say that every object is in it.

MATRIX names each function, operator class and family, access method,
event trigger and table of the extension (``pg_depend`` deptype 'e' on
nearsim) and each function nearsim makes for an enabled table, and says
how to exercise it, or why it is exempt; the first tests compare it with
the catalog, so that an object added later without an entry fails them.
Each entry is then exercised

(a) by a role without privileges on a victim's enabled table: refused
    (42501), or nothing of the victim's;
(b) by a row-level-security tenant (``USING (tenant = current_user)``) and by
    a role that may read the key column only: the tenant gets exactly what
    the same call gives on a copy of what its own ``SELECT`` of the table
    returns; the key reader is refused whatever reads more than the key;
    neither is told a hidden row's key, text or fingerprint, in rows,
    errors or notices; and nobody is shown a Python traceback;
(c) by a superuser on a table a hostile role owns (its schema, table and
    column names full of quotes, semicolons and dollar signs), with the
    hostile role's traps set (its generated functions replaced by SECURITY
    DEFINER traps and linked to the table again, triggers of every kind, an
    index expression, a column default, a row-level security policy, casts
    of its type and domain), and with functions, operators, types and
    relations named as PostgreSQL's and
    the extension's first on the superuser's search_path and in the
    extension's schema: no trap ever runs with a superuser's rights, the
    hostile role stays unprivileged, and the call gives the same answer as
    under a search_path of pg_catalog alone.  A trap may run with the
    hostile role's own rights (its triggers run when nearsim works on the
    table as its owner, in a security-restricted operation).

Every call runs in a transaction that is rolled back.  The loader's paths
are exercised by the tenant and the key reader at the end.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hostile import (
    LURE,
    TRAP_INSPECTION,
    Outcome,
    as_role,
    assert_clean,
    attempt,
    lure_statements,
    make_all,
    privileged_runs,
    replace_generated_functions,
    roles_and_database,
    rows,
    run,
    superuser_traps,
    table_helper_statements,
    table_trap_statements,
    tokens,
    trap_log_statements,
)

from nearsim.client.loader import LoadOptions, Reporter, load_paths
from nearsim.client.sources import Failure

# -- the documents -----------------------------------------------------------------

TEXTS = {
    1: "The quarterly memo on the northern harvest reports that the river fields yielded more"
       " grain than the mountain terraces and that the granaries near the old mill are nearly"
       " full before the first frost of the season",
    2: "A letter about roads taxes and the price of salt in the southern provinces this year"
       " says that the merchants of the coast have doubled their tolls and the farmers must now"
       " carry their goods through the hills",
    3: "Minutes of the guild assembly record that the weavers asked for a new hall by the river"
       " and that the council agreed to lend them the money for two winters provided the looms"
       " stay in the city walls",
    4: "The surveyor describes a bridge of seven arches over the western ford whose piers were"
       " sunk on oak piles and whose roadway was paved with granite from the quarry above the"
       " village",
    5: "Recipes for winter bread call for rye flour caraway seeds dark honey and a long slow rise"
       " near the warm stove while the wind howls outside the shuttered kitchen windows at night",
}
# A word only the victim's documents have: a role that is told it learned their text.
MARKERS = {1: "zanzibarite", 2: "quokkasecret", 3: "narwhalprivate"}
HIDDEN = {730100 + n: f"{TEXTS[n]} {MARKERS[n]}" for n in MARKERS}
# The tenant's own documents, near-duplicates of the victim's and of each other.
VISIBLE = {410001: TEXTS[1], 410002: TEXTS[2], 410003: TEXTS[4],
           410004: TEXTS[4].replace("above the village", "above the old village")}
NEAR = TEXTS[1] + " indeed"  # near 730101 and 410001
RADIUS = 12  # of the searches: the near-duplicates above are within 10 bits


def quoted(text: str) -> str:
    """An SQL string constant."""
    return "'" + text.replace("'", "''") + "'"


def literal(text: str) -> str:
    return quoted(text) + "::pg_catalog.text"


def ident(name: str) -> str:
    """An SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


# -- what a cell is called on --------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The objects one role kind's calls name (as the catalog names them)."""

    role: str  # stranger, tenant, column, seen (the tenant's copy) or superuser
    schema: str  # of the tables below
    table_name: str  # an enabled table
    fresh_name: str  # a table of the same owner, not enabled
    index_name: str  # a nearsim_btree index of the table
    guarded_name: str  # a guarded table, and the near-duplicate written into it
    guard_row: tuple[int, str]
    generated_table: tuple[str, str]  # the enabled table whose generated functions are called
    registration: tuple[int, str, str, str]  # bands, profile, fingerprint and similar functions
    index_expression: str  # of a nearsim_btree index made on the table
    owner_moves: tuple[str, ...] = ()  # after the table is given away: its old owner's calls
    # the key, text and fingerprint columns of every table above
    key: str = "id"
    body: str = "body"
    fp: str = "si"
    ext: str = "public"
    near: str = literal(NEAR)
    other: str = literal(TEXTS[5])

    def qualified(self, name: str) -> str:
        return f"{ident(self.schema)}.{ident(name)}"

    @property
    def table(self) -> str:
        return self.qualified(self.table_name)

    @property
    def reg(self) -> str:
        return f"{quoted(self.table)}::pg_catalog.regclass"

    @property
    def fresh_reg(self) -> str:
        return f"{quoted(self.qualified(self.fresh_name))}::pg_catalog.regclass"

    @property
    def index_reg(self) -> str:
        return f"{quoted(self.qualified(self.index_name))}::pg_catalog.regclass"

    @property
    def guarded(self) -> str:
        return self.qualified(self.guarded_name)

    @property
    def generated(self) -> str:
        return f"{ident(self.generated_table[0])}.{ident(self.generated_table[1])}"

    def function(self, suffix: str) -> str:
        """A function nearsim made for generated_table."""
        schema, name = self.generated_table
        return f"{ident(schema)}.{ident(f'{name}_{suffix}')}"

    # the columns as identifiers (k, b, f) and as names (the arguments nearsim takes)
    @property
    def k(self) -> str:
        return ident(self.key)

    @property
    def b(self) -> str:
        return ident(self.body)

    @property
    def f(self) -> str:
        return ident(self.fp)

    @property
    def key_name(self) -> str:
        return f"{quoted(self.key)}::pg_catalog.name"

    @property
    def body_name(self) -> str:
        return f"{quoted(self.body)}::pg_catalog.name"

    @property
    def fp_name(self) -> str:
        return f"{quoted(self.fp)}::pg_catalog.name"


Statements = Callable[[Target], list[str]]


class Kind(Enum):
    PURE = "computes from its arguments, reads no table"
    BODY = "a PL/Python body, EXECUTE revoked from PUBLIC: only its C function calls it"
    READS = "reads the table's rows"
    OWNER = "for the table's owner"
    WRITES = "for a role that may write the table"
    INFO = "tells about the table, nothing of its rows"
    GUARDED = "refuses a near-duplicate written into a guarded table"
    TRIGGER = "a trigger or event trigger function: fired, never called"
    HANDLER = "the access method's handler: PostgreSQL calls it"
    SUPERUSER = "changes the extension's own objects: for a superuser"


REFUSED = frozenset({"42501"})
ALLOWED = "allowed"
SEEN = "the same as on the tenant's copy of what it may SELECT"
Expected = frozenset[str] | str
ROLES = ("stranger", "tenant", "column", "superuser")

EXPECTED: dict[Kind, dict[str, Expected]] = {
    Kind.PURE: dict.fromkeys(ROLES, ALLOWED),
    Kind.BODY: {"stranger": REFUSED, "tenant": REFUSED, "column": REFUSED,
                "superuser": ALLOWED},
    Kind.READS: {"stranger": REFUSED, "tenant": SEEN, "column": REFUSED, "superuser": ALLOWED},
    Kind.OWNER: {"stranger": REFUSED, "tenant": REFUSED, "column": REFUSED,
                 "superuser": ALLOWED},
    Kind.WRITES: {"stranger": REFUSED, "tenant": ALLOWED, "column": ALLOWED,
                  "superuser": ALLOWED},
    Kind.INFO: dict.fromkeys(ROLES, ALLOWED),
    Kind.GUARDED: {"stranger": REFUSED, "tenant": frozenset({"23N01"}),
                   "column": frozenset({"23N01"}), "superuser": frozenset({"23N01"})},
    Kind.TRIGGER: dict.fromkeys(ROLES, frozenset({"39P01", "0A000"})),
    Kind.SUPERUSER: {"stranger": REFUSED, "tenant": REFUSED, "column": REFUSED,
                     "superuser": ALLOWED},
}


@dataclass(frozen=True)
class Cell:
    """How to exercise one object, or why it is exempt (and a query that shows it)."""

    kind: Kind
    statements: Statements | None = None
    exempt: str | None = None
    exempt_check: str | None = None  # true when the reason holds; %s is the extension schema
    expected: dict[str, Expected] = field(default_factory=dict)  # over EXPECTED[kind]
    expected_rows: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    never_said: tuple[str, ...] = ()  # words a role other than the superuser is never told
    # what the superuser's call on the hostile table must give
    superuser_check: Callable[[Target, Outcome], None] | None = None

    def expectation(self, role: str) -> Expected:
        return self.expected.get(role, EXPECTED[self.kind][role])


def select(function: str, arguments: str = "") -> Statements:
    """``SELECT * FROM <extension schema>.function(arguments)``, {t.name} filled in."""
    return lambda t: [f"SELECT * FROM {t.ext}.{function}({arguments.format(t=t)})"]


def called(function: str) -> Statements:
    """``SELECT <extension schema>.function()``: a trigger function, called by name."""
    return lambda t: [f"SELECT {t.ext}.{function}()"]


def generated(suffix: str, arguments: str) -> Statements:
    """A call of a function nearsim made for the target's table."""
    return lambda t: [f"SELECT * FROM {t.function(suffix)}({arguments.format(t=t)})"]


def search(t: Target) -> list[str]:
    call = f"{t.ext}.nearsim_search({t.reg}, {t.fp_name}, {t.ext}.simhash({t.near}), {RADIUS})"
    # the tuple ids first, on their own (a role refused is refused here), then
    # how many and whose: the rows are the caller's SELECT of them
    return [f"SELECT pg_catalog.cardinality({call})",
            f"SELECT pg_catalog.cardinality(s.found), ARRAY(SELECT d.{t.k} FROM ONLY {t.table}"
            f" AS d WHERE d.ctid OPERATOR(pg_catalog.=) ANY (s.found) ORDER BY d.{t.k})"
            f" FROM (SELECT {call} AS found) AS s"]


def as_owner(t: Target) -> list[str]:
    statement = quoted(f"SELECT pg_catalog.count(*) FROM ONLY {t.table}")
    return [f"SELECT {t.ext}.nearsim_as_owner({t.reg}, {statement}::pg_catalog.text)"]


def verified_search(t: Target, function: str = "nearsim_similar_verified") -> list[str]:
    """Both ways of a verified search: candidates from the sketch index (in C), and
    from the rotation index within a radius (the PL/Python body)."""
    call = f"{t.ext}.{function}({t.reg}, {t.near}, 0.5::pg_catalog.float8, 's_r'::pg_catalog.text"
    return [f"SELECT 'sketch'::pg_catalog.text, * FROM {call}, NULL::pg_catalog.int4)"
            f" UNION ALL SELECT 'radius'::pg_catalog.text, * FROM {call}, {RADIUS})"]


def verify_flags_the_replaced_functions(t: Target, outcome: Outcome) -> None:
    """nearsim_verify of the hostile table: not ok, its triggers and functions not ok
    (triggers_ok false), and a warning naming a function replaced."""
    assert outcome.rows is not None, outcome.describe()
    ok, triggers_ok = outcome.rows[0][0], outcome.rows[0][9]
    assert (ok, triggers_ok) == ("False", "False"), f"verify said {outcome.describe()}"
    assert "not the one nearsim made" in outcome.said, outcome.describe()


def index_scan(t: Target) -> list[str]:
    """The rotation index read through its operator class (the planner may use no other)."""
    return ["SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off",
            f"SELECT d.{t.k} FROM ONLY {t.table} AS d WHERE {t.ext}.nearsim_rotate(d.{t.f}, 0)"
            " OPERATOR(pg_catalog.>=) '-9223372036854775808'::pg_catalog.int8"]


def register(t: Target) -> list[str]:
    bands, profile, fingerprint, similar = t.registration
    return [f"SELECT {t.ext}.nearsim_register({t.reg}, {t.key_name}, {t.body_name},"
            f" {t.fp_name}, {bands}, {literal(profile)}, NULL::pg_catalog.name,"
            f" {quoted(fingerprint)}::pg_catalog.name, NULL::pg_catalog.name,"
            f" {quoted(similar)}::pg_catalog.name)"]


def guarded_insert(t: Target) -> list[str]:
    key, text = t.guard_row
    return [f"INSERT INTO {t.guarded} ({t.k}, {t.b}) VALUES ({key}, {literal(text)})"]


def fingerprinted_insert(t: Target) -> list[str]:
    return [f"INSERT INTO {t.generated} ({t.k}, {t.b}) VALUES (890001, {t.other})"]


MATRIX: dict[str, Cell] = {
    # -- fingerprints, bands and measures of texts
    "function hamming(bigint,bigint)": Cell(
        Kind.PURE, select("hamming", "'-1'::pg_catalog.int8, 3::pg_catalog.int8")),
    "function simhash_bits(bigint)": Cell(
        Kind.PURE, select("simhash_bits", "'-2'::pg_catalog.int8")),
    "function simhash_from_bits(text)": Cell(
        Kind.PURE, select("simhash_from_bits", literal("01" * 32))),
    "function simhash(text)": Cell(Kind.PURE, select("simhash", "{t.near}")),
    "function simhash(text,text)": Cell(
        Kind.PURE, select("simhash", "{t.near}, 'english'::pg_catalog.text")),
    "function nearsim_profile(text)": Cell(
        Kind.PURE, select("nearsim_profile", "'words:3'::pg_catalog.text")),
    "function nearsim_profiles()": Cell(Kind.PURE, select("nearsim_profiles")),
    "function simhash_profile()": Cell(Kind.PURE, select("simhash_profile")),
    "function nearsim_band(bigint,integer,integer)": Cell(
        Kind.PURE, select("nearsim_band", "'-2'::pg_catalog.int8, 4, 1")),
    "function nearsim_band_probes(bigint,integer,integer,integer)": Cell(
        Kind.PURE, select("nearsim_band_probes", "'-2'::pg_catalog.int8, 2, 4, 1")),
    "function nearsim_rotate(bigint,integer)": Cell(
        Kind.PURE, select("nearsim_rotate", "'-2'::pg_catalog.int8, 16")),
    "function nearsim_compare(text,text,integer,integer,integer)": Cell(
        Kind.PURE, select("nearsim_compare", "{t.near}, {t.other}, 5, 3, 2")),
    "function nearsim_resemblance(text,text,integer)": Cell(
        Kind.PURE, select("nearsim_resemblance", "{t.near}, {t.other}, 2")),
    "function nearsim_containment(text,text,integer)": Cell(
        Kind.PURE, select("nearsim_containment", "{t.near}, {t.other}")),
    "function nearsim_literal_similarity(text,text,integer)": Cell(
        Kind.PURE, select("nearsim_literal_similarity", "{t.near}, {t.other}")),
    "function nearsim_shingle_count(text,integer)": Cell(
        Kind.PURE, select("nearsim_shingle_count", "{t.near}, 2")),
    "function nearsim_sketch(text,integer)": Cell(
        Kind.PURE, select("nearsim_sketch", "{t.near}, 2")),
    "function nearsim_sketch_index(regclass)": Cell(
        Kind.INFO, select("nearsim_sketch_index", "{t.reg}")),
    "function nearsim_rotation_indexes(regclass)": Cell(
        Kind.INFO, select("nearsim_rotation_indexes", "{t.reg}")),
    "function nearsim_links(regclass)": Cell(Kind.OWNER, select("nearsim_links", "{t.reg}")),
    "function nearsim_minhash(text,integer)": Cell(
        Kind.PURE, select("nearsim_minhash", "{t.near}, 16")),
    "function nearsim_minhash(text,integer,integer)": Cell(
        Kind.PURE, select("nearsim_minhash", "{t.near}, 16, 2")),
    "function nearsim_minhash_estimate(bigint[],bigint[])": Cell(
        Kind.PURE, select("nearsim_minhash_estimate", "{t.ext}.nearsim_minhash({t.near}, 16),"
                          " {t.ext}.nearsim_minhash({t.other}, 16)")),
    "function nearsim_estimate(integer,text)": Cell(
        Kind.PURE, select("nearsim_estimate", "4, 'default/1'::pg_catalog.text")),
    "function nearsim_radius(double precision,text)": Cell(
        Kind.PURE, select("nearsim_radius",
                          "0.8::pg_catalog.float8, 'default/1'::pg_catalog.text")),
    # -- searches over a table
    "function nearsim_search(regclass,name,bigint,integer)": Cell(Kind.READS, search),
    "function nearsim_check_batch(regclass,name,name,text[],bigint[],integer,boolean)": Cell(
        Kind.READS, lambda t: [
            f"SELECT b.position, b.existing_key, b.distance FROM {t.ext}.nearsim_check_batch("
            f"{t.reg}, {t.key_name}, {t.fp_name}, ARRAY['new']::pg_catalog.text[],"
            f" ARRAY[{t.ext}.simhash({t.near})], {RADIUS}, false) AS b"]),
    "function nearsim_nearest(regclass,bigint,integer,integer)": Cell(
        Kind.READS, select("nearsim_nearest", "{t.reg}, {t.ext}.simhash({t.near}), 3, 64")),
    "function nearsim_pairs(regclass,integer)": Cell(
        Kind.READS, select("nearsim_pairs", f"{{t.reg}}, {RADIUS}")),
    "function nearsim_clusters(regclass,integer,text,integer)": Cell(
        Kind.READS, select("nearsim_clusters",
                           f"{{t.reg}}, {RADIUS}, 'components'::pg_catalog.text, 2")),
    "function nearsim_similar_verified(regclass,text,double precision,text,integer)": Cell(
        Kind.READS, verified_search),
    "function nearsim_pairs_verified(regclass,double precision,text,integer)": Cell(
        Kind.READS, select("nearsim_pairs_verified", "{t.reg}, 0.5::pg_catalog.float8,"
                           " 's_r'::pg_catalog.text, NULL::pg_catalog.int4")),
    "function nearsim_clusters_verified(regclass,double precision,text,integer,text,integer)":
        Cell(Kind.READS, select("nearsim_clusters_verified",
                                "{t.reg}, 0.5::pg_catalog.float8, 's_l'::pg_catalog.text,"
                                f" {RADIUS}, 'components'::pg_catalog.text, 2")),
    "function nearsim_resemblance_pairs(regclass,name,name,name,double precision,integer)": Cell(
        Kind.READS, select("nearsim_resemblance_pairs",
                           "{t.reg}, {t.key_name}, {t.body_name}, {t.fp_name},"
                           " 0.5::pg_catalog.float8")),
    "operator class nearsim_btree_int8_ops for access method nearsim_btree": Cell(
        Kind.READS, index_scan),
    # -- for the table's owner
    "function nearsim_enable(regclass,name,name,integer,name,integer,text)": Cell(
        Kind.OWNER, select("nearsim_enable", "{t.fresh_reg}, {t.body_name}, {t.fp_name}")),
    "function nearsim_disable(regclass)": Cell(Kind.OWNER, select("nearsim_disable", "{t.reg}")),
    "function nearsim_verify(regclass,boolean)": Cell(
        Kind.OWNER, select("nearsim_verify", "{t.reg}, true"),
        superuser_check=verify_flags_the_replaced_functions),
    "function nearsim_rebuild(regclass,integer,boolean,integer,text)": Cell(
        Kind.OWNER, select("nearsim_rebuild", "{t.reg}, NULL::pg_catalog.int4, true")),
    "function nearsim_guard(regclass,integer,double precision,text,text)": Cell(
        Kind.OWNER, select("nearsim_guard", "{t.reg}, 5")),
    "function nearsim_unguard(regclass)": Cell(Kind.OWNER, select("nearsim_unguard", "{t.reg}")),
    "function nearsim_as_owner(regclass,text)": Cell(
        Kind.OWNER, as_owner),
    "function nearsim_link(regclass,regclass[],regprocedure[])": Cell(
        Kind.OWNER, select("nearsim_link", "{t.reg}, '{{}}'::pg_catalog.regclass[],"
                           " '{{}}'::pg_catalog.regprocedure[]")),
    "function nearsim_register(regclass,name,name,name,integer,text,name,name,name,name)": Cell(
        Kind.OWNER, register),
    "function nearsim_unregister(regclass)": Cell(
        Kind.OWNER, select("nearsim_unregister", "{t.reg}")),
    "function nearsim_check_index(regclass)": Cell(
        Kind.OWNER, select("nearsim_check_index", "{t.index_reg}")),
    "access method nearsim_btree": Cell(
        Kind.OWNER, lambda t: [f"CREATE INDEX ON {t.table} USING nearsim_btree"
                               f" (({t.index_expression}))"]),
    # -- for writers, and what a writer is told
    "function nearsim_guard_lock(regclass)": Cell(
        Kind.WRITES, select("nearsim_guard_lock", "{t.reg}")),
    "function nearsim_guard_check()": Cell(
        Kind.GUARDED, guarded_insert, never_said=("bits", "similar")),
    # -- about a table
    "function nearsim_writes_as_owner(regclass)": Cell(
        Kind.INFO, select("nearsim_writes_as_owner", "{t.reg}"),
        expected_rows={"stranger": [("False",)], "tenant": [("False",)], "column": [("False",)],
                       "superuser": [("True",)]}),
    "function nearsim_check_profile(regclass,text)": Cell(
        Kind.INFO, select("nearsim_check_profile", "{t.reg}, 'default/1'::pg_catalog.text")),
    # -- fired by statements: called, they refuse; their triggers fire on the table
    "function nearsim_link_registered()": Cell(Kind.TRIGGER, called("nearsim_link_registered")),
    "function nearsim_forget_dropped_tables()": Cell(
        Kind.TRIGGER, called("nearsim_forget_dropped_tables")),
    "function nearsim_follow_owner()": Cell(Kind.TRIGGER, called("nearsim_follow_owner")),
    "function nearsim_guard_alter_table()": Cell(
        Kind.TRIGGER, called("nearsim_guard_alter_table")),
    "function nearsim_drop_extension()": Cell(Kind.TRIGGER, called("nearsim_drop_extension")),
    # The event trigger refuses before PostgreSQL checks the role's privileges:
    # a role without them is told what the registry (readable by all) says.
    "event trigger nearsim_guard_alter_table": Cell(
        Kind.OWNER, lambda t: [f"ALTER TABLE {t.table} RENAME COLUMN {t.b} TO content"],
        expected={"stranger": frozenset({"42501", "55000"}),
                  "tenant": frozenset({"42501", "55000"}),
                  "column": frozenset({"42501", "55000"}), "superuser": frozenset({"55000"})}),
    "event trigger nearsim_follow_owner": Cell(
        Kind.OWNER, lambda t: [f"ALTER TABLE {t.table} OWNER TO CURRENT_USER", *t.owner_moves]),
    "event trigger nearsim_forget_dropped_tables": Cell(
        Kind.OWNER, lambda t: [f"DROP TABLE {t.table} CASCADE"]),
    "event trigger nearsim_drop_extension": Cell(
        Kind.OWNER, lambda t: ["DROP EXTENSION nearsim CASCADE"]),
    "function nearsim_btree_handler(internal)": Cell(
        Kind.HANDLER, exempt="takes internal, which SQL cannot give: PostgreSQL calls it for the"
        " access method nearsim_btree, whose entry exercises it",
        exempt_check="SELECT p.pronargs = 1 AND p.proargtypes[0]"
        " = 'pg_catalog.internal'::pg_catalog.regtype"
        " FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)"
        " '%s.nearsim_btree_handler(pg_catalog.internal)'::pg_catalog.regprocedure"),
    "function nearsim_hamming_support(internal)": Cell(
        Kind.HANDLER, exempt="takes internal, which SQL cannot give: the planner calls it for"
        " hamming(), whose entry and tests/server/test_rotation_scan.py exercise it",
        exempt_check="SELECT p.pronargs = 1 AND p.proargtypes[0]"
        " = 'pg_catalog.internal'::pg_catalog.regtype AND EXISTS (SELECT FROM pg_catalog.pg_proc h"
        " WHERE h.prosupport OPERATOR(pg_catalog.=) p.oid AND h.proname OPERATOR(pg_catalog.=)"
        " 'hamming') FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)"
        " '%s.nearsim_hamming_support(pg_catalog.internal)'::pg_catalog.regprocedure"),
    # -- the extension's own objects
    "table nearsim_tables": Cell(
        Kind.SUPERUSER, lambda t: [f"UPDATE {t.ext}.nearsim_tables SET bands = 4"
                                   f" WHERE tbl OPERATOR(pg_catalog.=) {t.reg}"]),
    "operator family nearsim_btree_int8_ops for access method nearsim_btree": Cell(
        Kind.SUPERUSER, lambda t: [f"ALTER OPERATOR FAMILY {t.ext}.nearsim_btree_int8_ops USING"
                                   " nearsim_btree ADD OPERATOR 1 pg_catalog.<"
                                   " (pg_catalog.int4, pg_catalog.int8)"]),
}

# The PL/Python bodies: called with their C function's arguments.
for _wrapper, _function in (
        ("function simhash(text,text)", "simhash"),
        ("function nearsim_profile(text)", "nearsim_profile"),
        ("function nearsim_profiles()", "nearsim_profiles"),
        ("function simhash_profile()", "simhash_profile"),
        ("function nearsim_enable(regclass,name,name,integer,name,integer,text)",
         "nearsim_enable"),
        ("function nearsim_disable(regclass)", "nearsim_disable"),
        ("function nearsim_verify(regclass,boolean)", "nearsim_verify"),
        ("function nearsim_rebuild(regclass,integer,boolean,integer,text)", "nearsim_rebuild"),
        ("function nearsim_check_profile(regclass,text)", "nearsim_check_profile"),
        ("function nearsim_compare(text,text,integer,integer,integer)", "nearsim_compare"),
        ("function nearsim_minhash(text,integer)", "nearsim_minhash"),
        ("function nearsim_minhash(text,integer,integer)", "nearsim_minhash"),
        ("function nearsim_minhash_estimate(bigint[],bigint[])", "nearsim_minhash_estimate"),
        ("function nearsim_estimate(integer,text)", "nearsim_estimate"),
        ("function nearsim_radius(double precision,text)", "nearsim_radius"),
        ("function nearsim_similar_verified(regclass,text,double precision,text,integer)",
         "nearsim_similar_verified"),
        ("function nearsim_pairs_verified(regclass,double precision,text,integer)",
         "nearsim_pairs_verified"),
        ("function nearsim_clusters_verified(regclass,double precision,text,integer,text,"
         "integer)", "nearsim_clusters_verified")):
    _statements = MATRIX[_wrapper].statements
    assert _statements is not None

    def _body(t: Target, statements: Statements = _statements, function: str = _function,
              ) -> list[str]:
        return [s.replace(f".{function}(", f".{function}_python(") for s in statements(t)]

    MATRIX[_wrapper.replace(f" {_function}(", f" {_function}_python(")] = Cell(Kind.BODY, _body)

# The functions nearsim makes for an enabled table, <table> its name.
GENERATED: dict[str, Cell] = {
    "function <table>_similar(text,integer)": Cell(
        Kind.READS, generated("similar", f"{{t.near}}, {RADIUS}")),
    "function <table>_similar(bigint,integer)": Cell(
        Kind.READS, generated("similar", f"{{t.ext}}.simhash({{t.near}}), {RADIUS}")),
    "function <table>_pairs(integer)": Cell(Kind.READS, generated("pairs", str(RADIUS))),
    "function <table>_pairs_verified(double precision,text,integer)": Cell(
        Kind.READS, generated("pairs_verified", "0.5::pg_catalog.float8, 's_r'::pg_catalog.text,"
                              " NULL::pg_catalog.int4")),
    "function <table>_clusters(integer,text,integer)": Cell(
        Kind.READS, generated("clusters", f"{RADIUS}, 'components'::pg_catalog.text, 2")),
    "function <table>_clusters_verified(double precision,text,integer,text,integer)": Cell(
        Kind.READS, generated("clusters_verified", "0.5::pg_catalog.float8,"
                              f" 's_l'::pg_catalog.text, {RADIUS}, 'components'::pg_catalog.text,"
                              " 2")),
    "function <table>_nearest(bigint,integer,integer)": Cell(
        Kind.READS, generated("nearest", "{t.ext}.simhash({t.near}), 3, 64")),
    "function <table>_nearest(text,integer,integer)": Cell(
        Kind.READS, generated("nearest", "{t.near}, 3, 64")),
    "function <table>_nearsim_fingerprint()": Cell(Kind.WRITES, fingerprinted_insert),
}

CELLS = {**MATRIX, **GENERATED}
EXERCISED = [name for name, cell in CELLS.items() if cell.exempt is None]


# -- the catalog ---------------------------------------------------------------------


MEMBERS_QUERY = """
SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
  AND e.extname = 'nearsim' AND d.deptype = 'e'"""


def generated_functions(dsn: str, table: str) -> set[str]:
    """The functions nearsim made for ``table``, named as in GENERATED."""
    schema, name = table.split(".")
    found = rows(dsn, "SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)"
                 " FROM pg_catalog.pg_depend d WHERE d.refobjid = "
                 f"'{table}'::pg_catalog.regclass AND d.deptype = 'n'"
                 " AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass")
    return {str(row[0]).replace(f"function {schema}.{name}_", "function <table>_")
            for row in found}


def registration(dsn: str, table: str) -> tuple[int, str, str, str]:
    found = rows(dsn, "SELECT bands, profile, fingerprint_function, similar_function FROM"
                 f" public.nearsim_tables WHERE tbl = {quoted(table)}::pg_catalog.regclass")
    bands, profile, fingerprint, similar = found[0]
    return int(bands), str(profile), str(fingerprint), str(similar)


def rotation_index(dsn: str, table: str) -> str:
    found = rows(dsn, "SELECT c.relname"
                 " FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid"
                 " JOIN pg_catalog.pg_am a ON a.oid = c.relam"
                 f" WHERE i.indrelid = '{table}'::pg_catalog.regclass"
                 " AND a.amname = 'nearsim_btree' ORDER BY c.relname LIMIT 1")
    return str(found[0][0])


def distance(dsn: str, a: str, b: str) -> int:
    return int(rows(dsn, f"SELECT public.hamming(public.simhash({literal(a)}),"
                    f" public.simhash({literal(b)}))")[0][0])


def values(texts: dict[int, str]) -> str:
    return ", ".join(f"({key}, {literal(text)})" for key, text in texts.items())


# -- (a) and (b): the victim's tables and the roles that read them ---------------------


@dataclass
class Readers:
    dsn: str  # the scratch database, as the superuser
    names: dict[str, str]  # role kind -> role name
    conns: dict[str, psycopg.Connection[Any]]  # role kind (and victim) -> its connection
    targets: dict[str, Target]
    secrets: dict[str, set[str]]  # role kind -> what it must never be told


@pytest.fixture(scope="module")
def readers(dsn: str) -> Iterator[Readers]:
    """app.plain (the stranger's and the key reader's) and app.docs (the tenant's, with
    row-level security), both enabled and guarded, and app.docs_seen: the tenant's
    SELECT of app.docs, enabled, the oracle of the tenant's calls."""
    suffix = secrets.token_hex(3)
    names = {kind: f"nearsim_{kind}_{suffix}" for kind in ("victim", "stranger", "tenant",
                                                           "column")}
    with roles_and_database(dsn, f"nearsim_matrix_readers_{suffix}",
                            list(names.values())) as database:
        victim, tenant = names["victim"], names["tenant"]
        run(database, f"CREATE SCHEMA app AUTHORIZATION {victim}",
            "GRANT USAGE ON SCHEMA app TO PUBLIC")
        owner = as_role(database, victim)
        visible_rows = ", ".join(f"({key}, {literal(text)}, '{tenant}')"
                                 for key, text in VISIBLE.items())
        run(owner,
            "CREATE TABLE app.plain (id integer PRIMARY KEY, body text)",
            f"INSERT INTO app.plain VALUES {values(HIDDEN)}",
            "SELECT nearsim_enable('app.plain', 'body')",
            "CREATE INDEX ON app.plain USING gin (nearsim_sketch(body))",
            "SELECT nearsim_guard('app.plain', max_distance => 10)",
            f"GRANT SELECT (id), INSERT (id, body) ON app.plain TO {names['column']}",
            "CREATE TABLE app.docs (id integer PRIMARY KEY, body text,"
            " tenant name NOT NULL DEFAULT current_user)",
            f"INSERT INTO app.docs (id, body) VALUES {values(HIDDEN)}",
            f"INSERT INTO app.docs (id, body, tenant) VALUES {visible_rows}",
            "SELECT nearsim_enable('app.docs', 'body')",
            "CREATE INDEX ON app.docs USING gin (nearsim_sketch(body))",
            "ALTER TABLE app.docs ENABLE ROW LEVEL SECURITY",
            "CREATE POLICY own_rows ON app.docs USING (tenant = current_user)",
            f"GRANT SELECT, INSERT, UPDATE ON app.docs TO {tenant}",
            "SELECT nearsim_guard('app.docs', max_distance => 10)",
            "CREATE TABLE app.fresh (id integer PRIMARY KEY, body text)",
            f"INSERT INTO app.fresh VALUES (1, {literal(TEXTS[5])})")
        # the tenant's SELECT, as a table of its own
        seen = rows(as_role(database, tenant), "SELECT id, body, tenant FROM app.docs ORDER BY id")
        assert [key for key, *_ in seen] == sorted(VISIBLE)
        run(owner, "CREATE TABLE app.docs_seen (id integer PRIMARY KEY, body text,"
                   " tenant name NOT NULL DEFAULT current_user)",
            "INSERT INTO app.docs_seen VALUES " + ", ".join(
                f"({key}, {literal(body)}, '{who}')" for key, body, who in seen),
            "SELECT nearsim_enable('app.docs_seen', 'body')",
            "CREATE INDEX ON app.docs_seen USING gin (nearsim_sketch(body))")
        # the near-duplicates are near, the others far
        for a, b in ((HIDDEN[730101], NEAR), (HIDDEN[730101], VISIBLE[410001]),
                     (HIDDEN[730102], VISIBLE[410002]), (HIDDEN[730103], TEXTS[3]),
                     (VISIBLE[410003], VISIBLE[410004])):
            assert distance(database, a, b) <= 10
        for text in (*HIDDEN.values(), *VISIBLE.values()):
            assert distance(database, text, TEXTS[5]) > RADIUS
        for hidden in HIDDEN.values():
            assert distance(database, hidden, TEXTS[3]) > RADIUS or hidden == HIDDEN[730103]

        def target(role: str, table: str, guard_row: tuple[int, str]) -> Target:
            qualified = f"app.{table}"
            return Target(role, "app", table, "fresh", rotation_index(database, qualified),
                          table, guard_row, ("app", table), registration(database, qualified),
                          "public.nearsim_rotate(si, 5)")

        targets = {
            "stranger": target("stranger", "plain", (810001, TEXTS[1])),
            "column": target("column", "plain", (810001, TEXTS[1])),
            # near the victim's 730103 only
            "tenant": target("tenant", "docs", (420001, TEXTS[3])),
            "seen": target("seen", "docs_seen", (420001, TEXTS[3])),
        }
        fingerprints = {str(si) for (si,) in rows(database, "SELECT si FROM app.plain")}
        markers = set(MARKERS.values())
        keys = {str(key) for key in HIDDEN}
        conns = {kind: psycopg.connect(as_role(database, name), autocommit=True)
                 for kind, name in names.items()}
        try:
            for conn in conns.values():
                conn.execute("SET statement_timeout = '60s'")
            yield Readers(database, names, conns, targets, {
                "stranger": markers | keys | fingerprints,
                "column": markers | fingerprints,
                # the victim's rows of app.docs have the fingerprints of app.plain's
                "tenant": markers | keys | fingerprints,
            })
        finally:
            for conn in conns.values():
                conn.close()


def test_the_matrix_names_every_object_the_extension_installs(readers: Readers) -> None:
    installed = {str(name) for (name,) in rows(readers.dsn, MEMBERS_QUERY)}
    assert installed - set(MATRIX) == set(), "objects of the extension the matrix does not name"
    assert set(MATRIX) - installed == set(), "entries of the matrix the extension does not install"


def test_the_matrix_names_every_function_nearsim_makes_for_a_table(readers: Readers) -> None:
    for table in ("app.plain", "app.docs"):
        assert generated_functions(readers.dsn, table) == set(GENERATED), table


def test_each_exemption_holds(readers: Readers) -> None:
    exempt = {name: cell for name, cell in CELLS.items() if cell.exempt is not None}
    assert exempt, "no exemption to check"
    for name, cell in exempt.items():
        assert cell.exempt_check is not None, f"{name}: an exemption without a check"
        assert rows(readers.dsn, cell.exempt_check % "public") == [(True,)], name


def test_the_pl_python_bodies_are_executable_by_no_role_but_their_owner(readers: Readers) -> None:
    """What the BODY entries' refusals rest on: no EXECUTE for PUBLIC or any role."""
    granted = rows(readers.dsn, """
        SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text, a.grantee::pg_catalog.regrole
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(COALESCE(p.proacl,
             pg_catalog.acldefault('f', p.proowner))) a
        WHERE p.prolang = (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'plpython3u')
          AND a.grantee <> p.proowner""")
    assert granted == []
    bodies = {name for name, cell in MATRIX.items() if cell.kind is Kind.BODY}
    python = {str(name) for (name,) in rows(readers.dsn, MEMBERS_QUERY + " AND d.classid ="
              " 'pg_catalog.pg_proc'::pg_catalog.regclass AND (SELECT p.prolang FROM"
              " pg_catalog.pg_proc p WHERE p.oid = d.objid) = (SELECT oid FROM"
              " pg_catalog.pg_language WHERE lanname = 'plpython3u')")}
    assert bodies == python


def test_what_each_role_may_select(readers: Readers) -> None:
    """What the expectations rest on: each role's own SELECT of the victim's tables."""
    def select_as(role: str, query: str) -> list[tuple[Any, ...]] | str:
        try:
            return rows(as_role(readers.dsn, readers.names[role]), query)
        except psycopg.errors.InsufficientPrivilege as error:
            return str(error.sqlstate)

    assert select_as("stranger", "SELECT id FROM app.plain") == "42501"
    assert select_as("column", "SELECT id FROM app.plain ORDER BY id") == [
        (key,) for key in sorted(HIDDEN)]
    for column in ("body", "si", "ctid"):
        assert select_as("column", f"SELECT id, {column} FROM app.plain") == "42501", column
    assert select_as("tenant", "SELECT id FROM app.docs ORDER BY id") == [
        (key,) for key in sorted(VISIBLE)]


def check_reader(readers: Readers, role: str, name: str) -> None:
    cell = CELLS[name]
    assert cell.statements is not None
    target = readers.targets[role]
    outcome = attempt(readers.conns[role], cell.statements(target))
    where = f"{name}, called by the {role} role"
    assert_clean(outcome, where)
    leaked = readers.secrets[role] & tokens(outcome.text)
    assert not leaked, f"{where} was told {sorted(leaked)}: {outcome.describe()}"
    told = [word for word in cell.never_said if word in outcome.said]
    assert not told, f"{where} was told {told}: {outcome.describe()}"
    expected = cell.expectation(role)
    if expected == SEEN:
        oracle = attempt(readers.conns["victim"], cell.statements(readers.targets["seen"]))
        assert oracle.sqlstate is None and oracle.rows, (
            f"{name} on the tenant's copy: {oracle.describe()}")
        assert outcome.same_as(oracle), (
            f"{where}: {outcome.describe()}\non what it may SELECT: {oracle.describe()}")
    elif expected == ALLOWED:
        assert outcome.sqlstate is None, f"{where}: {outcome.describe()}"
    else:
        assert outcome.sqlstate in expected, (
            f"{where}: expected {sorted(expected)}, got {outcome.describe()}")
    if role in cell.expected_rows:
        assert outcome.rows == cell.expected_rows[role], f"{where}: {outcome.describe()}"


@pytest.mark.parametrize("name", EXERCISED)
def test_a_role_without_privileges_on_the_victims_table(readers: Readers, name: str) -> None:
    check_reader(readers, "stranger", name)


@pytest.mark.parametrize("name", EXERCISED)
def test_a_row_level_security_tenant(readers: Readers, name: str) -> None:
    check_reader(readers, "tenant", name)


@pytest.mark.parametrize("name", EXERCISED)
def test_a_role_that_may_read_the_key_column_only(readers: Readers, name: str) -> None:
    check_reader(readers, "column", name)


# -- (c): a superuser on a hostile role's table ------------------------------------------

CAREFUL_PATH = "pg_catalog, pg_temp"
LURED_PATH = f"{LURE}, public, pg_catalog"


@dataclass
class Hostile:
    dsn: str  # the scratch database, as the superuser
    hostile: str  # the hostile role
    superusers: set[str]
    superuser: psycopg.Connection[Any]
    admin: psycopg.Connection[Any]  # reads the trap evidence, outside the calls
    target: Target
    refused_lures: list[tuple[str, str]]

    def is_superuser(self, role: str) -> bool:
        found = self.admin.execute("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = %s",
                                   (role,)).fetchone()
        return bool(found and found[0])


# The hostile role names its schema, tables and columns as it likes.
SCHEMA = 'Ho"st\'ile; $x$ --'
TABLE, FRESH, GUARDED, TRAPPED_INDEX = 'T\'a"b; q', 'Fr\'esh"', 'G\'u"ard', 'T\'rap "rotation"'
MINE = 'Mi"ne\''  # the superuser's table, of the same columns
KEY, BODY, FINGERPRINT = 'I\'d "k"', 'Bo"dy\' $$', 'S\'i"'


@pytest.fixture(scope="module")
def hostile_stage(dsn: str) -> Iterator[Hostile]:
    suffix = secrets.token_hex(3)
    hostile = f"nearsim_hostile_{suffix}"
    schema = ident(SCHEMA)
    table, fresh, guarded = (f"{schema}.{ident(name)}" for name in (TABLE, FRESH, GUARDED))
    mine = f"public.{ident(MINE)}"
    key, body, fingerprint = ident(KEY), ident(BODY), ident(FINGERPRINT)
    columns = f"({key} integer PRIMARY KEY, {body} character varying)"

    def enable(table: str) -> str:
        return (f"SELECT public.nearsim_enable({quoted(table)}, {quoted(BODY)},"
                f" {quoted(FINGERPRINT)})")

    with roles_and_database(dsn, f"nearsim_matrix_hostile_{suffix}", [hostile]) as database:
        run(database, f"CREATE SCHEMA {schema} AUTHORIZATION {hostile}",
            f"CREATE SCHEMA hostile AUTHORIZATION {hostile}",
            f"CREATE SCHEMA {LURE} AUTHORIZATION {hostile}",
            f"GRANT USAGE ON SCHEMA {schema}, hostile TO PUBLIC",
            # the extension's schema: a role that may create there
            f"GRANT CREATE ON SCHEMA public TO {hostile}",
            # the superuser's own enabled table
            f"CREATE TABLE {mine} {columns}",
            f"INSERT INTO {mine} VALUES {values({1: TEXTS[1], 2: NEAR, 3: TEXTS[4]})}",
            enable(mine))
        with psycopg.connect(as_role(database, hostile), autocommit=True) as conn:
            conn.execute("SET search_path = pg_catalog")
            for statement in (
                    *trap_log_statements(hostile),
                    *table_helper_statements("hostile"),
                    # its table: enabled, guarded, trapped
                    f"CREATE TABLE {table} {columns}",
                    f"INSERT INTO {table} VALUES {values({1: TEXTS[1], 2: NEAR, 3: TEXTS[2]})}",
                    enable(table),
                    f"SELECT public.nearsim_guard({quoted(table)}, min_similarity => 0.5)",
                    f"CREATE INDEX ON {table} USING gin (public.nearsim_sketch({body}))",
                    *table_trap_statements(table, "hostile", key, ident("T'rap key")),
                    f"CREATE INDEX {ident(TRAPPED_INDEX)} ON {table} USING nearsim_btree"
                    f" ((hostile.trap_fingerprint({fingerprint})))",
                    # one not enabled, as trapped
                    f"CREATE TABLE {fresh} {columns}",
                    f"INSERT INTO {fresh} VALUES {values({1: TEXTS[3]})}",
                    *table_trap_statements(fresh, "hostile", key, ident("Fr'esh key")),
                    # a guarded one the superuser writes into: its code is nearsim's
                    # (a trigger or default of the table would run as any writer)
                    f"CREATE TABLE {guarded} {columns}",
                    f"INSERT INTO {guarded} VALUES {values({1: TEXTS[2], 2: TEXTS[4]})}",
                    enable(guarded),
                    f"SELECT public.nearsim_guard({quoted(guarded)}, max_distance => 10)"):
                conn.execute(statement.encode())
            replace_generated_functions(conn, table, definer=True)
            replace_generated_functions(conn, guarded, definer=True, triggers=False)
            refused = make_all(conn, lure_statements(conn, "public"))
            conn.execute(f"TRUNCATE {LURE}.trap_log")
        superusers = {str(name) for (name,) in rows(
            database, "SELECT rolname FROM pg_catalog.pg_roles WHERE rolsuper")}

        def function(suffix: str) -> str:
            return f"{schema}.{ident(f'{TABLE}_{suffix}')}"

        old_owners_calls = (
            f"SELECT * FROM {function('pairs')}(6)",
            f"SELECT * FROM {function('pairs_verified')}(0.5::pg_catalog.float8)",
            f"SELECT * FROM {function('clusters')}(6)",
            f"SELECT * FROM {function('clusters_verified')}(0.5::pg_catalog.float8)",
            f"SELECT * FROM {function('similar')}('0'::pg_catalog.int8, 6)",
            f"SELECT * FROM {function('similar')}('x'::pg_catalog.text, 6)",
            f"SELECT * FROM {function('nearest')}('0'::pg_catalog.int8, 1)",
            f"SELECT * FROM {function('nearest')}('x'::pg_catalog.text, 1)")
        target = Target(
            "superuser", SCHEMA, TABLE, FRESH, TRAPPED_INDEX, GUARDED, (9, TEXTS[2] + " indeed"),
            ("public", MINE), registration(database, table),
            f"hostile.trap_fingerprint({fingerprint})",
            # the table given away: its old owner calls what nearsim made for it
            owner_moves=(f"SET LOCAL ROLE {hostile}", *old_owners_calls),
            key=KEY, body=BODY, fp=FINGERPRINT)
        with psycopg.connect(database, autocommit=True) as superuser, \
                psycopg.connect(database, autocommit=True) as admin:
            superuser.execute("SET statement_timeout = '60s'")
            yield Hostile(database, hostile, superusers, superuser, admin, target, refused)


def test_the_lures_are_made(hostile_stage: Hostile) -> None:
    """Every trap on the search_path was made: none refused by PostgreSQL."""
    assert hostile_stage.refused_lures == []
    made = rows(hostile_stage.dsn, "SELECT count(*) FROM pg_catalog.pg_proc p WHERE"
                f" p.pronamespace IN ('{LURE}'::pg_catalog.regnamespace,"
                " 'public'::pg_catalog.regnamespace) AND p.proowner ="
                f" '{hostile_stage.hostile}'::pg_catalog.regrole")
    assert made[0][0] > 500


def test_a_trap_run_with_a_superusers_rights_is_seen(hostile_stage: Hostile) -> None:
    """The detector itself: a superuser's careless statement on the lured search_path."""
    conn = hostile_stage.superuser
    conn.execute(f"SET search_path = {LURED_PATH}")
    before = privileged_runs(hostile_stage.dsn)
    outcome = attempt(conn, ["SELECT 1 = 1"], inspect=TRAP_INSPECTION)
    assert superuser_traps(outcome, hostile_stage.superusers)
    assert privileged_runs(hostile_stage.dsn) == before + 1
    assert not hostile_stage.is_superuser(hostile_stage.hostile)  # rolled back


def superuser_calls(stage: Hostile, name: str, path: str) -> Outcome:
    cell = CELLS[name]
    assert cell.statements is not None
    conn = stage.superuser
    conn.execute(f"SET search_path = {path}")
    before = privileged_runs(stage.dsn)
    outcome = attempt(conn, cell.statements(stage.target), inspect=[
        *TRAP_INSPECTION,
        "SELECT 'superuser'::pg_catalog.text, r.rolname::pg_catalog.text, NULL::pg_catalog.text"
        " FROM pg_catalog.pg_roles AS r WHERE r.rolsuper"])
    where = f"{name}, called by a superuser on a hostile role's table (search_path {path})"
    # (a PL/Python body, which only a superuser may call, reports its errors with
    # their Python traceback: its C function is the one that leaves it out)
    assert_clean(outcome, where, traceback_allowed=cell.kind is Kind.BODY)
    ran = superuser_traps(outcome, stage.superusers)
    assert not ran, f"{where}: traps ran with a superuser's rights: {ran}"
    assert privileged_runs(stage.dsn) == before, f"{where}: a trap ran with a superuser's rights"
    made = {role for kind, role, _ in outcome.inspected if kind == "superuser"}
    assert stage.hostile not in made, f"{where}: the hostile role became a superuser"
    assert not stage.is_superuser(stage.hostile), where
    return outcome


@pytest.mark.parametrize("name", EXERCISED)
def test_a_superuser_on_a_hostile_roles_table(hostile_stage: Hostile, name: str) -> None:
    careful = superuser_calls(hostile_stage, name, CAREFUL_PATH)
    lured = superuser_calls(hostile_stage, name, LURED_PATH)
    assert lured.same_as(careful), (f"{name}: under the lured search_path {lured.describe()},"
                                    f" under pg_catalog {careful.describe()}")
    cell, where = CELLS[name], f"{name}, called by a superuser"
    expected = cell.expectation("superuser")
    if expected == ALLOWED:
        assert careful.sqlstate is None, f"{where}: {careful.describe()}"
    else:
        assert careful.sqlstate in expected, f"{where}: {careful.describe()}"
    if "superuser" in cell.expected_rows:
        assert careful.rows == cell.expected_rows["superuser"], f"{where}: {careful.describe()}"
    if cell.superuser_check is not None:
        cell.superuser_check(hostile_stage.target, careful)


# -- (b), continued: the loader's paths ---------------------------------------------------


class Told(Reporter):
    """What a load tells its caller: its failures and warnings."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def failure(self, failure: Failure) -> None:
        self.said.append(f"{failure.reason}: {failure.message}")

    def warning(self, message: str) -> None:
        self.said.append(message)


def load(readers: Readers, role: str, table: str, records: dict[int, str], path: Path,
         server_side: bool, on_near_duplicate: str | None = "error") -> tuple[str, Any]:
    """Load records as the role; what it was told, and the summary (or the error that
    stopped the load)."""
    path.write_text("".join(json.dumps({"id": key, "text": body}) + "\n"
                            for key, body in records.items()))
    told = Told()
    try:
        summary: Any = load_paths(
            [str(path)], table, dsn=as_role(readers.dsn, readers.names[role]),
            options=LoadOptions(key_column="id", text_column="body",
                                on_near_duplicate=on_near_duplicate, near_distance=10,
                                workers=1, server_side=server_side),
            reporter=told)
        said = json.dumps(summary.as_dict())
    except psycopg.Error as error:
        summary, said = error, str(error)
    return "\n".join([said, *told.said]), summary


@pytest.mark.parametrize("server_side", [False, True])
def test_a_tenants_load_learns_nothing_of_rows_it_may_not_see(
        readers: Readers, tmp_path: Path, server_side: bool) -> None:
    records = {420011: TEXTS[3],  # near the victim's 730103 only
               420012: VISIBLE[410003] + " again",  # near its own 410003 and 410004
               420013: TEXTS[5]}
    try:
        said, summary = load(readers, "tenant", "app.docs", records, tmp_path / "in.jsonl",
                             server_side)
        leaked = readers.secrets["tenant"] & tokens(said)
        assert not leaked, f"the tenant's load was told {sorted(leaked)}: {said}"
        assert not isinstance(summary, Exception), said
        assert (summary.loaded, summary.failed) == (1, {"near-duplicate": 1, "refused": 1}), said
        # its own near-duplicate is named, the victim's is not
        assert "'420012' is within" in said and "4100" in said, said
        assert "near-duplicate document in table docs" in said, said
    finally:
        run(as_role(readers.dsn, readers.names["victim"]),
            f"DELETE FROM app.docs WHERE id IN ({', '.join(map(str, records))})")


@pytest.mark.parametrize("on_near_duplicate", ["error", None])
def test_a_key_readers_load_is_refused_or_learns_nothing(
        readers: Readers, tmp_path: Path, on_near_duplicate: str | None) -> None:
    records = {820011: TEXTS[1], 820012: TEXTS[5]}  # near the victim's 730101; near nothing
    try:
        said, summary = load(readers, "column", "app.plain", records, tmp_path / "in.jsonl",
                             False, on_near_duplicate)
        leaked = readers.secrets["column"] & tokens(said)
        assert not leaked, f"the key reader's load was told {sorted(leaked)}: {said}"
        # refused (it may not read the fingerprints it would compare), or not told
        # which document its own is near: it may read that key, not its text
        assert isinstance(summary, psycopg.errors.InsufficientPrivilege) or (
            "730101" not in said), said
    finally:
        run(as_role(readers.dsn, readers.names["victim"]),
            f"DELETE FROM app.plain WHERE id IN ({', '.join(map(str, records))})")
