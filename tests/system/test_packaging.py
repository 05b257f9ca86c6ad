"""Packaging: the Docker files, the PGXN metadata and distribution.

No Docker engine is needed: the Dockerfile and compose file are read and
checked against the repository, and the init script's SQL is run against
the test server.  The PGXN distribution is built with `make dist` from a
clone of the last commit and installed with pgxnclient.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
PG_CONFIG = "/usr/lib/postgresql/15/bin/pg_config"


def control_version() -> str:
    control = (ROOT / "extension" / "nearsim.control").read_text()
    match = re.search(r"^default_version = '([^']+)'$", control, re.MULTILINE)
    assert match, "extension/nearsim.control has no default_version"
    return match.group(1)


def client_version() -> str:
    source = (ROOT / "python_client" / "nearsim" / "__init__.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    assert match, "python_client/nearsim/__init__.py has no __version__"
    return match.group(1)


# -- Dockerfile --------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, arguments = whole.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def stages() -> dict[str, list[tuple[str, str]]]:
    """The instructions of each build stage, by stage name, in order."""
    result: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for keyword, arguments in dockerfile_instructions():
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arguments, re.IGNORECASE)
            assert match, f"cannot read FROM {arguments}"
            current = [(keyword, match.group(1))]
            result[match.group(2) or f"stage{len(result)}"] = current
        else:
            current.append((keyword, arguments))
    return result


def install_sh_packages() -> set[str]:
    """The Debian packages scripts/install.sh names (for PostgreSQL 15)."""
    script = (ROOT / "scripts" / "install.sh").read_text()
    packages: set[str] = set()
    for block in re.findall(
        r"^\s*\w*packages(?:\+)?=\((.*?)^\s*\)", script, re.MULTILINE | re.DOTALL
    ):
        for line in block.splitlines():
            words = line.split("#", 1)[0].split()
            packages.update(
                word.strip('"').replace("$PG_MAJOR", "15")
                for word in words
                if not word.startswith('"${')
            )
    assert "postgresql-plpython3-15" in packages, "the package list of install.sh was not found"
    return packages


def test_server_image_is_postgres_15_bookworm() -> None:
    server_stages = list(stages().items())
    name, instructions = server_stages[-1]  # a build without --target makes the last stage
    assert name == "server"
    image = instructions[0][1]
    match = re.fullmatch(r"postgres:(\d+)(?:\.\d+)*-bookworm", image)
    assert match, f"the server image is based on {image}, not postgres:15-bookworm"
    assert int(match.group(1)) >= 15


def test_server_image_installs_with_install_sh_only() -> None:
    instructions = stages()["server"]
    runs = [arguments for keyword, arguments in instructions if keyword == "RUN"]
    assert any("scripts/install.sh" in run and "PG_MAJOR=15" in run for run in runs)
    packages = install_sh_packages()
    for run in runs:
        assert "apt-get" not in run and "apt " not in run, (
            f"packages installed outside install.sh: {run}"
        )
        words = set(re.split(r"[\s;&|]+", run))
        assert not words & packages, f"install.sh's packages named again: {words & packages}"


def test_dockerfile_copies_existing_files() -> None:
    copies = [
        arguments for keyword, arguments in dockerfile_instructions() if keyword in {"COPY", "ADD"}
    ]
    assert copies
    for arguments in copies:
        sources = [word for word in arguments.split() if not word.startswith("--")][:-1]
        for source in sources:
            assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which does not exist"
    init = [arguments for arguments in copies if "initdb-nearsim.sql" in arguments]
    assert init and init[0].split()[-1].startswith("/docker-entrypoint-initdb.d/")


@pytest.fixture
def scratch_database(scratch_databases: Callable[[str], str]) -> str:
    """A scratch database on the test server; dropped afterwards."""
    return scratch_databases(f"nearsim_packaging_{uuid.uuid4().hex[:8]}")


def test_init_script_creates_the_extension(scratch_database: str) -> None:
    script = (DOCKER / "initdb-nearsim.sql").read_text()
    assert re.search(r"CREATE EXTENSION (IF NOT EXISTS )?nearsim\b", script)
    # As the image's entrypoint runs it: psql, stopping at the first error.
    subprocess.run(
        [
            "psql",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            scratch_database,
            "-f",
            str(DOCKER / "initdb-nearsim.sql"),
        ],
        check=True,
    )
    with psycopg.connect(scratch_database) as conn:
        # The installed default version (the working tree may be ahead of it).
        created = conn.execute(
            "SELECT extversion = default_version FROM pg_extension"
            " JOIN pg_available_extensions ON name = extname WHERE extname = 'nearsim'"
        ).fetchone()
        assert created == (True,)
        assert conn.execute(
            "SELECT simhash('the image computes fingerprints') IS NOT NULL"
        ).fetchone() == (True,)


# -- compose.yaml ------------------------------------------------------------


def parse_simple_yaml(text: str) -> Any:
    """The YAML subset compose.yaml uses: block mappings and sequences of
    scalars, flow sequences, comments and quoted strings."""
    lines = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        lines.append((len(raw) - len(raw.lstrip(" ")), stripped))

    def scalar(value: str) -> Any:
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            return [scalar(item) for item in value[1:-1].split(",") if item.strip()]
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            return value[1:-1]
        return value

    def block(start: int, indent: int) -> tuple[Any, int]:
        if lines[start][1].startswith("- "):
            items = []
            while (
                start < len(lines)
                and lines[start][0] == indent
                and lines[start][1].startswith("- ")
            ):
                items.append(scalar(lines[start][1][2:]))
                start += 1
            return items, start
        mapping: dict[str, Any] = {}
        while start < len(lines) and lines[start][0] == indent:
            key, _, value = lines[start][1].partition(":")
            start += 1
            if value.strip():
                mapping[key.strip()] = scalar(value)
            elif start < len(lines) and lines[start][0] > indent:
                mapping[key.strip()], start = block(start, lines[start][0])
            else:
                mapping[key.strip()] = None
        return mapping, start

    parsed, end = block(0, lines[0][0])
    assert end == len(lines), f"compose.yaml: cannot read from line {lines[end][1]!r}"
    return parsed


def test_compose_services_build_the_dockerfile_and_load() -> None:
    compose = parse_simple_yaml((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    stage_names = set(stages())
    for service in ("db", "loader"):
        build = services[service]["build"]
        assert (DOCKER / build["context"]).resolve() == ROOT
        assert (DOCKER / build["context"] / build["dockerfile"]).resolve() == DOCKER / "Dockerfile"
        assert build["target"] in stage_names
    assert services["db"]["build"]["target"] == "server"

    loader = services["loader"]
    dsn = conninfo.conninfo_to_dict(loader["environment"]["NEARSIM_DSN"])
    assert dsn["host"] == "db"
    assert dsn["dbname"] == services["db"]["environment"]["POSTGRES_DB"]
    assert loader["command"][:2] == ["nearsim-load", "--create"]
    documents = loader["command"][-1]
    # SOURCE:TARGET[:MODE], where SOURCE may hold ${VARIABLE:-default}
    targets = [re.sub(r":(ro|rw)$", "", volume).rsplit(":", 1)[1] for volume in loader["volumes"]]
    assert documents in targets
    assert loader["depends_on"]["db"]["condition"] == "service_healthy"


# -- PGXN --------------------------------------------------------------------

# PGXN Meta Spec 1.0.0 (https://pgxn.org/spec/) as a JSON Schema.
TERM = {"type": "string", "pattern": r"^[^\s/\\:]{2,}$"}
SEMVER = {
    "type": "string",
    "pattern": r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$",
}
VERSION_RANGE = {
    "type": "string",
    "pattern": r"^(0|((==|!=|<=?|>=?)\s*)?\d+\.\d+\.\d+(-[0-9A-Za-z-.]+)?"
    r"(\s*,\s*((==|!=|<=?|>=?)\s*)?\d+\.\d+\.\d+(-[0-9A-Za-z-.]+)?)*)$",
}
LICENSES = [
    "agpl_3",
    "apache_1_1",
    "apache_2_0",
    "artistic_1",
    "artistic_2",
    "bsd",
    "freebsd",
    "gfdl_1_2",
    "gfdl_1_3",
    "gpl_1",
    "gpl_2",
    "gpl_3",
    "lgpl_2_1",
    "lgpl_3_0",
    "mit",
    "mozilla_1_0",
    "mozilla_1_1",
    "openssl",
    "perl_5",
    "postgresql",
    "qpl_1_0",
    "ssleay",
    "sun",
    "zlib",
    "open_source",
    "restricted",
    "unrestricted",
    "unknown",
]
CUSTOM = {"^[xX]_": {}}
URI = {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9+.-]*:"}
RELATIONSHIP = {
    "type": "object",
    "propertyNames": TERM,
    "additionalProperties": VERSION_RANGE,
    "minProperties": 1,
}
PHASE = {
    "type": "object",
    "properties": {
        name: RELATIONSHIP for name in ("requires", "recommends", "suggests", "conflicts")
    },
    "patternProperties": CUSTOM,
    "additionalProperties": False,
}
PGXN_META_1_0_0 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"],
    "properties": {
        "name": TERM,
        "version": SEMVER,
        "abstract": {"type": "string", "minLength": 1},
        "description": {"type": "string", "minLength": 1},
        "maintainer": {
            "oneOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
            ]
        },
        "license": {
            "oneOf": [
                {"enum": LICENSES},
                {"type": "array", "minItems": 1, "items": {"enum": LICENSES}},
                {"type": "object", "minProperties": 1, "additionalProperties": URI},
            ]
        },
        "provides": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": TERM,
            "additionalProperties": {
                "type": "object",
                "required": ["file", "version"],
                "properties": {
                    "file": {"type": "string", "minLength": 1},
                    "docfile": {"type": "string", "minLength": 1},
                    "version": SEMVER,
                    "abstract": {"type": "string", "minLength": 1},
                },
                "patternProperties": CUSTOM,
                "additionalProperties": False,
            },
        },
        "meta-spec": {
            "type": "object",
            "required": ["version"],
            "properties": {"version": {"const": "1.0.0"}, "url": URI},
            "patternProperties": CUSTOM,
            "additionalProperties": False,
        },
        "generated_by": {"type": "string", "minLength": 1},
        "tags": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": 255,
                "pattern": r"^[^/\\\x00-\x1f]+$",
            },
        },
        "no_index": {
            "type": "object",
            "properties": {
                "file": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "directory": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
            "patternProperties": CUSTOM,
            "additionalProperties": False,
        },
        "prereqs": {
            "type": "object",
            "properties": {
                name: PHASE for name in ("configure", "build", "test", "runtime", "develop")
            },
            "patternProperties": CUSTOM,
            "additionalProperties": False,
        },
        "release_status": {"enum": ["stable", "testing", "unstable"]},
        "resources": {
            "type": "object",
            "properties": {
                "homepage": URI,
                "bugtracker": {
                    "type": "object",
                    "properties": {"web": URI, "mailto": {"type": "string", "pattern": "@"}},
                    "patternProperties": CUSTOM,
                    "additionalProperties": False,
                },
                "repository": {
                    "type": "object",
                    "properties": {
                        "url": URI,
                        "web": URI,
                        "type": {"type": "string", "pattern": "^[a-z]+$"},
                    },
                    "patternProperties": CUSTOM,
                    "additionalProperties": False,
                },
            },
            "patternProperties": CUSTOM,
            "additionalProperties": False,
        },
    },
    "patternProperties": CUSTOM,
    "additionalProperties": False,
}


def meta() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "META.json").read_text())
    return data


def test_meta_json_is_valid_pgxn_meta_1_0_0() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft7Validator.check_schema(PGXN_META_1_0_0)
    errors = [
        error.message for error in jsonschema.Draft7Validator(PGXN_META_1_0_0).iter_errors(meta())
    ]
    assert not errors


def test_meta_schema_rejects_what_the_spec_forbids() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(PGXN_META_1_0_0)
    broken = [
        {key: value for key, value in meta().items() if key != "provides"},
        {**meta(), "version": "0.1"},
        {**meta(), "license": "postgres"},
        {**meta(), "release_status": "beta"},
        {**meta(), "name": "near sim"},
        {**meta(), "unknown_key": 1},
        {**meta(), "prereqs": {"runtime": {"requires": {"PostgreSQL": "fifteen"}}}},
    ]
    for document in broken:
        assert not validator.is_valid(document), document


def test_meta_json_describes_this_release() -> None:
    data = meta()
    version = control_version()
    assert version == client_version()
    assert data["name"] == "nearsim"
    assert data["version"] == version
    assert data["provides"]["nearsim"]["version"] == version
    assert data["license"] == "postgresql"
    assert data["prereqs"]["runtime"]["requires"]["PostgreSQL"] == "15.0.0"
    assert "plpython3u" in data["prereqs"]["runtime"]["requires"]
    provided = data["provides"]["nearsim"]
    # pgxn load creates only extensions whose file is an SQL script.
    assert provided["file"].endswith(".sql")
    for path in (provided["file"], provided["docfile"]):
        assert (ROOT / path).is_file(), path


@pytest.fixture(scope="module")
def distribution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/nearsim-<version>.zip made by `make dist` in a clone of the last
    commit, with this working tree's packaging files committed on top (so the
    test checks them before they are committed here)."""
    clone = tmp_path_factory.mktemp("dist") / "nearsim"
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], check=True)
    # The files that name the release's version come along, so the
    # distribution is of one version even while a version change is not
    # committed yet.
    packaging_files = [
        "META.json",
        "Makefile",
        "extension/nearsim.control",
        "python_client/nearsim/__init__.py",
    ]
    for packaging_file in packaging_files:
        shutil.copy2(ROOT / packaging_file, clone / packaging_file)
    git = [
        "git",
        "-C",
        str(clone),
        "-c",
        "user.name=nearsim tests",
        "-c",
        "user.email=tests@localhost",
    ]
    subprocess.run([*git, "add", *packaging_files], check=True)
    subprocess.run(
        [*git, "commit", "--quiet", "--allow-empty", "-m", "packaging files under test"], check=True
    )
    subprocess.run(["make", "-s", "-C", str(clone), "dist"], check=True, capture_output=True)
    archive = clone / "dist" / f"nearsim-{control_version()}.zip"
    assert archive.is_file()
    return archive


