"""A benchmark that meets a database error ends with one line naming it and the
SQLSTATE, never a Python traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg import conninfo

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

# The benchmarks that reach the database soon after they start.
REACHING_SOON = ["concurrency", "guarded", "hnsw", "hundred", "scale", "spark", "verified"]


def test_every_benchmark_that_takes_a_dsn_ends_through_run_main() -> None:
    takes_a_dsn = sorted(path.stem for path in BENCHMARKS.glob("*.py")
                         if '"--dsn"' in path.read_text() and "__main__" in path.read_text())
    assert set(REACHING_SOON) < set(takes_a_dsn)
    for name in takes_a_dsn:
        text = (BENCHMARKS / f"{name}.py").read_text()
        assert "sys.exit(run_main(main))" in text, f"benchmarks/{name}.py ends without run_main"


def last_words(done: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr without the timed progress lines ("[hh:mm:ss] ...")."""
    return [line for line in done.stderr.splitlines()
            if line.strip() and not re.match(r"\[\d\d:\d\d:\d\d\] ", line)]


@pytest.mark.parametrize("name", REACHING_SOON)
def test_a_database_error_is_one_line_with_its_sqlstate(database: str, name: str) -> None:
    # Every statement of a read-only session that writes fails with 25006.
    read_only = conninfo.make_conninfo(database, options="-c default_transaction_read_only=on")
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--dsn", read_only],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert last_words(done) == [
        f"benchmarks.{name}: database error 25006: cannot execute CREATE EXTENSION"
        " in a read-only transaction"]


def test_a_server_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    nowhere = f"host={tmp_path} port=1 dbname=nearsim"
    for name in ("verified", "concurrency"):
        done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--dsn", nowhere],
                              capture_output=True, text=True, timeout=300, cwd=ROOT,
                              check=False)  # fmt: skip
        assert done.returncode in (1, 2), done.stderr
        assert "Traceback" not in done.stderr
        (line,) = last_words(done)
        assert line.startswith(f"benchmarks.{name}: ") and str(tmp_path) in line
