"""Every name the install and update scripts look up is out of an attacker's reach.

CREATE EXTENSION and ALTER EXTENSION UPDATE run their script as a superuser
with the search_path ``pg_catalog, <the extension's schema>, pg_temp``.  A
role that may create objects in that schema can add an operator or a
function that matches a call better than the built-in one (``=(regclass,
regclass)`` beats ``pg_catalog.=(oid, oid)``, which needs a coercion), and
the script would run it as the superuser.  So every operator outside the
bodies of functions that pin their search_path is written
``OPERATOR(pg_catalog.op)``, every call and every table is qualified with its
schema, and constructs that look operators up by name (IN, BETWEEN, LIKE,
IS DISTINCT FROM, simple CASE, NULLIF, JOIN ... USING) are not used there.

This file reads the scripts with a small SQL tokenizer and fails on any
lookup that is left to the search_path.  tests/system/test_upgrade.py runs
the updates under an attacker's operators and functions.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

import nearsim

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "extension"
PG_CONFIG = "/usr/lib/postgresql/15/bin/pg_config"
UPDATED_FROM = ("0.1.0", "0.2.0", "0.3.0")


@dataclass(frozen=True)
class Token:
    kind: str  # word, quoted, string, dollar, number, param, operator, punct
    text: str
    line: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>--[^\n]*|/\*.*?\*/)
  | (?P<meta>^\\[^\n]*)
  | (?P<dollar>\$\$.*?\$\$|\$(?P<tag>[A-Za-z_][A-Za-z_0-9]*)\$.*?\$(?P=tag)\$)
  | (?P<string>[EeNn]?'(?:[^']|'')*')
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<word>@extschema@|[A-Za-z_][A-Za-z_0-9$]*)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)
  | (?P<param>\$\d+)
  | (?P<punct>::|:=|=>|\.\.|[()\[\],;.:])
  | (?P<operator>[-+*/<>=~!@#%^&|`?]+)
""", re.VERBOSE | re.DOTALL | re.MULTILINE)


def tokenize(text: str, first_line: int = 1) -> list[Token]:
    """The tokens of SQL text, without spaces, comments and psql's commands."""
    tokens: list[Token] = []
    position, line = 0, first_line
    while position < len(text):
        match = TOKEN.match(text, position)
        assert match is not None, f"line {line}: cannot read {text[position:position + 40]!r}"
        kind = str(match.lastgroup)  # (a dollar quote's tag closes before the quote)
        if kind not in ("space", "comment", "meta"):
            tokens.append(Token(kind, match.group(0), line))
        line += match.group(0).count("\n")
        position = match.end()
    return tokens


# PL/pgSQL words after which a statement of its own begins
BLOCK_WORDS = {"BEGIN", "DECLARE", "ELSE", "EXCEPTION", "LOOP", "THEN"}


def statements(tokens: list[Token], plpgsql: bool = False) -> list[list[Token]]:
    """The statements of a script, or of a PL/pgSQL body."""
    found: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if token.text == ";":
            found.append([])
        else:
            found[-1].append(token)
            if plpgsql and depth == 0 and token.upper in BLOCK_WORDS:
                found.append([])
    return [statement for statement in found if statement]


