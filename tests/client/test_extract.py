"""Text extraction: every format, and every way an input can be bad."""

from __future__ import annotations

import errno
import io
import os
import zipfile
from pathlib import Path

import docx
import pytest
from fpdf import FPDF
from hypothesis import given
from hypothesis import strategies as st
from pypdf import PdfReader, PdfWriter

from nearsim.client.extract import (
    REASONS,
    InputError,
    check_encoding,
    check_text,
    html_text,
    read_document,
    read_text,
)

TEXT = "In the beginning God created the heaven and the earth.\nAnd the earth was void.\n"
LIMIT = 1_000_000


def reason_of(path: Path, **options: str | int) -> tuple[str, str, int | None]:
    with pytest.raises(InputError) as caught:
        read_text(path, max_bytes=int(options.pop("max_bytes", LIMIT)), **options)  # type: ignore[arg-type]
    assert caught.value.reason in REASONS
    return caught.value.reason, caught.value.message, caught.value.offset


def pdf_bytes(text: str | None) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    if text is not None:
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 5, text)
    else:
        pdf.rect(10, 10, 50, 50, style="F")  # a page with only a picture
    return bytes(pdf.output())


def test_plain_text_and_markdown(tmp_path: Path) -> None:
    for name in ("a.txt", "b.md", "no-suffix"):
        (tmp_path / name).write_text(TEXT)
        assert read_text(tmp_path / name, max_bytes=LIMIT) == TEXT


def test_byte_order_marks_decide_the_encoding(tmp_path: Path) -> None:
    for encoding, bom in (("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"),
                          ("utf-16-be", b"\xfe\xff")):
        path = tmp_path / f"{encoding}.txt"
        path.write_bytes(bom + "Déjà vu — ça va".encode(encoding))
        assert read_text(path, max_bytes=LIMIT) == "Déjà vu — ça va"


def test_invalid_utf8_names_the_byte_offset_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("Straße und Café".encode("latin-1"))
    reason, message, offset = reason_of(path)
    assert (reason, offset) == ("invalid-encoding", 4)
    assert "byte 4 (0xdf)" in message and "--encoding" in message
    assert read_text(path, max_bytes=LIMIT, encoding="latin-1") == "Straße und Café"


def test_auto_detects_a_legacy_encoding(tmp_path: Path) -> None:
    # Detection is a guess; German umlauts in a legacy 8-bit encoding are an easy one.
    text = ("Straße, Größe, Übermut und Äpfel schmecken süß. " * 20).encode("cp1252")
    path = tmp_path / "cp1252.txt"
    path.write_bytes(text)
    assert reason_of(path)[0] == "invalid-encoding"
    assert read_text(path, max_bytes=LIMIT, encoding="auto") == text.decode("cp1252")
    (tmp_path / "utf8.txt").write_text("naïve café")
    assert read_text(tmp_path / "utf8.txt", max_bytes=LIMIT, encoding="auto") == "naïve café"


def test_check_encoding() -> None:
    assert check_encoding("latin-1") == "latin-1"
    assert check_encoding("auto") == "auto"
    with pytest.raises(ValueError, match="unknown encoding 'klingon'"):
        check_encoding("klingon")


@pytest.mark.parametrize("content,kind", [
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "PNG"),
    (b"\x7fELF\x02\x01\x01" + bytes(100), "ELF"),
    (b"\x1f\x8b\x08" + os.urandom(100), "gzip"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), ".docx"),
    (bytes(range(32)) * 40, "control bytes"),
])  # fmt: skip
def test_binary_files(tmp_path: Path, content: bytes, kind: str) -> None:
    path = tmp_path / "file.txt"
    path.write_bytes(content)
    reason, message, _ = reason_of(path)
    assert reason == "binary" and kind in message


