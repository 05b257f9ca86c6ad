"""docs/ARCHITECTURE.md names every C file and every Python module of the package;
long files and classes say why at their top."""

from __future__ import annotations

import ast
import re
import subprocess
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


LONGEST_FILE = 800
LONGEST_CLASS = 300
SOURCES = re.compile(r"\.(py|c|h|sql|awk|sh|in)$|(^|/)Makefile$")


def tracked_sources() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()  # fmt: skip
    return [ROOT / name for name in listed if SOURCES.search(name) and (ROOT / name).exists()]


def test_a_long_file_says_why_at_its_top() -> None:
    """Over 800 lines only with the reason in its first lines (generated files excepted)."""
    unexplained = []
    for path in tracked_sources():
        lines = path.read_text(encoding="utf-8").splitlines()
        top = "\n".join(lines[:40])
        if (len(lines) > LONGEST_FILE and "do not edit" not in top.lower()
                and not re.search(r"over (800|a thousand) lines", top, flags=re.I)):
            unexplained.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert unexplained == [], "split them, or say at the top why they are one"


def test_a_long_class_says_why_in_its_docstring() -> None:
    """Over 300 lines only with "for a reason" in its docstring, or in a long
    file that says why at its top."""
    unexplained = []
    for path in tracked_sources():
        if path.suffix != ".py":
            continue
        text = path.read_text(encoding="utf-8")
        file_says_why = re.search(r"over (800|a thousand) lines", text[:3000], flags=re.I)
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ClassDef) or node.end_lineno is None:
                continue
            length = node.end_lineno - node.lineno + 1
            says_why = file_says_why or "for a reason" in (ast.get_docstring(node) or "")
            if length > LONGEST_CLASS and not says_why:
                unexplained.append(f"{path.relative_to(ROOT)}: {node.name} ({length} lines)")
    assert unexplained == [], "split them, or say in the docstring why they are one"
