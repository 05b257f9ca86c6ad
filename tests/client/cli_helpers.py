"""What the command-line tests share: the chapters, running the CLI, loading and reading tables."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
from click.testing import CliRunner, Result
from psycopg import sql

from nearsim.client.cli import cli
from nearsim.client.samples import kjv_chapters

CHAPTERS = {c.ref: c.text for c in kjv_chapters(["Genesis", "Ruth", "Jude", "Obadiah"])}


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def table_name() -> str:
    return f"docs_{uuid.uuid4().hex[:8]}"


def rows(dsn: str, table: str) -> dict[str, tuple[Any, ...]]:
    """key -> (source, content_hash, body, si) of every stored document."""
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT key, source, content_hash, body, si FROM {}").format(
            sql.Identifier(*table.split(".")))
        return {key: rest for key, *rest in conn.execute(query)}


def verify(dsn: str, table: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT * FROM nearsim_verify(%s, true)", [table])
        names = [c.name for c in cur.description or ()]
        return dict(zip(names, cur.fetchone() or (), strict=True))


MAX_BYTES = 100_000  # a file size limit: the .docx and .pdf files are smaller


def load(dsn: str, table: str, *paths: str, extra: tuple[str, ...] = ()) -> Result:
    return run("load", *paths, "--dsn", dsn, "--table", table, "--create", "--quiet",
               "--max-bytes", str(MAX_BYTES), *extra)


def chapter_files(tmp_path: Path) -> Path:
    """A folder of the chapters, one file each (``<ref>.txt``)."""
    root = tmp_path / "docs"
    root.mkdir()
    for ref, text in CHAPTERS.items():
        (root / f"{ref}.txt").write_text(text)
    return root


def loaded_chapters(dsn: str, tmp_path: Path) -> tuple[str, Path]:
    """A new table holding the chapters as loaded from their files, and the folder."""
    root = chapter_files(tmp_path)
    table = table_name()
    loaded = load(dsn, table, str(root))
    assert loaded.exit_code == 0, loaded.output
    return table, root
