"""The benchmark harness runs and its own cross-checks pass (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_run(database: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--dsn", database],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # The run checks that server and client fingerprints agree and that the
    # C and pure-SQL filters count the same rows; its summary names each target.
    assert "simhash in database, KJV chapters, MB/s per core" in result.stdout
    assert "hamming() <= 6 scan of" in result.stdout
    assert "Both queries count" in result.stdout