# Words that may stand before "(" without being a function call: SQL
# constructs, clauses and type names with a modifier.
NOT_CALLS = {
    "ALL", "AND", "ANY", "ARRAY", "AS", "BY", "CAST", "CHAR", "CHARACTER", "CHECK",
    "COALESCE", "CONFLICT", "DECIMAL", "DEFAULT", "DO", "ELSE", "EXISTS", "EXTRACT",
    "FILTER", "FROM", "GREATEST", "GROUP", "IF", "IN", "INTO", "JOIN", "KEY", "LATERAL",
    "LEAST", "NOT", "NUMERIC", "ON", "OPERATOR", "OR", "OVER", "PERFORM", "POSITION",
    "QUERY", "REFERENCES", "RETURN", "RETURNS", "ROW", "SELECT", "SET", "SETOF", "SOME",
    "SUBSTRING", "TABLE", "THEN", "TRIM", "UNIQUE", "USING", "VALUES", "VARCHAR",
    "VARYING", "WHEN", "WHERE", "WITH", "WITHIN",
}
# Before "name(" these words make it the name of an object defined or
# named by its signature, or an alias with its columns: not a call
NAMING_WORDS = {"FUNCTION", "PROCEDURE", "TABLE", "AS", "INTO", "ON"}
# Constructs that look an operator up by name in the search_path
OPERATOR_WORDS = {"BETWEEN", "LIKE", "ILIKE", "SIMILAR", "NULLIF", "NATURAL"}
# After these words an expression starts: "-" and a number is a negative constant
EXPRESSION_STARTS = {
    "AND", "ARRAY", "BY", "CASE", "COST", "DEFAULT", "ELSE", "ELSIF", "HAVING", "IF", "LIMIT",
    "NOT", "OFFSET", "ON", "OR", "PERFORM", "RETURN", "ROWS", "SELECT", "THEN", "VALUES",
    "WHEN", "WHERE",
}
# Words that begin the clauses of a statement (so they end a SET list)
CLAUSES = {"WHERE", "FROM", "RETURNING", "AS", "LANGUAGE", "RETURNS", "WITH"}
# Statements whose "ON name" names a table
ON_A_TABLE = (["DROP", "POLICY"], ["CREATE", "POLICY"], ["CREATE", "TRIGGER"])


class Statement:
    """One statement's tokens, read by position (past either end: nothing)."""

    def __init__(self, tokens: list[Token], plpgsql: bool) -> None:
        self.tokens = tokens
        self.plpgsql = plpgsql
        self.leading = [self.word(i) for i in range(4)]
        # GRANT and REVOKE name roles after FROM and TO
        self.grants = self.leading[0] in ("GRANT", "REVOKE")

    def word(self, index: int) -> str:
        return self.tokens[index].upper if 0 <= index < len(self.tokens) else ""

    def text(self, index: int) -> str:
        return self.tokens[index].text if 0 <= index < len(self.tokens) else ""

    def kind(self, index: int) -> str:
        return self.tokens[index].kind if 0 <= index < len(self.tokens) else ""

    def qualified(self, index: int) -> bool:
        """The name or operator at index is written schema.name."""
        return self.text(index - 1) == "." and self.kind(index - 2) in ("word", "quoted")

    def names_a_relation(self, index: int) -> bool:
        """A relation's name by itself (not schema.name) is at index."""
        if self.word(index) == "ONLY":
            index += 1
        return self.kind(index) in ("word", "quoted") and self.text(index + 1) not in (".", "(")


def operator_problem(s: Statement, i: int, in_set_list: bool) -> str | None:
    op, before = s.text(i), s.tokens[i - 1] if i else None
    if s.qualified(i):
        return None
    if op == "*" and (s.text(i - 1) in ("(", ",", ".") or s.word(i - 1) == "SELECT"):
        return None  # every column, or count(*)
    if op == "=" and s.kind(i - 1) == "word" and (
            s.word(i - 2) in ("SET", "USING")
            or (s.text(i - 2) == "," and (in_set_list or (s.plpgsql and s.leading[0] == "RAISE")))):
        return None  # an assignment: SET column = value, RAISE ... USING option = value
    if op == "-" and s.kind(i + 1) == "number" and (
            before is None or before.kind == "operator" or before.text in ("(", ",", "[")
            or before.upper in EXPRESSION_STARTS):
        return None  # a negative constant
    return f"unqualified operator {op} (write OPERATOR(pg_catalog.op))"


