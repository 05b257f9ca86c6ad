"""Hostile roles for tests/server/test_hostile_matrix.py: roles, outcomes and traps.

- :func:`roles_and_database` makes login roles and a database with the
  extension, and drops them afterwards;
- :func:`attempt` runs statements as one role in a transaction that is
  rolled back, and keeps what the server said (rows, SQLSTATE, every
  message and notice) so that a test can look for what must not be there;
- :func:`trap_log_statements`, :func:`table_trap_statements` and
  :func:`lure_statements` arm a hostile role's traps: code that, wherever it
  runs, records ``current_user`` in a table the hostile role owns (readable
  and writable by PUBLIC), counts the runs with a superuser's rights in a
  sequence (which no rollback undoes), warns the client, and tries
  ``ALTER ROLE <hostile> SUPERUSER``.  The traps sit on the hostile role's
  table (triggers, an index expression, a column default, a row-level
  security policy, casts of its types) and on a search_path: functions,
  operators, types and relations with the names of PostgreSQL's built-ins
  and of the extension's functions, with the same or better-matching
  argument types.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]

# The schema of the search_path traps, first on the superuser's search_path.
LURE = "lure"
# The trap log: what ran, as whom.
TRAP_LOG = f"{LURE}.trap_log"
# Runs of a trap with a superuser's rights: a sequence, which no rollback undoes.
PRIVILEGED_RUNS = f"{LURE}.privileged_runs"
TRAP_WARNING = "hostile trap"


# -- roles and databases ---------------------------------------------------------


@contextmanager
def roles_and_database(dsn: str, database: str,
                       roles: Sequence[str]) -> Iterator[str]:
    """Login roles and a new database with the extension; its DSN.  Dropped afterwards."""
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        for role in roles:
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    scratch = make_conninfo(dsn, dbname=database)
    try:
        with psycopg.connect(scratch, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION nearsim CASCADE")
        yield scratch
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(drop)
            for role in roles:
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def as_role(dsn: str, role: str) -> str:
    return make_conninfo(dsn, user=role)


def run(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query.encode()).fetchall()


# -- outcomes --------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one role got from a cell: its last statement's rows, or an error."""

    rows: list[tuple[str, ...]] | None  # every value as text; None after an error
    sqlstate: str | None
    said: str  # the error's message, detail, hint and context, and every notice
    inspected: list[tuple[Any, ...]] = field(default_factory=list)  # see attempt()

    @property
    def text(self) -> str:
        """Everything the role was told, rows and messages."""
        return f"{self.rows!r}\n{self.said}"

    def describe(self) -> str:
        if self.sqlstate is not None:
            return f"error {self.sqlstate}: {self.said.strip()}"
        return f"{len(self.rows or [])} rows: {(self.rows or [])[:5]!r}; said: {self.said.strip()}"

    def same_as(self, other: Outcome) -> bool:
        """The same rows (in any order) or the same SQLSTATE."""
        if self.sqlstate is not None or other.sqlstate is not None:
            return self.sqlstate == other.sqlstate
        return sorted(self.rows or []) == sorted(other.rows or [])


def _diagnostic_text(diag: psycopg.errors.Diagnostic) -> str:
    return "\n".join(filter(None, (diag.severity, diag.message_primary, diag.message_detail,
                                   diag.message_hint, diag.context)))


def _as_text(value: object) -> str:
    return "NULL" if value is None else str(value)