def test_distribution_unpacks_into_versioned_directory(distribution: Path) -> None:
    prefix = f"nearsim-{control_version()}/"
    with zipfile.ZipFile(distribution) as archive:
        names = archive.namelist()
        assert all(name.startswith(prefix) for name in names)
        assert json.loads(archive.read(prefix + "META.json"))["version"] == control_version()
    required = [
        "META.json",
        "Makefile",
        "README.md",
        "extension/Makefile",
        "extension/nearsim.control",
        "extension/sql/nearsim.sql",
        "python_client/nearsim/__init__.py",
        "scripts/install.sh",
    ]
    if (ROOT / "LICENSE").exists():
        required.append("LICENSE")
    for path in required:
        assert prefix + path in names, f"{path} is missing from the distribution"
    # Build outputs and local state stay out.
    assert not [name for name in names if name.endswith((".o", ".so")) or "/.venv/" in name]


def pg_config(option: str) -> str:
    return subprocess.run([PG_CONFIG, option], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def pgxn(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("pgxn")), *arguments]
    assert Path(command[0]).exists(), "pgxnclient comes with the test extra of python_client"
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env)


def test_pgxn_install_builds_the_distribution(distribution: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(distribution) as archive:
        archive.extractall(tmp_path)
    unpacked = tmp_path / f"nearsim-{control_version()}"
    # Installed into a staging directory (PGXS honours DESTDIR) so that the
    # server the other tests use keeps the extension built from this tree.
    staging = tmp_path / "staging"
    env = {**os.environ, "DESTDIR": str(staging)}
    libdir = pg_config("--pkglibdir")
    # Without write access to the server's directories pgxnclient wants a
    # sudo program; none is needed to write into the staging directory.
    sudo = [] if os.access(libdir, os.W_OK) else ["--sudo", "env"]
    # The distribution's top-level Makefile builds and installs the extension,
    # as pgxnclient runs it (make all, make install, with PG_CONFIG).
    pgxn("install", "--pg_config", PG_CONFIG, *sudo, f"{unpacked}/", env=env)

    sharedir = pg_config("--sharedir")
    extension_dir = staging / sharedir.lstrip("/") / "extension"
    version = control_version()
    assert (extension_dir / "nearsim.control").is_file()
    assert (extension_dir / f"nearsim--{version}.sql").is_file()
    assert (staging / libdir.lstrip("/") / "nearsim.so").is_file()
    assert (extension_dir / "nearsim" / "python" / version / "nearsim" / "__init__.py").is_file()


def test_pgxn_load_creates_the_extension(distribution: Path, scratch_database: str) -> None:
    # pgxn load runs CREATE EXTENSION without CASCADE: the language first.
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS plpython3u")
    parts = conninfo.conninfo_to_dict(scratch_database)
    connection = ["-d", str(parts["dbname"])]
    for option, key in (("-h", "host"), ("-p", "port"), ("-U", "user")):
        if key in parts:
            connection += [option, str(parts[key])]
    pgxn("load", "--yes", "--pg_config", PG_CONFIG, *connection, str(distribution))
    with psycopg.connect(scratch_database) as conn:
        assert conn.execute(
            "SELECT extversion = default_version FROM pg_extension"
            " JOIN pg_available_extensions ON name = extname WHERE extname = 'nearsim'"
        ).fetchone() == (True,)
        assert conn.execute(
            "SELECT hamming(simhash('a b c d'), simhash('a b c d'))"
        ).fetchone() == (0,)


def test_install_script_refuses_an_unknown_package_set() -> None:
    result = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")],
                            env={**os.environ, "NEARSIM_PACKAGES": "desktop"},
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 2
    assert "NEARSIM_PACKAGES must be all, demo or server, not desktop" in result.stderr


def listed_packages(package_set: str) -> set[str]:
    result = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")],
                            env={**os.environ, "NEARSIM_PACKAGES": package_set,
                                 "NEARSIM_LIST_PACKAGES": "1", "PG_MAJOR": "15"},
                            capture_output=True, text=True, check=True)  # fmt: skip
    return set(result.stdout.split())


