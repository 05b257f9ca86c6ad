"""The side-by-side report: the right passages marked, and a page a browser shows."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from html import escape, unescape
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from PIL import Image

from nearsim.client.cli import cli
from nearsim.client.report import Document, report, token_spans
from nearsim.client.samples import kjv_chapters
from nearsim.core import measures
from nearsim.core import text as core_text

CHAPTERS = {c.ref: c.text for c in kjv_chapters(["Ruth"])}
ORIGINAL = CHAPTERS["Ruth 1"]
EDITED = (ORIGINAL.replace("Naomi", "Naomi the widow", 2).replace("Moab", "MOAB")
          + "\nAnd they lived in Bethlehem ever after.\n")  # fmt: skip
MARK = re.compile(r'<mark class="p\d" title="passage (\d+), (\d+) words">(.*?)</mark>', re.S)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def passages(page: str, side: int) -> dict[int, str]:
    """Passage number -> its marked text, in the left (0) or right (1) column."""
    column = page.split('<div class="doc">')[1 + side]
    return {int(n) - 1: unescape(text) for n, _, text in MARK.findall(column)}


def test_token_spans_are_the_fingerprint_tokens() -> None:
    for text in (ORIGINAL, "Straße, ﬁne café — don't stop; 東京 soft\u00adhyphen", ""):
        spans = token_spans(text)
        assert spans is not None
        assert [core_text.normalize(text[s:e]).strip() for s, e in spans] == list(
            core_text.tokens(text))
    assert token_spans("½ off") is None  # normalisation splits the character: no marks


def test_each_passage_is_marked_on_both_sides_with_the_same_words() -> None:
    page = report(Document("Ruth 1", ORIGINAL), [Document("edited", EDITED)])
    left, right = passages(page, 0), passages(page, 1)
    chunks = measures.compare(ORIGINAL, EDITED).chunks
    assert len(chunks) >= 3 and set(left) == set(right) == set(range(len(chunks)))
    for number, chunk in enumerate(chunks):
        assert list(core_text.tokens(left[number])) == list(core_text.tokens(right[number]))
        assert len(list(core_text.tokens(left[number]))) == chunk.length
    assert "S_L" in page and "<script" not in page and "http" not in page
    assert unescape(re.sub(r"<[^>]+>", "", page.split('<div class="doc">')[1])).count(
        "Elimelech") == ORIGINAL.count("Elimelech")  # the whole text is there


def test_report_command_for_files_and_clusters(database: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(ORIGINAL)
    (tmp_path / "b.txt").write_text(EDITED)
    (tmp_path / "c.txt").write_text(ORIGINAL + "Selah.\n")
    out = tmp_path / "pair.html"
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"),
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert passages(out.read_text(), 0)

    table = "report_docs"
    loaded = CliRunner().invoke(cli, ["load", str(tmp_path), "--dsn", database, "-t", table,
                                      "--create", "-q", "--include", "*.txt"])
    assert loaded.exit_code == 0, loaded.output
    group = tmp_path / "group.html"
    result = CliRunner().invoke(cli, ["report", "--cluster", str(tmp_path / "b.txt"), "-s", "0.5",
                                      "--dsn", database, "-t", table, "-o", str(group)])
    assert result.exit_code == 0, result.output
    assert group.read_text().count("<section>") == 2  # pivot against two members
    missing = CliRunner().invoke(cli, ["report", "a-file-that-is-not-there", "-o", str(out),
                                       "--dsn", database, "-t", table])
    assert missing.exit_code == 2
    assert CliRunner().invoke(cli, ["report", "-o", str(out)]).exit_code == 2


def test_a_browser_shows_the_marks(tmp_path: Path) -> None:
    browser = shutil.which("chromium")
    assert browser, "scripts/install.sh installs Debian's chromium"
    page = tmp_path / "page.html"
    page.write_text(report(Document("Ruth 1", ORIGINAL), [Document("edited", EDITED)]))
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1280,900", page.as_uri()],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 900)
    colours = {colour for _, colour in image.getcolors(1280 * 900) or []}
    assert (255, 230, 128) in colours and (179, 230, 255) in colours  # two passage colours
    assert sum(count for count, colour in image.getcolors(1280 * 900) or []
               if colour == (255, 255, 255)) < 1280 * 900 * 0.95  # not a blank page


def test_identical_copies_are_shown_once() -> None:
    copies = [Document(f"copy-{n}.txt", ORIGINAL) for n in range(14)]
    edited = [Document("edited-1.txt", EDITED), Document("edited-2.txt", EDITED)]
    page = report(Document("Ruth 1", ORIGINAL), [*copies[:7], *edited, *copies[7:]])
    text = unescape(re.sub(r"<[^>]+>", "", page))
    # the reference once, the edited text once: no copy repeats a text
    assert text.count("Elimelech") == ORIGINAL.count("Elimelech") + EDITED.count("Elimelech")
    assert "14 identical copies of Ruth 1" in text
    assert all(f"copy-{n}.txt" in text for n in range(14))
    assert "and 1 identical copy" in text and "edited-2.txt" in text
    assert page.count("<section>") == 2
    assert len(page) < 3 * len(ORIGINAL) + 10_000


def group_texts() -> dict[str, str]:
    """Name -> text: groups of 3, 2 and 2 near-duplicates, and one document alone.
    No name is part of another, so that a page shows a document if it holds its name."""
    return {
        "a1.txt": CHAPTERS["Ruth 1"], "a2.txt": CHAPTERS["Ruth 1"] + "Selah.\n", "a3.txt": EDITED,
        "b1.txt": CHAPTERS["Ruth 2"], "b2.txt": CHAPTERS["Ruth 2"] + "Amen.\n",
        "c1.txt": CHAPTERS["Ruth 3"], "c2.txt": CHAPTERS["Ruth 3"].replace("Boaz", "Booz", 1),
        "d.txt": CHAPTERS["Ruth 4"],
    }  # fmt: skip


def printed_clusters(output: str) -> dict[int, list[str]]:
    """Number -> members, as `nearsim clusters` printed them."""
    found: dict[int, list[str]] = {}
    for line in output.splitlines():
        heading = re.fullmatch(r"cluster (\d+): (\d+) documents", line)
        if heading:
            members = found.setdefault(int(heading[1]), [])
        else:
            members.append(line.strip().removesuffix("  (pivot)"))
    return found


def shown(page: str, keys: list[str]) -> list[str]:
    """The keys a report page shows."""
    return [key for key in keys if escape(key) in page]


@pytest.fixture(scope="module")
def grouped(database: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A table of group_texts() loaded by their absolute paths: its name and their directory."""
    root = tmp_path_factory.mktemp("grouped") / "docs"
    root.mkdir()
    for name, text in group_texts().items():
        (root / name).write_text(text)
    table = f"groups_{uuid.uuid4().hex[:8]}"
    loaded = run("load", str(root), "--dsn", database, "-t", table, "--create", "-q")
    assert loaded.exit_code == 0, loaded.output
    return table, root


