"""Near-duplicates in the wild: the Debian copyright files of this machine.

    .venv/bin/python -m benchmarks.wild [--directory /usr/share/doc] [--output FILE]

No edit script made these.  Every Debian package ships
``/usr/share/doc/<package>/copyright``, and most of each file is licence
text copied from somewhere else: the GPL-2+ notice, the MIT and BSD texts,
the Apache boilerplate, under each package's own ``Files:`` headers and
copyright lines, re-wrapped, re-indented, with other holders' names, other
versions of the same notice, several licences one after the other.  Two sets
come from the same files:

* ``copyright files``: each distinct file is one document.  Files are near
  duplicates when they are mostly the same licence texts under different
  headers.
* ``copyright paragraphs``: the blank-line separated paragraphs (the
  stanzas of the machine-readable format) of those files with at least
  :data:`MIN_WORDS` words, each distinct text once.  A licence passage and
  its variants in other files are documents of their own here: the set has
  far more real near-duplicate pairs than the files alone, and they are
  exactly the passages "repeated under different headers".

What is read, and what is left out (counted in :class:`Reading`):

* ``<directory>/*/copyright`` in path order.  Many ``<package>`` directories
  are symbolic links to another package's directory, and a file can be hard
  linked: a path whose resolved file (device, inode) was already read is
  skipped (``same file``).
* A file with the same bytes as one already read (the packages built from one
  source ship the same file) is the same document shipped twice, not a near
  duplicate: it is kept once, with all its paths (``identical content``).
  Pairs of identical files would only add pairs of S_R 1 that every method
  finds.
* Text is decoded as UTF-8; a file that is not valid UTF-8 is decoded with
  replacement characters and counted (``not UTF-8``), not dropped: its words
  are still there.  A file without a word (empty) is skipped (``no words``).

So that a run says what it measured, :class:`Reading` records a SHA-256 of
the list of (path, SHA-256 of the bytes) read, and the installed version of
every package named by a directory (``dpkg-query``), with their digest.  The
same Debian release with the same packages installed gives the same sets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nearsim.core.measures import word_shingles

__all__ = [
    "DOC_DIRECTORY",
    "MIN_WORDS",
    "Reading",
    "WildDocument",
    "WildSet",
    "copyright_sets",
    "package_versions",
    "paragraphs",
    "read_copyright_files",
]

DOC_DIRECTORY = Path("/usr/share/doc")

MIN_WORDS = 40
"""Paragraphs with fewer words (a ``Files:`` line and a copyright holder, a
``License: GPL-2+`` that points to /usr/share/common-licenses) are left out,
as the evaluation corpus leaves out short sections."""

SKIP_REASONS = ("same file", "identical content", "no words", "not a file")


@dataclass(frozen=True)
class WildDocument:
    """One document of a wild set."""

    id: str
    """``<package>`` (a file) or ``<package>#<n>`` (its n-th paragraph, from 1,
    where it first appears)."""
    text: str
    paths: tuple[str, ...]
    """Every path read whose file had this text (a paragraph: the files it is in)."""


@dataclass
class Reading:
    """The distinct copyright files of a directory, and what was left out."""

    directory: str
    documents: list[WildDocument]
    paths: int
    """Paths ``<directory>/*/copyright`` found."""
    skipped: dict[str, int]
    """Paths left out, by reason (:data:`SKIP_REASONS`)."""
    not_utf8: list[str]
    """Files decoded with replacement characters."""
    digest: str
    """SHA-256 of the lines ``<path> <SHA-256 of its bytes>`` of the files read."""
    packages: dict[str, str] = field(default_factory=dict)
    """Installed version of each package named by a directory (dpkg knows it)."""

    @property
    def packages_digest(self) -> str:
        listing = "".join(f"{name} {version}\n" for name, version in sorted(self.packages.items()))
        return hashlib.sha256(listing.encode()).hexdigest()

    def describe(self) -> dict[str, object]:
        return {
            "directory": self.directory, "paths": self.paths, "files": len(self.documents),
            "skipped": self.skipped, "not_utf8": self.not_utf8, "digest": self.digest,
            "packages": len(self.packages), "packages_digest": self.packages_digest,
            "package_versions": dict(sorted(self.packages.items())),
        }  # fmt: skip


@dataclass(frozen=True)
class WildSet:
    """A set of real texts to evaluate on."""

    name: str
    documents: list[WildDocument]
    description: str

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.documents]


def _has_words(text: str) -> bool:
    return bool(word_shingles(text))


def read_copyright_files(directory: Path = DOC_DIRECTORY, versions: bool = True) -> Reading:
    """The distinct copyright files under ``directory`` (see the module's docstring).

    ``versions=False`` skips asking dpkg for the packages' versions (a
    directory that is not the system's).
    """
    found = sorted(directory.glob("*/copyright"), key=lambda p: str(p))
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    seen_files: set[tuple[int, int]] = set()
    by_content: dict[str, int] = {}
    texts: list[str] = []
    paths: list[list[str]] = []
    not_utf8: list[str] = []
    listing: list[str] = []
    for path in found:
        try:
            status = path.stat()  # follows symbolic links
        except OSError:
            skipped["not a file"] += 1
            continue
        if not path.is_file():
            skipped["not a file"] += 1
            continue
        identity = (status.st_dev, status.st_ino)
        if identity in seen_files:
            skipped["same file"] += 1
            continue
        seen_files.add(identity)
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        listing.append(f"{path} {digest}\n")
        if digest in by_content:
            skipped["identical content"] += 1
            paths[by_content[digest]].append(str(path))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="replace")
            not_utf8.append(str(path))
        if not _has_words(text):
            skipped["no words"] += 1
            continue
        by_content[digest] = len(texts)
        texts.append(text)
        paths.append([str(path)])
    documents = [WildDocument(Path(p[0]).parent.name, t, tuple(p))
                 for t, p in zip(texts, paths, strict=True)]
    reading = Reading(
        directory=str(directory), documents=documents, paths=len(found), skipped=skipped,
        not_utf8=not_utf8, digest=hashlib.sha256("".join(listing).encode()).hexdigest(),
    )
    if versions:
        names = {Path(p).parent.name for d in documents for p in d.paths}
        reading.packages = {n: v for n, v in package_versions().items() if n in names}
    return reading