def construct_problem(s: Statement, i: int) -> str | None:
    """SQL constructs that look an operator up, and names of functions left unqualified."""
    word = s.word(i)
    if word in OPERATOR_WORDS:
        return f"{s.text(i)} looks an operator up by name"
    if word == "DISTINCT" and s.word(i - 1) in ("IS", "NOT"):
        return "IS DISTINCT FROM looks an operator up by name"
    if word == "IN" and s.word(i - 2) not in ("FOR", "FOREACH") and s.word(i - 1) != "TAG":
        # (a PL/pgSQL loop, and an event trigger's tags, compare nothing)
        return "IN looks = up by name (write OPERATOR(pg_catalog.=) ANY)"
    if word == "CASE" and s.word(i + 1) != "WHEN":
        return "CASE value WHEN looks = up by name"
    if word == "USING" and s.text(i + 1) == "(" and "JOIN" in map(s.word, range(i)):
        return "JOIN ... USING looks = up by name"
    if word == "HANDLER" and s.text(i + 2) != ".":
        return f"unqualified handler {s.text(i + 1)}"
    if word == "FUNCTION" and s.word(i - 1) == "EXECUTE" and s.text(i + 2) != ".":
        return f"unqualified trigger function {s.text(i + 1)}"
    if (s.kind(i) in ("word", "quoted") and s.text(i + 1) == "(" and word not in NOT_CALLS
            and i > 0 and not s.qualified(i) and s.word(i - 1) not in NAMING_WORDS
            and s.text(i - 1) != ")"):
        return f"unqualified call of {s.text(i)}"
    return None


def relation_problem(s: Statement, i: int) -> str | None:
    """A table named without its schema where a query or a change reads it."""
    word, before = s.word(i), s.word(i - 1)
    reads = (
        (word in ("FROM", "JOIN") and not s.grants and before != "DISTINCT")
        or (word == "UPDATE" and i == 0)
        or (word == "INTO" and before == "INSERT")
        or (word == "TABLE" and before in ("ALTER", "TRUNCATE"))
        or (word == "TABLE" and before == "ON" and (s.grants or s.leading[0] == "COMMENT"))
        or (word == "ON" and s.leading[:2] in ON_A_TABLE)
        or (word == "ON" and s.grants and s.word(i + 1) not in ("FUNCTION", "SCHEMA", "TABLE"))
    )
    if reads and s.names_a_relation(i + 1):
        return (f"unqualified relation {s.text(i + 1)}"
                " (write @extschema@.name or pg_catalog.name)")
    return None


def check(tokens: list[Token], plpgsql: bool = False) -> list[str]:
    """The lookups left to the search_path in one statement (or one PL/pgSQL statement)."""
    s = Statement(tokens, plpgsql)
    problems: list[str] = []
    in_set_list = False
    for i, token in enumerate(tokens):
        if token.upper == "SET":
            in_set_list = True
        elif token.upper in CLAUSES:
            in_set_list = False
        for problem in (operator_problem(s, i, in_set_list) if token.kind == "operator"
                        else construct_problem(s, i), relation_problem(s, i)):
            if problem is not None:
                problems.append(f"line {token.line}: {problem}")
    return problems


def function_body(statement: list[Token]) -> tuple[Token | None, bool, str]:
    """The body of a CREATE FUNCTION or DO statement, whether the function pins
    its search_path, and its language."""
    words = [t.upper for t in statement]
    body = next((t for previous, t in itertools.pairwise(statement)
                 if t.kind in ("dollar", "string") and previous.upper in ("AS", "DO")), None)
    pinned = any(words[i] == "SET" and words[i + 1] == "SEARCH_PATH"
                 for i in range(len(words) - 1))
    language = next((words[i + 1] for i in range(len(words) - 1) if words[i] == "LANGUAGE"),
                    "PLPGSQL" if words[0] == "DO" else "")
    return body, pinned, language


def body_text(body: Token) -> str:
    """What a function's body holds, without its quotes."""
    if body.kind == "string":
        return body.text[1:-1].replace("''", "'")
    tag = body.text[:body.text.index("$", 1) + 1]
    return body.text[len(tag):-len(tag)]


