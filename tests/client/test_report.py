"""The side-by-side report: the right passages marked, and a page a browser shows."""

from __future__ import annotations

import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

from click.testing import CliRunner
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