def test_nul_bytes_in_text_are_reported_with_their_offset(tmp_path: Path) -> None:
    path = tmp_path / "nul.txt"
    path.write_bytes(b"twelve bytes\x00then more text that is ordinary prose\n")
    reason, message, offset = reason_of(path)
    assert (reason, offset) == ("nul-bytes", 12)
    assert "PostgreSQL" in message


def test_empty_and_whitespace_files(tmp_path: Path) -> None:
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "blank").write_text(" \n\t\n")
    assert reason_of(tmp_path / "empty")[0] == "empty"
    assert reason_of(tmp_path / "blank")[0] == "empty"


def test_size_limit_is_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:  # fmt: skip
    path = tmp_path / "big.txt"
    path.write_text("x" * 101)
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a: opened.append(p) or real_open(p, *a))
    reason, message, _ = reason_of(path, max_bytes=100)
    assert reason == "too-large" and "101 bytes" in message and opened == []
    assert read_text(path, max_bytes=101) == "x" * 101


def test_path_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert reason_of(tmp_path / "missing.txt")[0] == "not-found"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    reason, message, _ = reason_of(tmp_path / "dangling")
    assert reason == "not-found" and "dangling symbolic link" in message
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert reason_of(tmp_path / "loop")[0] == "symlink-loop"
    os.mkfifo(tmp_path / "fifo")
    assert reason_of(tmp_path / "fifo")[0] == "not-a-file"  # and did not block
    assert reason_of(tmp_path)[0] == "not-a-file"
    (tmp_path / "locked.txt").write_text(TEXT)

    def refuse(path: str, *args: int) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os, "open", refuse)  # root reads everything, so pretend
    assert reason_of(tmp_path / "locked.txt")[:2] == ("unreadable", "permission denied")


def test_html_keeps_the_visible_text_only(tmp_path: Path) -> None:
    page = ("<!DOCTYPE html><html><head><title>Title</title><style>p {color: red}</style>"
            "<script>var hidden = 1;</script></head><body><p>First <b>bo</b>ld para&shy;graph"
            "</p><p>Second</p><div>third<br>fourth</div><noscript>no</noscript></body></html>")
    assert html_text(page).split("\n") == ["Title", "First bold para\u00adgraph", "Second",
                                           "third", "fourth"]
    (tmp_path / "page.html").write_text(page)
    (tmp_path / "page.txt").write_text(page)  # recognised by its content too
    (tmp_path / "notes.txt").write_text("a <b>literal</b> tag in plain text")
    assert read_text(tmp_path / "page.html", max_bytes=LIMIT) == html_text(page)
    assert read_text(tmp_path / "page.txt", max_bytes=LIMIT) == html_text(page)
    assert read_text(tmp_path / "notes.txt", max_bytes=LIMIT).startswith("a <b>")


def test_pdf_text_and_pdf_problems(tmp_path: Path) -> None:
    (tmp_path / "good.pdf").write_bytes(pdf_bytes(TEXT))
    assert read_text(tmp_path / "good.pdf", max_bytes=LIMIT).split() == TEXT.split()
    (tmp_path / "scan.pdf").write_bytes(pdf_bytes(None))
    assert reason_of(tmp_path / "scan.pdf")[0] == "no-text"
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(3000))
    assert reason_of(tmp_path / "broken.pdf")[0] == "corrupt-pdf"
    (tmp_path / "truncated.pdf").write_bytes(pdf_bytes(TEXT)[:400])
    assert reason_of(tmp_path / "truncated.pdf")[0] == "corrupt-pdf"

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(TEXT))))
    writer.encrypt(user_password="secret", owner_password="owner")
    locked = io.BytesIO()
    writer.write(locked)
    (tmp_path / "locked.pdf").write_bytes(locked.getvalue())
    assert reason_of(tmp_path / "locked.pdf")[0] == "encrypted-pdf"

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(TEXT))))
    writer.encrypt(user_password="", owner_password="owner")  # opens without a password
    readable = io.BytesIO()
    writer.write(readable)
    (tmp_path / "readable.pdf").write_bytes(readable.getvalue())
    assert read_text(tmp_path / "readable.pdf", max_bytes=LIMIT).split() == TEXT.split()