def audit(script: str) -> list[str]:
    """Every lookup the script leaves to the search_path, outside the bodies
    of functions that pin it."""
    problems: list[str] = []
    for statement in statements(tokenize(script)):
        words = [t.upper for t in statement]
        defines = words[0] == "DO" or words[:2] == ["CREATE", "FUNCTION"] \
            or words[:4] == ["CREATE", "OR", "REPLACE", "FUNCTION"]
        body, pinned, language = function_body(statement) if defines else (None, False, "")
        header = [t for t in statement if t is not body]
        problems += check(header)
        if body is None or pinned or (language == "C" and body.kind == "string"):
            continue
        if language != "PLPGSQL":
            problems.append(f"line {body.line}: a {language} body without a pinned search_path")
            continue
        for part in statements(tokenize(body_text(body), body.line), plpgsql=True):
            problems += check(part, plpgsql=True)
    return problems


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The install script and the update scripts, built from this tree's sources."""
    build = tmp_path_factory.mktemp("scripts")
    shutil.copytree(EXTENSION / "sql", build / "sql",
                    ignore=shutil.ignore_patterns("nearsim--*.sql"))
    for name in ("Makefile", "nearsim.control"):
        shutil.copy(EXTENSION / name, build / name)
    version = nearsim.__version__
    names = [f"nearsim--{version}.sql"] + [f"nearsim--{old}--{version}.sql"
                                           for old in UPDATED_FROM]
    subprocess.run(["make", "-s", "-C", str(build), f"PG_CONFIG={PG_CONFIG}",
                    *(f"sql/{name}" for name in names)], check=True, capture_output=True)
    return {name: (build / "sql" / name).read_text() for name in names}


def test_the_tokenizer_finds_what_an_attacker_can_capture() -> None:
    found = audit("""
        DO $$ DECLARE entry record; BEGIN
            FOR entry IN SELECT tbl FROM nearsim_tables LOOP
                UPDATE nearsim_tables SET bands = bands WHERE tbl = entry.tbl;
            END LOOP;
        END $$;
        SELECT format('%I', n) FROM pg_catalog.pg_namespace WHERE nspname IN ('a', 'b');
        CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW EXECUTE FUNCTION f();
        CREATE ACCESS METHOD m TYPE INDEX HANDLER h;
        SELECT a.x FROM pg_catalog.pg_class a WHERE a.relpages BETWEEN 1 AND -2;
        SELECT CASE a WHEN 1 THEN 2 END, - b, a IS DISTINCT FROM b, 1 - 2;
        CREATE FUNCTION p() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1 + 1; END $$;
        """)
    assert found == [
        "line 3: unqualified relation nearsim_tables (write @extschema@.name or pg_catalog.name)",
        "line 4: unqualified relation nearsim_tables (write @extschema@.name or pg_catalog.name)",
        "line 4: unqualified operator = (write OPERATOR(pg_catalog.op))",
        "line 7: unqualified call of format",
        "line 7: IN looks = up by name (write OPERATOR(pg_catalog.=) ANY)",
        "line 8: unqualified relation x (write @extschema@.name or pg_catalog.name)",
        "line 8: unqualified trigger function f",
        "line 9: unqualified handler h",
        "line 10: BETWEEN looks an operator up by name",
        "line 11: CASE value WHEN looks = up by name",
        "line 11: unqualified operator - (write OPERATOR(pg_catalog.op))",
        "line 11: IS DISTINCT FROM looks an operator up by name",
        "line 11: unqualified operator - (write OPERATOR(pg_catalog.op))",
        "line 12: unqualified operator + (write OPERATOR(pg_catalog.op))",
    ]
    # what is qualified, an assignment, a negative constant or inside a pinned body passes
    assert audit("""
        DO $$ DECLARE entry record; BEGIN
            FOR entry IN SELECT r.tbl FROM @extschema@.nearsim_tables r LOOP
                UPDATE @extschema@.nearsim_tables SET bands = bands, profile = profile
                    WHERE tbl::pg_catalog.oid OPERATOR(pg_catalog.=) entry.tbl::pg_catalog.oid;
                RAISE WARNING 'x %', pg_catalog.left(entry.tbl::pg_catalog.text, -8)
                    USING ERRCODE = '22023', HINT = 'h';
            END LOOP;
        END $$;
        CREATE FUNCTION p(a integer DEFAULT -1) RETURNS int LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $$ BEGIN RETURN 1 + f(a); END $$;
        CREATE TRIGGER t AFTER INSERT ON @extschema@.x FOR EACH ROW
            EXECUTE FUNCTION @extschema@.f();
        SELECT pg_catalog.count(*) FROM pg_catalog.pg_class;
        """) == []


def test_the_scripts_leave_no_lookup_to_the_search_path(scripts: dict[str, str]) -> None:
    found = {name: problems for name, script in scripts.items() if (problems := audit(script))}
    assert found == {}