def package_versions() -> dict[str, str]:
    """Installed packages and their versions (architecture qualifiers dropped)."""
    try:
        listed = subprocess.run(
            ["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Status}\n"],
            check=True, capture_output=True, text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    versions: dict[str, str] = {}
    for line in listed.splitlines():
        name, version, state = [*line.split("\t"), "", ""][:3]
        if state == "installed":
            versions[name] = version
    return versions


def paragraphs(text: str) -> list[tuple[int, str]]:
    """The paragraphs of ``text`` (at blank lines) with at least MIN_WORDS words,
    stripped, with their numbers among all the text's paragraphs (from 1)."""
    pieces = [p.strip() for p in re.split(r"\n[ \t]*\n", text)]
    numbered = enumerate((p for p in pieces if p), start=1)
    return [(n, p) for n, p in numbered if len(p.split()) >= MIN_WORDS]


def copyright_sets(reading: Reading) -> tuple[WildSet, WildSet]:
    """The two wild sets of a reading: the files, and their distinct paragraphs."""
    files = WildSet(
        "copyright files", reading.documents,
        f"the {len(reading.documents):,} distinct files {reading.directory}/*/copyright"
        f" ({reading.paths:,} paths)")
    first: dict[str, int] = {}
    texts: list[str] = []
    ids: list[str] = []
    where: list[list[str]] = []
    for document in reading.documents:
        for number, paragraph in paragraphs(document.text):
            if paragraph in first:
                where[first[paragraph]].extend(document.paths)
                continue
            first[paragraph] = len(texts)
            texts.append(paragraph)
            ids.append(f"{document.id}#{number}")
            where.append(list(document.paths))
    paragraph_set = WildSet(
        "copyright paragraphs",
        [WildDocument(i, t, tuple(w)) for i, t, w in zip(ids, texts, where, strict=True)],
        f"the {len(texts):,} distinct paragraphs of at least {MIN_WORDS} words of those files")
    return files, paragraph_set


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directory", type=Path, default=DOC_DIRECTORY)
    parser.add_argument("--output", type=Path,
                        help="write both sets here (JSON Lines: set, id, paths, text)")
    args = parser.parse_args(argv)
    reading = read_copyright_files(args.directory, versions=args.directory == DOC_DIRECTORY)
    sets = copyright_sets(reading)
    summary = reading.describe()
    summary.pop("package_versions")
    print(json.dumps(summary, indent=1), file=sys.stderr)
    for wild in sets:
        size = sum(len(t.encode()) for t in wild.texts)
        print(f"{wild.name}: {len(wild.documents):,} documents, {size / 1e6:.1f} MB",
              file=sys.stderr)
    if args.output:
        with args.output.open("w", encoding="utf-8") as out:
            for wild in sets:
                for document in wild.documents:
                    out.write(json.dumps({"set": wild.name, "id": document.id,
                                          "paths": document.paths, "text": document.text},
                                         ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