def attempt(conn: psycopg.Connection[Any], statements: Sequence[str],
            inspect: Sequence[str] = ()) -> Outcome:
    """Run ``statements`` in a transaction that is rolled back afterwards.

    The outcome holds the last statement's rows, or the first error.  The
    ``inspect`` queries run in the same transaction after the statements
    (after rolling back to before them when one failed), and their rows
    are the outcome's ``inspected``: they see what the statements did
    before it is rolled back.
    """
    said: list[str] = []

    def hear(diag: psycopg.errors.Diagnostic) -> None:
        said.append(_diagnostic_text(diag))

    conn.add_notice_handler(hear)
    try:
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT cell")
        found: list[tuple[str, ...]] | None = []
        sqlstate = None
        try:
            for statement in statements:
                cursor = conn.execute(statement.encode())
                found = ([tuple(_as_text(v) for v in row) for row in cursor.fetchall()]
                         if cursor.description else [])
        except psycopg.Error as error:
            if isinstance(error, psycopg.OperationalError) and conn.closed:
                raise
            found, sqlstate = None, error.sqlstate
            said.append(_diagnostic_text(error.diag))
            conn.execute("ROLLBACK TO SAVEPOINT cell")
        inspected = [row for query in inspect for row in conn.execute(query.encode()).fetchall()]
        conn.execute("ROLLBACK")
        return Outcome(found, sqlstate, "\n".join(said), inspected)
    finally:
        conn.remove_notice_handler(hear)


def tokens(text: str) -> set[str]:
    """Words and numbers of a text (a secret shows as one of them)."""
    return set(re.findall(r"[A-Za-z0-9_]+", text))


TRACEBACK = re.compile(r"Traceback|File \"[^\"]*\.py\"|line \d+, in ")


def assert_clean(outcome: Outcome, where: str, traceback_allowed: bool = False) -> None:
    """No Python traceback, and no internal error, in what the role was told."""
    assert traceback_allowed or not TRACEBACK.search(outcome.said), (
        f"{where}: a Python traceback: {outcome.said}")
    assert outcome.sqlstate is None or not (
        outcome.sqlstate.startswith("XX") or outcome.sqlstate.startswith("38")), (
        f"{where}: an internal error: {outcome.describe()}")


# -- the trap log ----------------------------------------------------------------


def trap_log_statements(hostile: str) -> list[str]:
    """The trap log and ``lure.trap(what)``, made by the hostile role in its lure schema.

    The trap records ``current_user`` and ``session_user``; a run with a
    superuser's rights also takes a number of PRIVILEGED_RUNS (kept through
    a rollback).  It warns the client, and tries to make the hostile role a
    superuser.
    """
    quoted = "'" + hostile.replace("'", "''") + "'"
    return [
        f"GRANT USAGE ON SCHEMA {LURE} TO PUBLIC",
        f"CREATE TABLE {TRAP_LOG} (what pg_catalog.text, run_as pg_catalog.name,"
        " session_as pg_catalog.name)",
        f"GRANT SELECT, INSERT ON {TRAP_LOG} TO PUBLIC",
        f"CREATE SEQUENCE {PRIVILEGED_RUNS}",
        f"GRANT USAGE, SELECT, UPDATE ON SEQUENCE {PRIVILEGED_RUNS} TO PUBLIC",
        f"""CREATE FUNCTION {LURE}.trap(what pg_catalog.text) RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $trap$
BEGIN
    INSERT INTO {TRAP_LOG} (what, run_as, session_as) VALUES (what, current_user, session_user);
    IF EXISTS (SELECT FROM pg_catalog.pg_roles r
               WHERE r.rolname OPERATOR(pg_catalog.=) current_user AND r.rolsuper) THEN
        PERFORM pg_catalog.nextval('{PRIVILEGED_RUNS}'::pg_catalog.regclass);
    END IF;
    BEGIN
        EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER', {quoted}::pg_catalog.text);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    RAISE WARNING '{TRAP_WARNING} % ran as %', what, current_user;
    RETURN true;
END
$trap$""",
    ]


def privileged_runs(dsn: str) -> int:
    """How many times a trap ran with a superuser's rights, ever."""
    found = rows(dsn, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END"
                 f" FROM {PRIVILEGED_RUNS}")
    return int(found[0][0])


TRAP_INSPECTION = [
    # run as the last statement left the session (a cell may SET LOCAL ROLE):
    # every name and operator qualified
    f"SELECT 'log'::pg_catalog.text, l.what, l.run_as::pg_catalog.text FROM {TRAP_LOG} AS l",
]