def test_the_demo_installs_only_what_it_uses() -> None:
    everything, demo, server = (listed_packages(s) for s in ("all", "demo", "server"))
    assert server < demo < everything
    assert {"bible-kjv", "python3-venv", "postgresql-plpython3-15"} <= demo
    assert not {"chromium", "manpages", "groff-base", "pgbouncer"} & demo
    assert "bible-kjv" not in server


def test_install_script_builds_what_a_server_image_needs(tmp_path: Path) -> None:
    # What docker/Dockerfile runs (without purging the compiler, which this
    # machine's other builds need): packages already present are skipped,
    # the extension is built and installed.  Into a staging directory (make
    # takes DESTDIR from the environment): the server the other tests use
    # while this runs keeps its files.
    staging = tmp_path / "staging"
    result = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")],
                            env={**os.environ, "PG_MAJOR": "15", "NEARSIM_PACKAGES": "server",
                                 "DESTDIR": str(staging)},
                            capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    sharedir, libdir = pg_config("--sharedir"), pg_config("--pkglibdir")
    version = control_version()
    installed = staged_python(staging, sharedir, version)
    assert (installed / "core" / "fingerprint.py").read_bytes() == (
        ROOT / "python_client" / "nearsim" / "core" / "fingerprint.py").read_bytes()
    assert (staging / libdir.lstrip("/") / "nearsim.so").is_file()
    assert (staging / sharedir.lstrip("/") / "extension" / f"nearsim--{version}.sql").is_file()


