"""Write docs/REFERENCE.md: every SQL function of the extension and every CLI command.

    .venv/bin/python scripts/gen_reference.py --dsn DSN [--output docs/REFERENCE.md]

The SQL part comes from the catalogue of a database where the extension is
installed (signature, result, volatility, strictness, parallel safety,
language and the function's COMMENT); the errors each function raises are
listed in ERRORS below, and the tests fail when a function has no entry or an
entry names no function.  The CLI part is each command's ``--help``.  A test
regenerates the page and compares it with the committed one, so the reference
cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click
import psycopg

from nearsim.client.cli import cli, load_command

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "docs" / "REFERENCE.md"

TABLE_ERRORS = ("55000 if `tbl` is not enabled; 22004 if it is NULL; 42501 if the caller may"
                " not act as the table's owner")
VERIFIED_ERRORS = ("22023 for an unknown `measure`, a `min_similarity` outside 0..1, outside"
                   " the calibrated 0.5..0.95 without `max_distance`, or a profile without a"
                   " calibration and no `max_distance`; 55000 if `tbl` is not enabled or its"
                   " profile cannot be computed here")
ERRORS: dict[str, str] = {
    "hamming": "none (NULL in, NULL out)",
    "simhash_bits": "none (NULL in, NULL out)",
    "simhash_from_bits": "22P02 for anything but 64 characters 0/1, naming the problem",
    "simhash(document text)": "none (NULL for NULL and for a text without words)",
    "simhash(document text, profile text)": "22023 for a profile this server does not compute"
                                            " (unknown version, option, language or size),"
                                            " 58P01 if a library the profile needs is missing"
                                            " or another version",
    "simhash_profile": "none",
    "nearsim_profile": "22023 for a name this server does not compute",
    "nearsim_profiles": "none",
    "nearsim_band": "none: NULL for a number of bands outside 3..16 or a band outside the"
                    " layout (LEAKPROOF, so that row-level security keeps indexes over it"
                    " usable: an error could reveal a fingerprint's bits)",
    "nearsim_band_probes": "22023 for bands outside 3..16, a band outside the layout or a"
                           " distance outside 0..64; 54000 if one band would need more than"
                           " 2^20 probes",
    "nearsim_rotate": "none (NULL for a shift outside 0..63)",
    "nearsim_btree_handler": "none (called by PostgreSQL for the nearsim_btree access method)",
    "nearsim_hamming_support": "none (called by the planner for hamming())",
    "nearsim_check_index": "42809 for a relation that is not a rotation index (an index of one"
                           " bigint key, btree or nearsim_btree, without a predicate, on a heap"
                           " table); 42501 unless the caller has the privileges of the owner of"
                           " its table",
    "nearsim_guard_lock": "42501 unless the caller may insert into or update `tbl`; 55000 if it"
                          " has no primary key",
    "nearsim_writes_as_owner": "none (false for a relation that is gone)",
    "nearsim_sketch_index": "55000 if `tbl` is not enabled",
    "nearsim_rotation_indexes": "none (no rows for a table without rotation indexes)",
    "nearsim_links": "42501 unless the caller has the privileges of the owner of `tbl`; 55000 if"
                     " it is not enabled",
    "nearsim_guard": "22023 for neither max_distance nor min_similarity, a max_distance outside"
                     " 0..64, a min_similarity not above 0 or above 1 (or NaN) or outside the"
                     " calibration without max_distance, an"
                     " unknown measure or action; 42501 unless the caller has the privileges of"
                     " the owner of `tbl`; 55000 if it is not enabled",
    "nearsim_unguard": "42501 unless the caller has the privileges of the owner of `tbl`",
    "nearsim_guard_check": "23N01 for a near-duplicate (action error), 40001 when one was"
                           " committed after a REPEATABLE READ or SERIALIZABLE transaction began,"
                           " 42501 when a role other than the owner sets nearsim.guard = off",
    "nearsim_nearest": "22023 for n below 1 or a max_distance outside 0..64, 42501 without"
                       " SELECT on `tbl`, 55000 if it is not enabled",
    "nearsim_search": "22023 for a max_distance outside 0..64, 42501 without SELECT on `tbl`,"
                      " 42703 for a column it lacks, 55000 if its rotation indexes are missing"
                      " or do not cover the 64 bits",
    "nearsim_check_batch": "22023 for a max_distance outside 0..64, 2202E for keys and"
                           " fingerprints of different lengths or more than one dimension,"
                           " 42501 without SELECT on `tbl`, 42703 for a column it lacks, 55000"
                           " if its rotation indexes are missing or do not cover the 64 bits",
    "nearsim_enable": "42P01 for a missing table, 42809 for one that is not an ordinary table,"
                      " 55000 if already enabled or without a single-column primary key of"
                      " type integer, bigint, text or uuid, 42703/42804 for a missing or"
                      " non-text column, 42804 for a fingerprint column that is not bigint,"
                      " 55000 if it holds values that are not the profile's fingerprints,"
                      " 42622 for generated names over 63 bytes, 42P07 if they exist, 22023"
                      " for bad bands, batch_size or profile, 42501 if not the owner",
    "nearsim_disable": TABLE_ERRORS,
    "nearsim_verify": TABLE_ERRORS,
    "nearsim_rebuild": TABLE_ERRORS + "; 22023 for bad bands or profile; 55000 if the table's"
                       " profile cannot be computed here",
    "nearsim_check_profile": "55000 if this server cannot compute the profile, with a hint to"
                             " rebuild with another",
    "nearsim_compare": "22023 if `min_chunk_words` or `shingle_words` is below 1, or for a"
                       " `tokenisation` other than 1 or 2",
    "nearsim_resemblance": "22023 for a `tokenisation` other than 1 or 2 (NULL in, NULL out)",
    "nearsim_containment": "22023 for a `tokenisation` other than 1 or 2 (NULL in, NULL out)",
    "nearsim_literal_similarity": "22023 for a `tokenisation` other than 1 or 2 (NULL in,"
                                  " NULL out)",
    "nearsim_shingle_count": "22023 for a `tokenisation` other than 1 or 2 (NULL in, NULL out)",
    "nearsim_sketch": "22023 for a `tokenisation` other than 1 or 2 (NULL in, NULL out; NULL"
                      " for a text without words)",
    "nearsim_resemblance_pairs": "22023 for a `min_similarity` not above 0 or above 1, or a"
                                 " `tokenisation` other than 1 or 2; 42501 without SELECT on"
                                 " `tbl`; 42703 for a column `tbl` lacks",
    "nearsim_minhash": "22023 if `hashes` is outside 1..10000 (54000 above), or for a"
                       " `tokenisation` other than 1 or 2",
    "nearsim_minhash_estimate": "22023 for signatures of different lengths, empty ones, or"
                                " values that are NULL or negative",
    "nearsim_estimate": "22023 for a distance outside 0..64, an unknown profile or one"
                        " without a calibration",
    "nearsim_radius": "22023 for `min_similarity` outside 0.5..0.95, an unknown profile or one"
                      " without a calibration",
    "nearsim_similar_verified": VERIFIED_ERRORS,
    "nearsim_pairs_verified": VERIFIED_ERRORS,
    "nearsim_clusters_verified": VERIFIED_ERRORS + "; 22023 for an unknown `method` or"
                                 " `min_size` below 1",
    "nearsim_pairs": "22023 for a distance outside 0..64; 42501 without SELECT on `tbl`;"
                     " 54000 for more near pairs than `nearsim.max_pairs`; 55000 if `tbl` is"
                     " not enabled or its profile cannot be computed here",
    "nearsim_clusters": "22023 for a distance outside 0..64 or an unknown `method`; 42501"
                        " without SELECT on `tbl`; 54000 for more near pairs than"
                        " `nearsim.max_pairs`; 55000 if `tbl` is not enabled or its profile"
                        " cannot be computed here",
    "nearsim_forget_dropped_tables": "none (an event trigger function, not called directly)",
    "nearsim_guard_alter_table": "55000 from an ALTER TABLE that would break an enabled table,"
                                 " with a hint to disable it first (an event trigger"
                                 " function, not called directly)",
    "nearsim_follow_owner": "errors of ALTER ... OWNER TO on the table's objects (an event"
                            " trigger function, not called directly)",
    "nearsim_link_registered": "42501 from `nearsim_link` (a trigger function of the"
                               " registry, not called directly)",
    "nearsim_as_owner": "42501 unless the caller has the privileges of the table's owner;"
                        " 42P01 for a missing table; any error of the statement",
    "nearsim_link": "42501 unless the caller has the privileges of the table's owner, or for"
                    " an object outside the table's schema or of another owner",
    "nearsim_register": "42501 unless the caller has the privileges of the table's owner;"
                        " 22004 for a NULL argument; 42501 from `nearsim_link`",
    "nearsim_unregister": "42501 unless the caller has the privileges of the table's owner"
                          " (anybody may forget a table that is gone)",
    "nearsim_drop_extension": "2BP01 from `DROP EXTENSION nearsim` without CASCADE while"
                              " tables are enabled (an event trigger function, not called"
                              " directly)",
}

VOLATILITY = {"i": "IMMUTABLE", "s": "STABLE", "v": "VOLATILE"}
PARALLEL = {"s": "PARALLEL SAFE", "r": "PARALLEL RESTRICTED", "u": "PARALLEL UNSAFE"}

# The PL/Python bodies (<name>_python) are not listed: SQL calls the C
# function <name>, whose language is shown as its body's.
FUNCTIONS = """
SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid),
       pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid),
       p.provolatile, p.proisstrict, p.proparallel,
       CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_proc b
                         WHERE b.proname = p.proname || '_python'
                           AND b.pronamespace = p.pronamespace
                           AND b.proargtypes = p.proargtypes)
            THEN 'plpython3u' ELSE l.lanname END,
       pg_catalog.obj_description(p.oid, 'pg_proc')
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
     AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'nearsim'
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE p.proname NOT LIKE '%\\_python'
ORDER BY p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
"""


def sql_functions(dsn: str) -> list[tuple[str, ...]]:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS nearsim CASCADE")
        return [tuple("" if v is None else str(v) for v in row)
                for row in conn.execute(FUNCTIONS).fetchall()]  # fmt: skip


def sql_section(rows: list[tuple[str, ...]]) -> str:
    parts = []
    for name, identity, arguments, result, volatility, strict, parallel, language, comment in (
            rows):  # fmt: skip
        traits = [VOLATILITY[volatility], "STRICT" if strict == "True" else "",
                  PARALLEL[parallel], f"LANGUAGE {language}"]
        parts.append(
            f"### `{name}({identity})`\n\n"
            f"```sql\n{name}({arguments}) RETURNS {result}\n```\n\n"
            f"{comment}.\n\n"
            f"- {' '.join(t for t in traits if t)}\n"
            f"- errors: {ERRORS.get(f'{name}({identity})') or ERRORS[name]}\n"
        )
    return "\n".join(parts)


def command_help(command: click.Command, name: str,
                 parent: click.Context | None = None) -> str:  # fmt: skip
    """``name --help``, as the command prints it on a 100-column terminal."""
    with command.make_context(name, [], parent=parent, resilient_parsing=True,
                              terminal_width=100, max_content_width=100) as context:  # fmt: skip
        return command.get_help(context)


def cli_section() -> str:
    assert isinstance(cli, click.Group)
    parts = [f"### `nearsim`\n\n```\n{command_help(cli, 'nearsim')}\n```\n"]
    with cli.make_context("nearsim", [], resilient_parsing=True) as group:
        for name in sorted(cli.commands):
            text = command_help(cli.commands[name], name, group)
            parts.append(f"### `nearsim {name}`\n\n```\n{text}\n```\n")
    parts.append("### `nearsim-load`\n\nThe same as `nearsim load`:\n\n"
                 f"```\n{command_help(load_command, 'nearsim-load')}\n```\n")
    return "\n".join(parts)


def reference(dsn: str) -> str:
    rows = sql_functions(dsn)
    # ERRORS names a function, or one of its overloads as name(arguments)
    names = {r[0] for r in rows} | {f"{r[0]}({r[1]})" for r in rows}
    missing = sorted(f"{r[0]}({r[1]})" for r in rows
                     if r[0] not in ERRORS and f"{r[0]}({r[1]})" not in ERRORS)
    unused = sorted(ERRORS.keys() - names)
    if missing or unused:
        raise SystemExit(f"gen_reference.py: ERRORS lacks {missing}, names no function {unused}")
    return f"""# Reference

Every SQL function of the extension and every command of the client, generated
from the code by `scripts/gen_reference.py` (a test checks that this page is
what it generates). Errors are given as SQLSTATE codes. The functions that
`nearsim_enable` creates for each table (`<prefix>_similar`) are described in
the README.

## SQL functions

{sql_section(rows)}
## Command line

{cli_section()}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    args.output.write_text(reference(args.dsn), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
