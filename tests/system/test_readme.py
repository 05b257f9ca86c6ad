"""The README's examples work as written: its SQL runs, its commands take their options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from nearsim.client.cli import cli, load_command
from nearsim.client.samples import kjv_chapters

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def statements(block: str) -> list[str]:
    """The block's statements, comments removed."""
    code = re.sub(r"--[^\n]*", "", block)
    return [s.strip() for s in code.split(";") if s.strip()]


def test_the_readme_starts_with_the_two_commands() -> None:
    first = blocks("sh")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make demo", "make test"]


def test_the_sql_examples_run_and_find_the_planted_copy(database: str) -> None:
    chapters = kjv_chapters(["Ruth"])
    query = chapters[0].text.replace("Naomi", "Naomi the widow", 1)
    found: dict[str, list[tuple[object, ...]]] = {}
    with psycopg.connect(database, autocommit=True) as conn:
        for block in blocks("sql"):
            for statement in statements(block):
                if statement.startswith("CREATE EXTENSION"):
                    continue  # the test database has it
                if statement.startswith("SELECT nearsim_enable"):
                    conn.execute(
                        "INSERT INTO docs (id, title, body) VALUES (%s, %s, %s)",
                        (1, chapters[0].ref, chapters[0].text))
                    conn.cursor().executemany(
                        "INSERT INTO docs (id, title, body) VALUES (%s, %s, %s)",
                        [(n + 2, c.ref, c.text) for n, c in enumerate(chapters[1:])])
                    conn.execute("INSERT INTO docs VALUES (100, 'copy', %s)",
                                 [chapters[0].text + " Amen."])
                parameters = [query] if "$1" in statement else None
                if statement.startswith("INSERT INTO docs"):
                    # the guarded check-in of a near-duplicate is refused, naming the copy
                    with pytest.raises(psycopg.IntegrityError) as refused:
                        conn.execute(statement.replace("$1", "%s"), parameters)
                    assert refused.value.sqlstate == "23N01", refused.value
                    assert "is a near-duplicate of 1 in table docs" in str(refused.value)
                    found[statement] = [("refused",)]
                    continue
                cursor = conn.execute(statement.replace("$1", "%s"), parameters)
                found[statement] = cursor.fetchall() if cursor.description else []
    answers = [rows for statement, rows in found.items() if "$1" in statement]
    assert len(answers) >= 4 and all(rows for rows in answers), found
    pairs = [rows for statement, rows in found.items() if "nearsim_pairs_verified" in statement]
    assert pairs and [(a, b) for a, b, *_ in pairs[0]] == [("1", "100")]


@pytest.mark.parametrize("line", [
    line.split("  #")[0].strip() for block in blocks("sh") for line in block.splitlines()
    if line.startswith(("nearsim ", "nearsim-load "))
])  # fmt: skip
def test_the_command_examples_take_their_options(line: str) -> None:
    words = shlex.split(line)
    command = load_command if words[0] == "nearsim-load" else cli
    result = CliRunner().invoke(command, [*words[1:], "--help"])
    assert result.exit_code == 0, result.output