def staged_python(staging: Path, sharedir: str, version: str) -> Path:
    return staging / sharedir.lstrip("/") / "extension" / "nearsim" / "python" / version / "nearsim"


def server_python_files(tree: Path) -> dict[str, bytes]:
    """The files of the rooms the server runs, by path under nearsim/."""
    rooms = (".", "core", "core/data", "core/data/stopwords", "server")
    return {
        str(path.relative_to(tree)): path.read_bytes()
        for room in rooms for path in (tree / room).iterdir()
        if path.is_file() and (path.suffix in (".py", ".json", ".stop")
                               or path.name in ("README", "py.typed"))
    }  # fmt: skip


# Stands for install(1) on the PATH of `make install`.  Before each copy it
# checks that every file of the installation being replaced is there, whole,
# in its old or its new version, and that the copy is written to a new path,
# not where a session reads; it notes the copy, then makes it.
CHECKING_INSTALL = """
import hashlib, json, os, sys
allowed = json.load(open(os.environ["NEARSIM_ALLOWED"]))
for path, versions in allowed.items():
    if not os.path.isfile(path):
        sys.exit(f"{path} is missing while the install runs")
    if hashlib.sha256(open(path, "rb").read()).hexdigest() not in versions:
        sys.exit(f"{path} is neither its old nor its new version while the install runs")
destination = sys.argv[-1]
if os.path.exists(destination):
    sys.exit(f"a copy is written where a session reads: {destination}")
with open(os.environ["NEARSIM_COPIES"], "a") as copies:
    copies.write(destination + "\\n")
os.execv("/usr/bin/install", ["install", *sys.argv[1:]])
"""


