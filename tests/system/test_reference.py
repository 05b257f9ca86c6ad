"""docs/REFERENCE.md is what scripts/gen_reference.py makes of the code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference",
                                                  ROOT / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_reference_page_is_up_to_date(database: str) -> None:
    page = generator().reference(database)
    committed = (ROOT / "docs" / "REFERENCE.md").read_text(encoding="utf-8")
    assert committed == page, "run: .venv/bin/python scripts/gen_reference.py --dsn ..."


def test_every_function_and_command_is_described(database: str) -> None:
    module = generator()
    page = module.reference(database)
    for name in module.ERRORS:  # a function, or one overload as name(arguments)
        assert f"### `{name}" + ("`" if "(" in name else "(") in page, name
    for command in ("init", "load", "similar", "pairs", "clusters", "compare", "report",
                    "stats", "spark"):
        assert f"### `nearsim {command}`" in page, command
    assert "### `nearsim-load`" in page
    # each function's entry has its signature, traits and errors
    entries = page.split("\n### `")[1:]
    for entry in entries:
        if entry.startswith("nearsim"):
            continue  # commands
        assert "RETURNS" in entry and "- errors: " in entry and "LANGUAGE" in entry, entry
    assert "(tbl regclass, text_column name, hash_column name DEFAULT 'si'::name" in page