@pytest.mark.parametrize("method", ["components", "pivot"])
def test_report_cluster_takes_the_number_clusters_prints(
    database: str, grouped: tuple[str, Path], tmp_path: Path, method: str
) -> None:
    table, root = grouped
    keys = [str(root / name) for name in group_texts()]
    options = ["--method", method, "--dsn", database, "-t", table]
    listed = run("clusters", *options)
    assert listed.exit_code == 0, listed.output
    printed = printed_clusters(listed.stdout)
    assert sorted(len(members) for members in printed.values()) == [2, 2, 3]
    as_json = json.loads(run("clusters", *options, "--json").stdout)
    assert {group["number"]: group["members"] for group in as_json} == printed
    for number, members in printed.items():
        page = tmp_path / f"group-{number}.html"
        result = run("report", "--cluster", str(number), *options, "-o", str(page))
        assert result.exit_code == 0, result.output
        assert result.stderr == f"wrote {page}: {members[0]} and {len(members) - 1} other" \
                                " document(s)\n"
        text = page.read_text()
        assert sorted(shown(text, keys)) == sorted(members)
        # the first member as clusters lists it (the pivot with --method pivot) on the left
        assert text.split('<div class="doc"><h2>')[1].startswith(escape(members[0]))
    missing = run("report", "--cluster", "4", *options, "-o", str(tmp_path / "x.html"))
    assert missing.exit_code == 2
    assert missing.output == (f"Error: there is no group 4: 3 groups of near-duplicates"
                              f' (s_l >= 0.87) in "{table}", and no document has the key 4\n')