def superuser_traps(outcome: Outcome, superusers: set[str]) -> list[str]:
    """The traps that ran with a superuser's rights, as the log and the warnings tell."""
    logged = [f"{what} (as {run_as})" for kind, what, run_as in outcome.inspected
              if kind == "log" and run_as in superusers]
    warned = [line for line in outcome.said.splitlines()
              if TRAP_WARNING in line and line.rsplit(" ran as ", 1)[-1] in superusers]
    return logged + warned


# -- traps on a hostile role's table -----------------------------------------------


def table_helper_statements(schema: str) -> list[str]:
    """Functions, a type and a domain of the hostile role that set off its traps."""
    trap = f"{LURE}.trap"
    pinned = "SET search_path = pg_catalog, pg_temp"
    return [
        f"""CREATE FUNCTION {schema}.trojan() RETURNS trigger LANGUAGE plpgsql {pinned} AS $f$
BEGIN
    PERFORM {trap}('trigger ' || TG_NAME || ' on ' || TG_TABLE_NAME);
    IF TG_LEVEL OPERATOR(pg_catalog.=) 'STATEMENT' THEN
        RETURN NULL;
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $f$""",
        f"""CREATE FUNCTION {schema}.trap_text(what pg_catalog.text) RETURNS pg_catalog.text
LANGUAGE plpgsql {pinned} AS $f$ BEGIN PERFORM {trap}(what); RETURN what; END $f$""",
        # index expressions must be immutable: a lie the hostile role may tell
        f"""CREATE FUNCTION {schema}.trap_key(value pg_catalog.int4) RETURNS pg_catalog.int4
LANGUAGE plpgsql IMMUTABLE {pinned} AS $f$
BEGIN PERFORM {trap}('index expression'); RETURN value; END $f$""",
        f"""CREATE FUNCTION {schema}.trap_fingerprint(value pg_catalog.int8) RETURNS pg_catalog.int8
LANGUAGE plpgsql IMMUTABLE {pinned} AS $f$
BEGIN PERFORM {trap}('nearsim_btree index expression'); RETURN value; END $f$""",
        f"""CREATE FUNCTION {schema}.trap_policy() RETURNS pg_catalog.bool
LANGUAGE plpgsql STABLE {pinned} AS $f$
BEGIN RETURN {trap}('row-level security policy'); END $f$""",
        f"CREATE TYPE {schema}.mood AS ENUM ('calm', 'fierce')",
        *(f"""CREATE FUNCTION {schema}.mood_{target}(value {schema}.mood)
RETURNS pg_catalog.{target} LANGUAGE plpgsql {pinned} AS $f$
BEGIN PERFORM {trap}('cast of mood to {target}'); RETURN {result}; END $f$"""
          for target, result in (("text", "value::pg_catalog.text"), ("int4", "1"),
                                 ("int8", "1"))),
        *(f"CREATE CAST ({schema}.mood AS pg_catalog.{target}) WITH FUNCTION"
          f" {schema}.mood_{target}({schema}.mood) AS IMPLICIT"
          for target in ("text", "int4", "int8")),
        f"""CREATE FUNCTION {schema}.trap_check(value pg_catalog.text) RETURNS pg_catalog.bool
LANGUAGE plpgsql {pinned} AS $f$ BEGIN RETURN {trap}('domain check'); END $f$""",
        f"CREATE DOMAIN {schema}.tag AS pg_catalog.text CHECK ({schema}.trap_check(VALUE))",
    ]


