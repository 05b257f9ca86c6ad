"""The package's rooms stay apart, its rules have one source, its front door works.

- nothing in ``nearsim.core`` or ``nearsim.server`` imports the client, the
  client never imports the server, and no modules import each other in a
  circle;
- ``import nearsim`` loads neither psycopg nor click (the server imports the
  package and has neither), yet offers the client's names on first use;
- the rules the C side keeps too (bits, band limits, the registry's names)
  agree with ``nearsim.core``;
- the examples in the front door's docstrings run.
"""

from __future__ import annotations

import ast
import doctest
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nearsim
from nearsim.core import bands, bits, fingerprint, measures, profiles, registry

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python_client" / "nearsim"
HEADER = ROOT / "extension" / "src" / "nearsim.h"
SQL = ROOT / "extension" / "sql" / "nearsim.sql"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The nearsim modules a file imports, at any depth of its code."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("nearsim"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("nearsim"):
                found.add(target)
                # `from nearsim.core import fingerprint` imports a module too
                found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name}
            for name, path in modules.items()}


def test_the_rooms_do_not_import_each_other() -> None:
    edges = graph()
    assert any(name.startswith("nearsim.server.") for name in edges)
    for name, targets in edges.items():
        if name.startswith(("nearsim.core", "nearsim.server")):
            assert not {t for t in targets if t.startswith("nearsim.client")}, name
        if name.startswith(("nearsim.core", "nearsim.client")):
            assert not {t for t in targets if t.startswith("nearsim.server")}, name
        if name.startswith("nearsim.core"):
            # the core stands alone: not even the front door
            assert all(t.startswith("nearsim.core") for t in targets), (name, targets)


def test_no_module_imports_in_a_circle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(edges[name]):
            assert state.get(target) != 1, " -> ".join([*path, name, target])
            if target not in state:
                visit(target, [*path, name])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [])


def test_import_nearsim_loads_no_client_library() -> None:
    code = ("import sys, nearsim, nearsim.server.functions; "
            "print(sorted(m for m in ('psycopg', 'click', 'rich') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "[]"


def test_the_front_door() -> None:
    from nearsim.client.connect import connect
    from nearsim.client.documents import DocumentTable
    from nearsim.client.loader import load_paths

    assert nearsim.connect is connect
    assert nearsim.DocumentTable is DocumentTable
    assert nearsim.load is load_paths
    assert nearsim.Profile is profiles.Profile
    assert nearsim.simhash is profiles.simhash
    assert set(nearsim.__all__) <= set(dir(nearsim)) | {"connect", "DocumentTable", "load"}
    for name in ("simhash", "simhash_many", "hamming", "Profile", "connect", "DocumentTable",
                 "load"):
        assert getattr(nearsim, name).__doc__, name
    for name in ("simhash", "Profile", "connect", "DocumentTable", "load"):
        assert ">>>" in getattr(nearsim, name).__doc__, f"{name} has no example"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        nearsim.nothing  # noqa: B018
    assert "DocumentTable" in (nearsim.__doc__ or "")


@pytest.mark.parametrize("module", [nearsim, profiles, bands, fingerprint])
def test_docstring_examples_run(module: object) -> None:
    failed, attempted = doctest.testmod(module, verbose=False)  # type: ignore[arg-type]
    assert attempted > 0 and failed == 0


def header_value(name: str) -> str:
    match = re.search(rf"^#define {name} (.+?)\s*(?:/\*.*)?$", HEADER.read_text(), re.M)
    assert match, name
    return match.group(1)


def test_the_c_side_keeps_the_same_rules() -> None:
    assert int(header_value("FINGERPRINT_BITS")) == bits.BITS
    assert int(header_value("MIN_BANDS")) == bands.MIN_BANDS
    assert int(header_value("MAX_BANDS")) == bands.MAX_BANDS
    assert header_value("NEARSIM_EXTENSION") == f'"{registry.EXTENSION}"'
    assert header_value("NEARSIM_REGISTRY") == f'"{registry.REGISTRY}"'
    assert header_value("DEFAULT_PROFILE") == f'"{fingerprint.PROFILE}"'
    assert float(header_value("CANDIDATE_RESEMBLANCE")) == measures.CANDIDATE_RESEMBLANCE
    # the registry's own check on the number of bands
    assert (f"CHECK (bands OPERATOR(pg_catalog.>=) {bands.MIN_BANDS}"
            f" AND bands OPERATOR(pg_catalog.<=) {bands.MAX_BANDS})") in SQL.read_text()
    for name in ("bits.c", "bands.c", "fingerprint.c", "drop.c"):
        source = (ROOT / "extension" / "src" / name).read_text()
        assert '#include "nearsim.h"' in source, name
        assert not re.search(r"^#define (FINGERPRINT_BITS|BITS|MIN_BANDS|MAX_BANDS)\b", source,
                             re.M), name


def test_every_plpython_body_is_one_call_into_the_server() -> None:
    # the bodies as the build writes them into the install script
    built = subprocess.run(
        ["awk", "-f", str(SQL.parent / "python_bodies.awk"), str(SQL)],
        check=True, capture_output=True, text=True).stdout
    bodies = re.findall(r"AS \$python\$\n(.*?)\n\$python\$;", built, re.S)
    assert len(bodies) >= 17  # nearsim_pairs and nearsim_clusters have none: they are C
    from nearsim.server import functions

    for body in bodies:
        lines = body.splitlines()
        assert lines[0] == "#NEARSIM-IMPORT" and len(lines) == 2, body
        call = re.fullmatch(r"return functions\.(\w+)\(plpy(?:, \w+)*\)", lines[1])
        assert call, lines[1]
        assert callable(getattr(functions, call.group(1))), call.group(1)


def test_band_rules() -> None:
    assert [bands.band_width(5, b) for b in range(5)] == [13, 13, 13, 13, 12]
    assert sum(bands.band_width(3, b) for b in range(3)) == bits.BITS
    # k = 6 over 4 bands: bands 0 to 2 within 1 bit, band 3 exactly
    assert [bands.band_radius(6, 4, b) for b in range(4)] == [1, 1, 1, 0]
    assert bands.band_radius(2, 4, 3) == -1  # no probe needed
    assert bands.check_bands(3) == 3
    with pytest.raises(bands.BandsError, match="between 3 and 16, not 17"):
        bands.check_bands(17)