def test_report_cluster_finds_a_file_by_any_path_to_it(
    database: str, grouped: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, root = grouped
    keys = [str(root / name) for name in group_texts()]
    group_a = [str(root / name) for name in ("a1.txt", "a2.txt", "a3.txt")]
    (tmp_path / "elsewhere").mkdir()  # a relative path through ..
    page = tmp_path / "group.html"
    elsewhere = tmp_path / "elsewhere"
    for directory, spelling in ((root, "a2.txt"), (root, "./a2.txt"),
                                (elsewhere, os.path.relpath(root / "a2.txt", elsewhere))):
        monkeypatch.chdir(directory)
        result = run("report", "--cluster", spelling, "--dsn", database, "-t", table, "-o",
                     str(page))  # fmt: skip
        assert result.exit_code == 0, (spelling, result.output)
        assert sorted(shown(page.read_text(), keys)) == group_a, spelling

    # loaded through a symbolic link to the directory: the real path finds it too
    link = tmp_path / "link"
    link.symlink_to(root, target_is_directory=True)
    linked = f"linked_{uuid.uuid4().hex[:8]}"
    loaded = run("load", str(link), "--dsn", database, "-t", linked, "--create", "-q")
    assert loaded.exit_code == 0, loaded.output
    monkeypatch.chdir(root)
    result = run("report", "--cluster", "b2.txt", "--dsn", database, "-t", linked, "-o",
                 str(page))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(shown(page.read_text(), [str(link / name) for name in group_texts()])) == [
        str(link / "b1.txt"), str(link / "b2.txt")]

    alone = run("report", "--cluster", "d.txt", "--dsn", database, "-t", table, "-o", str(page))
    assert alone.exit_code == 2
    assert alone.output == (f"Error: {root / 'd.txt'} is in no group of near-duplicates"
                            f' (s_l >= 0.87) in "{table}"\n')
    (root.parent / "new.txt").write_text(CHAPTERS["Ruth 4"])
    unknown = run("report", "--cluster", "../new.txt", "--dsn", database, "-t", table, "-o",
                  str(page))  # fmt: skip
    assert unknown.exit_code == 2
    assert unknown.output.startswith(f"Error: ../new.txt is a file that was not loaded into"
                                     f' "{table}": no document has the key'
                                     f" {root.parent / 'new.txt'}")


def test_report_cluster_of_a_number_that_is_also_a_key(database: str, tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    texts = {"1": CHAPTERS["Ruth 4"],  # alone
             "2": CHAPTERS["Ruth 1"], "3": CHAPTERS["Ruth 1"] + "Selah.\n",  # group 2
             "4": CHAPTERS["Ruth 2"], "5": CHAPTERS["Ruth 2"] + "Amen.\n",  # group 1
             "6": CHAPTERS["Ruth 2"] + "Amen. Amen.\n"}  # fmt: skip
    records.write_text("".join(json.dumps({"id": key, "text": text}) + "\n"
                               for key, text in texts.items()))
    table = f"records_{uuid.uuid4().hex[:8]}"
    loaded = run("load", str(records), "--dsn", database, "-t", table, "--create", "-q")
    assert loaded.exit_code == 0, loaded.output
    assert printed_clusters(run("clusters", "--dsn", database, "-t", table).stdout) == {
        1: ["4", "5", "6"], 2: ["2", "3"]}
    page = tmp_path / "group.html"

    def report_of(wanted: str) -> Result:
        return run("report", "--cluster", wanted, "--dsn", database, "-t", table, "-o",
                   str(page))

    first = report_of("1")  # group 1; the document 1 is in none
    assert first.exit_code == 0, first.output
    assert first.stderr.startswith("warning: 1 is taken as the number of group 1; the document"
                                   " 1 is in no group\n")
    assert "<h2>4</h2>" in page.read_text()
    second = report_of("2")  # group 2, which holds the document 2: nothing to warn of
    assert second.exit_code == 0 and not second.stderr.startswith("warning")
    assert "<h2>2</h2>" in page.read_text() and "<h2>3</h2>" in page.read_text()
    beyond = report_of("5")  # no group 5: the document 5, in group 1
    assert beyond.exit_code == 0 and not beyond.stderr.startswith("warning")
    assert "<h2>4</h2>" in page.read_text() and "<h2>5</h2>" in page.read_text()