def test_word_paragraphs_and_tables(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("Before the table.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"cell {r}{c}"
    document.add_paragraph("After the table.")
    document.save(str(tmp_path / "memo.docx"))
    assert read_text(tmp_path / "memo.docx", max_bytes=LIMIT) == (
        "Before the table.\ncell 00\tcell 01\ncell 10\tcell 11\nAfter the table.")

    document = docx.Document()
    document.save(str(tmp_path / "blank.docx"))
    assert reason_of(tmp_path / "blank.docx")[0] == "no-text"
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04" + os.urandom(500))
    assert reason_of(tmp_path / "broken.docx")[0] == "corrupt-docx"
    with zipfile.ZipFile(tmp_path / "fake.docx", "w") as archive:
        archive.writestr("hello.txt", "not a word file")
    assert reason_of(tmp_path / "fake.docx")[0] == "corrupt-docx"
    with zipfile.ZipFile(tmp_path / "archive.zip", "w") as archive:
        archive.writestr("hello.txt", "an archive")
    assert reason_of(tmp_path / "archive.zip")[0] == "binary"


def test_extracted_text_is_held_to_the_limit(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("repeated words compress well " * 20_000)
    document.save(str(tmp_path / "bomb.docx"))
    assert (tmp_path / "bomb.docx").stat().st_size < 100_000
    reason, message, _ = reason_of(tmp_path / "bomb.docx", max_bytes=100_000)
    assert reason == "too-large" and "its text is" in message


def test_check_text() -> None:
    assert check_text("fine", max_bytes=10) == "fine"
    with pytest.raises(InputError) as caught:
        check_text("é\x00", max_bytes=10)
    assert (caught.value.reason, caught.value.offset) == ("nul-bytes", 2)
    with pytest.raises(InputError) as caught:
        check_text("ab\ud800cd", max_bytes=10)
    assert (caught.value.reason, caught.value.offset) == ("invalid-encoding", 2)
    assert "surrogate U+D800" in caught.value.message
    with pytest.raises(InputError, match="over --max-bytes 3"):
        check_text("éé", max_bytes=3)
    with pytest.raises(InputError, match="no text"):
        check_text("  \n", max_bytes=10)


@given(st.binary(max_size=3000))
def test_any_bytes_give_text_or_a_reason(data: bytes) -> None:
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"nearsim-fuzz-{os.getpid()}.bin"
    path.write_bytes(data)
    try:
        text = read_text(path, max_bytes=LIMIT, encoding="utf-8")
    except InputError as error:
        assert error.reason in REASONS and error.message
    else:
        assert "\x00" not in text and text.strip()
        text.encode("utf-8")  # storable
    finally:
        path.unlink()


@pytest.mark.parametrize("content,encoding", [
    (b"plain ascii", "utf-8"),
    ("naïve café".encode(), "utf-8"),
    (b"\xef\xbb\xbf" + b"with a BOM", "utf-8"),
    (b"\xff\xfe" + "utf-16 text".encode("utf-16-le"), "utf-8"),
    ("Straße".encode("latin-1"), "latin-1"),
    ("ascii in latin-1".encode("latin-1"), "latin-1"),
    ("détecté".encode(), "auto"),
    (b"<html><body><p>a &amp; b</p></body></html>", "utf-8"),
])  # fmt: skip
def test_read_document_gives_the_texts_utf8(tmp_path: Path, content: bytes, encoding: str
                                            ) -> None:  # fmt: skip
    path = tmp_path / "doc.txt"
    path.write_bytes(content)
    text, encoded = read_document(path, max_bytes=LIMIT, encoding=encoding)
    assert encoded == text.encode("utf-8")
    assert text == read_text(path, max_bytes=LIMIT, encoding=encoding)
