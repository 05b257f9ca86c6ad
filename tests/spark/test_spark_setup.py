"""The project's own set-up brings what the Spark back end needs, and only for the tests."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listed_packages(package_set: str) -> set[str]:
    result = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")],
                            env={**os.environ, "NEARSIM_PACKAGES": package_set,
                                 "NEARSIM_LIST_PACKAGES": "1", "PG_MAJOR": "15"},
                            capture_output=True, text=True, check=True)  # fmt: skip
    return set(result.stdout.split())


def test_java_comes_with_everything_and_not_with_the_demo() -> None:
    assert "openjdk-17-jre-headless" in listed_packages("all")
    assert "openjdk-17-jre-headless" not in listed_packages("demo")
    assert "openjdk-17-jre-headless" not in listed_packages("server")


def test_pyspark_is_an_extra_that_the_tests_install() -> None:
    project = tomllib.loads((ROOT / "python_client" / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(requirement.startswith("pyspark>=3.5") for requirement in extras["spark"])
    assert "nearsim[spark]" in extras["test"]
    assert not any("spark" in requirement for requirement in project["dependencies"])