def table_trap_statements(table: str, helpers: str, key: str, index: str,
                          force_rls: bool = True) -> list[str]:
    """Triggers of every kind, an index expression (index ``index`` on column ``key``), a
    column default, columns of the hostile role's type and domain, and a policy, on
    ``table`` (identifiers, quoted); the functions are those of schema ``helpers``."""
    triggers = []
    for when in ("BEFORE", "AFTER"):
        for level, events in (("ROW", "INSERT OR UPDATE OR DELETE"),
                              ("STATEMENT", "INSERT OR UPDATE OR DELETE OR TRUNCATE")):
            triggers.append(
                f"CREATE TRIGGER a_trojan_{when.lower()}_{level.lower()} {when} {events}"
                f" ON {table} FOR EACH {level} EXECUTE FUNCTION {helpers}.trojan()")
    return [
        f"ALTER TABLE {table} ADD COLUMN note pg_catalog.text"
        f" DEFAULT {helpers}.trap_text('column default'),"
        f" ADD COLUMN mood {helpers}.mood, ADD COLUMN tag {helpers}.tag",
        *triggers,
        f"CREATE INDEX {index} ON {table} (({helpers}.trap_key({key})))",
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        *([f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY"] if force_rls else []),
        f"CREATE POLICY trap ON {table} USING ({helpers}.trap_policy())",
    ]


def replace_generated_functions(conn: psycopg.Connection[Any], table: str, definer: bool,
                                triggers: bool = True) -> list[str]:
    """Replace the functions nearsim made for ``table`` (its name, as regclass reads it)
    with traps, as its owner may.

    Each keeps its signature and result; a trigger function returns the row
    unchanged.  With ``definer`` they run with their owner's rights, and are
    linked to the table again (nearsim_link) so that they count as its
    objects.  Returns their signatures.
    """
    found = conn.execute(
        "SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text,"
        " pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid),"
        " p.prorettype = 'pg_catalog.trigger'::pg_catalog.regtype"
        " FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_proc p ON p.oid = d.objid"
        " WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass"
        " AND d.refobjid = %s::pg_catalog.regclass AND d.deptype = 'n'", (table,)).fetchall()
    replaced = []
    for signature, arguments, result, is_trigger in found:
        if is_trigger and not triggers:
            continue
        name = signature.split("(", 1)[0]
        finish = "RETURN NEW;" if is_trigger else "RETURN;"
        label = f"{signature}, replaced".replace("'", "''")
        conn.execute(f"""CREATE OR REPLACE FUNCTION {name}({arguments}) RETURNS {result}
LANGUAGE plpgsql AS $f$ BEGIN PERFORM {LURE}.trap('{label}'); {finish} END $f$""".encode())
        if definer:
            conn.execute(f"ALTER FUNCTION {signature} SECURITY DEFINER".encode())
        replaced.append(signature)
    conn.execute("SELECT public.nearsim_link(%s::pg_catalog.regclass, '{}'::pg_catalog.regclass[],"
                 " %s::pg_catalog.regprocedure[])", (table, replaced))
    return replaced


# -- traps on a search_path ----------------------------------------------------------

# Where nearsim's own code is: the names it calls (and may one day call unqualified).
SOURCES = ("extension/sql/nearsim.sql", "extension/src/*.c", "python_client/nearsim/server/*.py",
           "python_client/nearsim/core/registry.py")

# Type names that SQL resolves through the search_path (integer, bigint,
# boolean, double precision, numeric, varchar ... are keywords and always
# PostgreSQL's own).
SHADOWED_TYPES = ("text", "name", "oid", "tid", "bool", "int2", "int4", "int8", "float4",
                  "float8", "bytea", "regclass", "regproc", "regprocedure", "regtype",
                  "regnamespace", "regrole", "json", "jsonb", "xid")

# For each argument type of an extension function, types an argument could
# have that would match an overload better than the function itself.
BETTER_MATCHES = {
    "text": ("character varying", "name"),
    "bigint": ("integer", "smallint"),
    "integer": ("smallint",),
    "double precision": ("numeric", "real", "integer"),
    "regclass": ("text", "oid", "name"),
    "name": ("text", "character varying"),
    "bigint[]": ("integer[]", "numeric[]"),
    "boolean": ("text",),
}

# Pseudo-types a PL/pgSQL shadow can take and give (the polymorphic ones).
PLPGSQL_PSEUDO = ("anyelement", "anyarray", "anynonarray", "anyenum", "anyrange",
                  "anymultirange", "anycompatible", "anycompatiblearray",
                  "anycompatiblenonarray", "anycompatiblerange", "anycompatiblemultirange",
                  "record", "void")


def source_names() -> set[str]:
    """Every name followed by an opening parenthesis, or starting with pg_, in nearsim's code."""
    names: set[str] = set()
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            names.update(n.lower() for n in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text))
            names.update(re.findall(r"\b(pg_[a-z_]+)\b", text))
    return names


_FUNCTIONS_QUERY = """
SELECT p.oid, p.proname, n.nspname, p.proretset, p.prokind,
       pg_catalog.pg_get_function_arguments(p.oid) AS arguments,
       pg_catalog.pg_get_function_result(p.oid) AS result,
       COALESCE(p.proargmodes::pg_catalog.text[],
                pg_catalog.array_fill('i'::pg_catalog.text, ARRAY[p.pronargs::pg_catalog.int4]))
           AS modes,
       COALESCE(p.proallargtypes, p.proargtypes::pg_catalog.oid[]) AS types,
       p.proargnames AS names,
       ARRAY(SELECT pg_catalog.format_type(t, NULL)
             FROM pg_catalog.unnest(COALESCE(p.proallargtypes, p.proargtypes::pg_catalog.oid[]))
                  AS t) AS type_names,
       p.provariadic <> 0 AS variadic,
       EXISTS (SELECT FROM pg_catalog.pg_type t
               WHERE (t.oid = ANY (COALESCE(p.proallargtypes, p.proargtypes::pg_catalog.oid[]))
                      OR t.oid = p.prorettype)
                 AND t.typtype = 'p' AND NOT t.typname = ANY (%(pseudo)s)) AS unusable
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE {where}
ORDER BY p.oid
"""


@dataclass(frozen=True)
class Function:
    """A function to shadow, as the catalog describes it."""

    oid: int
    name: str
    schema: str
    returns_set: bool
    arguments: str  # pg_get_function_arguments: with modes, names and defaults
    result: str  # pg_get_function_result
    modes: list[str]
    type_names: list[str]
    names: list[str] | None
    variadic: bool

    def output_name(self, index: int) -> str:
        """The name of output argument ``index``, unless an input argument has it too
        (PL/pgSQL refuses a name twice, as nearsim_rebuild's bands)."""
        assert self.names is not None
        name = self.names[index]
        taken = {n for n, m in zip(self.names, self.modes, strict=True) if m in ("i", "v")}
        return f"{name}_out" if name in taken else name

    @property
    def declared_arguments(self) -> str:
        """pg_get_function_arguments, with output arguments renamed as output_name."""
        arguments = self.arguments
        for index, mode in enumerate(self.modes):
            if mode == "o" and self.names and self.output_name(index) != self.names[index]:
                arguments = re.sub(rf"\bOUT {re.escape(self.names[index])} ",
                                   f"OUT {self.output_name(index)} ", arguments)
        return arguments

    def body(self, target: str, label: str) -> str:
        """A PL/pgSQL body that sets off the trap, then calls ``target`` with its arguments."""
        inputs, outputs = [], []
        for position, mode in enumerate(self.modes, start=1):
            if mode in ("i", "b", "v"):
                inputs.append(("VARIADIC " if mode == "v" else "") + f"${position}")
            if mode in ("o", "b") and self.names:
                outputs.append(_quote(self.output_name(position - 1)))
        call = f"{target}({', '.join(inputs)})"
        if self.returns_set:
            finish = f"RETURN QUERY SELECT * FROM {call};"
        elif outputs:
            finish = f"SELECT * INTO {', '.join(outputs)} FROM {call}; RETURN;"
        elif self.result == "void":
            finish = f"PERFORM {call}; RETURN;"
        else:
            finish = f"RETURN {call};"
        label = label.replace("'", "''")
        return (f"LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$"
                f" BEGIN PERFORM {LURE}.trap('{label}'); {finish} END $f$")

    def signature_with(self, replacements: dict[int, str]) -> str:
        """The argument list with the arguments at these positions (of every argument)
        of other types."""
        parts = []
        for index, (mode, type_name) in enumerate(zip(self.modes, self.type_names, strict=True)):
            if mode == "t":
                continue
            written = replacements.get(index, type_name)
            prefix = {"o": "OUT ", "b": "INOUT ", "v": "VARIADIC "}.get(mode, "")
            name = "" if not self.names or not self.names[index] else _quote(
                self.output_name(index) if mode == "o" else self.names[index]) + " "
            parts.append(f"{prefix}{name}{written}")
        return ", ".join(parts)


def _functions(conn: psycopg.Connection[Any], where: str,
               parameters: dict[str, Any]) -> list[Function]:
    found = conn.execute(_FUNCTIONS_QUERY.format(where=where).encode(),
                         {**parameters, "pseudo": list(PLPGSQL_PSEUDO)}).fetchall()
    return [Function(oid, name, schema, retset, arguments, result, list(modes), list(type_names),
                     None if names is None else list(names), variadic)
            for (oid, name, schema, retset, _, arguments, result, modes, _, names, type_names,
                 variadic, unusable) in found if not unusable]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lure_statements(conn: psycopg.Connection[Any], extension_schema: str) -> list[str]:
    """Traps on a search_path, made by the hostile role (``conn``).

    In the lure schema: a function of the same name and argument types as
    every extension function, operators of the same name and operand types
    as PostgreSQL's on the types nearsim's code compares (also in the
    extension's schema), domains named as
    the built-in types SQL finds through the search_path, and views named
    as the catalogs and the registry nearsim reads.  In the extension's
    schema: a function of the same name and argument types as every
    built-in that nearsim's code names, and overloads of the extension's
    functions with better-matching argument types.  Each sets off the trap,
    then does what the original does.
    """
    ext = _quote(extension_schema)
    names = sorted(source_names())
    statements: list[str] = []
    # the extension's functions, exactly, first on the search_path
    members = _functions(conn, "p.oid IN (SELECT objid FROM pg_catalog.pg_depend"
                         " WHERE refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass"
                         " AND refobjid = (SELECT oid FROM pg_catalog.pg_extension"
                         " WHERE extname = 'nearsim') AND deptype = 'e')", {})
    for function in members:
        target = f"{ext}.{_quote(function.name)}"
        statements.append(
            f"CREATE FUNCTION {LURE}.{_quote(function.name)}({function.declared_arguments})"
            f" RETURNS {function.result} "
            + function.body(target, f"{LURE}.{function.name}({function.arguments})"))
        # and in the extension's schema, with better-matching argument types: one
        # argument at a time, and every argument named by a string as text (which
        # string literals prefer to any other candidate)
        inputs = [position for position, mode in enumerate(function.modes) if mode in ("i", "b")]
        variants = [{position: better} for position in inputs
                    for better in BETTER_MATCHES.get(function.type_names[position], ())]
        for strings in (("name",), ("name", "regclass")):
            variants.append({position: "text" for position in inputs
                             if function.type_names[position] in strings})
        made = set()
        for variant in variants:
            key = tuple(variant.get(p, function.type_names[p]) for p in inputs)
            if not variant or key in made:
                continue
            made.add(key)
            arguments = function.signature_with(variant)
            statements.append(
                f"CREATE FUNCTION {ext}.{_quote(function.name)}({arguments})"
                f" RETURNS {function.result} "
                + function.body(target, f"{ext}.{function.name}({arguments})"))
    # PostgreSQL's functions that nearsim's code names, exactly, in the extension's schema
    builtins = _functions(conn, "n.nspname = 'pg_catalog' AND p.prokind = 'f'"
                          " AND p.proname = ANY (%(names)s)", {"names": names})
    for function in builtins:
        if function.variadic:
            continue
        statements.append(
            f"CREATE FUNCTION {ext}.{_quote(function.name)}({function.declared_arguments})"
            f" RETURNS {function.result} "
            + function.body(f"pg_catalog.{_quote(function.name)}",
                            f"{ext}.{function.name}({function.arguments})"))
    # operators of PostgreSQL on the types nearsim compares
    operators = conn.execute("""
        SELECT o.oid, o.oprname, pg_catalog.format_type(o.oprleft, NULL),
               pg_catalog.format_type(o.oprright, NULL), pg_catalog.format_type(o.oprresult, NULL)
        FROM pg_catalog.pg_operator o
        JOIN pg_catalog.pg_type l ON l.oid = o.oprleft
        JOIN pg_catalog.pg_type r ON r.oid = o.oprright
        WHERE o.oprnamespace = 'pg_catalog'::pg_catalog.regnamespace AND o.oprkind = 'b'
          AND (l.typname = ANY (%(types)s) OR l.typname = ANY (%(arrays)s)
               OR l.typname IN ('anyarray', 'anyelement', 'anycompatiblearray', 'anycompatible',
                                'varchar', 'numeric', 'bpchar', 'char'))
          AND (r.typname = ANY (%(types)s) OR r.typname = ANY (%(arrays)s)
               OR r.typname IN ('anyarray', 'anyelement', 'anycompatiblearray', 'anycompatible',
                                'varchar', 'numeric', 'bpchar', 'char'))
        ORDER BY o.oid""", {"types": list(SHADOWED_TYPES),
                            "arrays": [f"_{t}" for t in SHADOWED_TYPES]}).fetchall()
    for oid, name, left, right, result in operators:
        operator_function = f"{LURE}.operator_{oid}"
        label = f"operator {name} ({left}, {right})".replace("'", "''")
        statements += [
            f"CREATE FUNCTION {operator_function}({left}, {right}) RETURNS {result}"
            " LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$ BEGIN"
            f" PERFORM {LURE}.trap('{label}'); RETURN $1 OPERATOR(pg_catalog.{name}) $2; END $f$",
            *(f"CREATE OPERATOR {schema}.{name} (LEFTARG = {left}, RIGHTARG = {right},"
              f" FUNCTION = {operator_function})" for schema in (LURE, ext)),
        ]
    # relations nearsim reads: the catalogs and the registry
    relations = conn.execute(
        "SELECT c.relname, ARRAY(SELECT pg_catalog.quote_ident(a.attname)"
        "  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
        "  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND t.typtype <> 'p'"
        "  ORDER BY a.attnum)"
        " FROM pg_catalog.pg_class c"
        " WHERE c.relnamespace = 'pg_catalog'::pg_catalog.regnamespace AND c.relkind IN ('r', 'v')"
        " AND c.relname = ANY (%s) ORDER BY 1", (names,)).fetchall()
    for relation, columns in relations:
        statements.append(
            f"CREATE VIEW {LURE}.{_quote(relation)} AS SELECT {', '.join(columns)}"
            f" FROM pg_catalog.{_quote(relation)} WHERE {LURE}.trap('relation {relation}')")
    statements.append(f"CREATE VIEW {LURE}.nearsim_tables AS SELECT * FROM {ext}.nearsim_tables"
                      f" WHERE {LURE}.trap('relation nearsim_tables')")
    # types, last: nothing above may name them
    for type_name in SHADOWED_TYPES:
        statements.append(f"CREATE DOMAIN {LURE}.{type_name} AS pg_catalog.{type_name}"
                          f" CHECK ({LURE}.trap('type {type_name}'))")
    return statements


def make_all(conn: psycopg.Connection[Any], statements: Sequence[str]) -> list[tuple[str, str]]:
    """Run each statement in a savepoint of one transaction; those PostgreSQL refused
    (a shadow that cannot be made, e.g. of a function whose name another
    statement took), with the reason."""
    refused = []
    with conn.transaction():
        for statement in statements:
            try:
                with conn.transaction():
                    conn.execute(statement.encode())
            except psycopg.Error as error:
                refused.append((statement, str(error).splitlines()[0]))
    return refused
