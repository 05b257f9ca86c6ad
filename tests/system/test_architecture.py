"""docs/ARCHITECTURE.md names every C file and every Python module of the package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"


def layout() -> str:
    """The page's layout block: the first fenced block."""
    text = PAGE.read_text(encoding="utf-8")
    return text.split("```", 2)[1]


def listed_modules() -> set[str]:
    """``package/module.py`` for every module the block names under its package."""
    listed, package = set(), None
    for line in layout().splitlines():
        heading = re.match(r"\s*nearsim/(\w+)/", line)
        if heading:
            package = heading.group(1)
            continue
        if re.match(r"\s{0,2}\S", line):  # a top-level entry ends the package
            package = None
        if package is not None:
            listed.update(f"{package}/{name}" for name in re.findall(r"\b[\w]+\.py\b", line))
    return listed


def test_every_c_file_is_named() -> None:
    named = set(re.findall(r"\b[\w]+\.[ch]\b", layout()))
    files = {path.name for path in (ROOT / "extension" / "src").glob("*.[ch]")}
    assert files - named == set(), "add them to docs/ARCHITECTURE.md"


def test_every_module_is_named_under_its_package() -> None:
    package_root = ROOT / "python_client" / "nearsim"
    modules = {f"{path.parent.name}/{path.name}" for path in package_root.glob("*/*.py")
               if path.name != "__init__.py"}
    assert modules - listed_modules() == set(), "add them to docs/ARCHITECTURE.md"


def test_the_routes_are_drawn() -> None:
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    for route in ("One document", "One query", "One guarded INSERT", "One `nearsim similar`"):
        assert any(heading.startswith(route) for heading in headings), route