def digests(root: Path) -> dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in root.rglob("*") if path.is_file()}  # fmt: skip


def test_installing_over_a_running_server_never_leaves_a_file_missing(tmp_path: Path) -> None:
    # A session that loads the library, reads a script or imports nearsim
    # while `make install` runs on a live server must find each file whole,
    # in its old or its new version.
    staging = tmp_path / "staging"
    make = ["make", "-s", "-C", str(ROOT / "extension"), f"PG_CONFIG={PG_CONFIG}",
            f"DESTDIR={staging}", "install"]  # fmt: skip
    subprocess.run(make, check=True, capture_output=True)
    sharedir, libdir = pg_config("--sharedir"), pg_config("--pkglibdir")
    version = control_version()
    tree = staged_python(staging, sharedir, version)
    source = ROOT / "python_client" / "nearsim"
    assert server_python_files(tree) == server_python_files(source)
    new = digests(staging)
    # The earlier installation differs: the library, a script and a module
    # older, a module the tree has since dropped, and a room the server no
    # longer gets.
    library = staging / libdir.lstrip("/") / "nearsim.so"
    script = staging / sharedir.lstrip("/") / "extension" / f"nearsim--{version}.sql"
    allowed = {path: [digest] for path, digest in new.items()}
    for older in (library, script, tree / "core" / "text.py"):
        older.write_bytes(older.read_bytes() + b"\n")
        allowed[str(older)].append(hashlib.sha256(older.read_bytes()).hexdigest())
    (tree / "core" / "retired.py").write_text("RETIRED = True\n")
    (tree / "client").mkdir()
    (tree / "client" / "cli.py").write_text("")
    checks = tmp_path / "allowed.json"
    checks.write_text(json.dumps(allowed))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "install").write_text(f"#!{sys.executable}\n{CHECKING_INSTALL}")
    (bin_dir / "install").chmod(0o755)
    copies = tmp_path / "copies"
    copies.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "NEARSIM_ALLOWED": str(checks), "NEARSIM_COPIES": str(copies)}  # fmt: skip
    done = subprocess.run(make, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    # Every file was copied so, after the checks, but for the summary of the
    # bitcode for JIT inlining, which PGXS has llvm-lto write in place.
    copied = new.keys() - {path for path in new if path.endswith("/nearsim.index.bc")}
    assert len(copies.read_text().splitlines()) == len(copied)
    # Each file is the new one, with its mode; what the new tree lacks is gone.
    assert digests(staging) == new
    assert library.stat().st_mode & 0o777 == 0o755
    assert script.stat().st_mode & 0o777 == 0o644
    assert not (tree / "client").exists()
    assert not [path for path in staging.rglob(".*")]


def test_install_replacing_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    helper = ROOT / "extension" / "install_replacing.sh"
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    for arguments, message in (
            (["-d", "x"], "option -d is not one PGXS uses"),
            (["-m"], "-m needs a mode"),
            (["a"], "usage: install_replacing.sh"),
            (["a", "b", "missing-directory"], "missing-directory is not a directory")):
        done = subprocess.run(["sh", str(helper), *arguments], cwd=tmp_path,
                              capture_output=True, text=True, check=False)  # fmt: skip
        assert done.returncode == 2 and message in done.stderr, (arguments, done.stderr)
    done = subprocess.run(["sh", str(helper), "-m", "600", "missing", str(tmp_path / "b")],
                          cwd=tmp_path, capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 1
    assert (tmp_path / "b").read_text() == "b"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b"]
    # A destination without a directory is the working directory's.
    subprocess.run(["sh", str(helper), "-c", "-m", "600", "a", "b"], cwd=tmp_path, check=True)
    assert (tmp_path / "b").read_text() == "a"
    assert (tmp_path / "b").stat().st_mode & 0o777 == 0o600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b"]


def test_the_client_wheel_ships_the_core_and_the_client_only(tmp_path: Path) -> None:
    # What `pip install ./python_client` installs: the server room runs only
    # inside PostgreSQL, installed by the extension's Makefile.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                    "--wheel-dir", str(tmp_path), str(ROOT / "python_client")],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = tmp_path.glob("nearsim-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for shipped in ("nearsim/__init__.py", "nearsim/py.typed", "nearsim/core/fingerprint.py",
                    "nearsim/core/data/calibration-default-1.json",
                    "nearsim/core/data/stopwords/english.stop", "nearsim/client/cli.py"):
        assert shipped in names, shipped
    assert not [name for name in names if name.startswith("nearsim/server/")]
