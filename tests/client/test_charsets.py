"""Which encoding each text file is read in: UTF-8 first, byte order marks,
cp1252 before rarer code pages, a named legacy encoding never applied to
UTF-8; and the encoding of each file in the JSON of nearsim-load and
nearsim check."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from nearsim.client.charsets import decode, override_note
from nearsim.client.cli import cli
from nearsim.client.extract import InputError, read_file

LIMIT = 1 << 20

# Short Windows-1252 texts as a Windows editor writes them: euro sign, curly
# quotes, en dash, accents.  charset-normalizer alone reads several of them
# as cp1250, cp775 or cp437.
WINDOWS_TEXTS = [
    "Le prix est de 12 € – “très” raisonnable, dit-il à l’équipe.",
    "Für Müller: die Rechnung über 300 € ist fällig – bitte „prüfen“.",
    "Café “Zürich”: 5 € pro Tasse – günstig!",
    "Total: 1 200 € – voir “Annexe B”.",
    "Invoice €45 – “paid” in full — thanks, René.",
    "He said “yes” – and paid €10 for the crème brûlée.",
    "Señor Núñez pagó 30 € por el menú del día – ¡qué caro!",
]


@pytest.mark.parametrize("text", WINDOWS_TEXTS)
def test_auto_reads_short_windows_1252_texts_as_cp1252(tmp_path: Path, text: str) -> None:
    path = tmp_path / "memo.txt"
    path.write_bytes(text.encode("cp1252"))
    read = read_file(path, max_bytes=LIMIT, encoding="auto")
    assert (read.text, read.encoding) == (text, "cp1252")


@pytest.mark.parametrize("text,encoding", [
    ("Zażółć gęślą jaźń. Proszę zapłacić 20 zł do piątku – dziękuję.", "cp1250"),
    ("Мы получили ваше письмо и ответим в ближайшее время.", "cp1251"),
    ("Καλημέρα σας, το τιμολόγιο πληρώθηκε χθες.", "cp1253"),
])  # fmt: skip
def test_auto_still_reads_other_code_pages_when_the_evidence_is_strong(
    text: str, encoding: str
) -> None:
    assert decode(text.encode(encoding), "auto") == (text, encoding, False)


def test_a_bad_byte_after_a_utf8_byte_order_mark_is_named_at_its_offset_in_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfab\xffcd")
    with pytest.raises(InputError) as caught:
        read_file(path, max_bytes=LIMIT)
    assert caught.value.offset == 5 and "(0xff)" in caught.value.message


def test_utf16_without_a_byte_order_mark_is_recognised_by_auto() -> None:
    text = "Déjà vu: the same memo again, in UTF-16 from an old export."
    for codec in ("utf-16-le", "utf-16-be"):
        assert decode(text.encode(codec), "auto").text == text


def test_a_named_legacy_encoding_is_not_applied_to_utf8(tmp_path: Path) -> None:
    path = tmp_path / "utf8.txt"
    path.write_text("Le café coûte 3 € – “vraiment”.", encoding="utf-8")
    read = read_file(path, max_bytes=LIMIT, encoding="cp1252")
    assert (read.text, read.encoding) == ("Le café coûte 3 € – “vraiment”.", "utf-8")
    assert override_note("cp1252", "utf-8") is not None
    assert override_note("auto", "utf-8") is None and override_note("cp1252", "ascii") is None
    # UTF-16 named for a file of ASCII and zero bytes is applied as named
    (tmp_path / "wide.txt").write_bytes("plain words".encode("utf-16-le"))
    assert read_file(tmp_path / "wide.txt", max_bytes=LIMIT, encoding="utf-16-le").text == (
        "plain words")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


FOLDER = {
    "a-utf8.txt": ("utf-8", "Meeting notes: the café budget rises to 1 200 € – “approved”.\n"),
    "b-utf8.txt": ("utf-8", "Résumé of the contract: naïve clauses removed, Zürich office.\n"),
    "c-cp1252.txt": ("cp1252", "Le prix est de 12 € – “très” raisonnable, dit-il à l’équipe.\n"),
    "d-cp1252.txt": ("cp1252", "Für Müller: die Rechnung über 300 € ist fällig – bitte prüfen.\n"),
    "e-utf16.txt": ("utf-16", "Copie du mémo : « réunion » à 10 h, coût 40 € – merci.\n"),
    "f-ascii.txt": ("ascii", "Plain words only, in every encoding the same way.\n"),
}


def mixed_folder(root: Path) -> Path:
    root.mkdir()
    for name, (encoding, text) in FOLDER.items():
        (root / name).write_bytes(text.encode(encoding))  # utf-16: with a byte order mark
    return root


@pytest.mark.parametrize("asked", ["auto", "cp1252"])
def test_a_mixed_folder_loads_every_text_as_written_and_names_each_encoding(
    database: str, tmp_path: Path, asked: str
) -> None:
    root = mixed_folder(tmp_path / "folder")
    table = f"mixed_{asked}"
    loaded = run("load", str(root), "--dsn", database, "--table", table, "--create", "--quiet",
                 "--json", "--encoding", asked)
    summary = json.loads(loaded.stdout)
    assert summary["loaded"] == len(FOLDER) and summary["failed"] == 0
    assert summary["encodings"] == {
        str(root / name): encoding for name, (encoding, _) in FOLDER.items()}
    with psycopg.connect(database) as conn:
        stored = dict(conn.execute(f"SELECT key, body FROM {table}").fetchall())
    assert stored == {str(root / name): text for name, (_, text) in FOLDER.items()}
    warned = [line for line in loaded.stderr.splitlines() if line.startswith("warning:")]
    if asked == "cp1252":  # once for each UTF-8 file with characters outside ASCII
        assert sorted(warned) == [
            f"warning: {root / name}: valid UTF-8 with characters outside ASCII: read as"
            " UTF-8, not as --encoding cp1252" for name in ("a-utf8.txt", "b-utf8.txt")]
    else:
        assert warned == []
    checked = run("check", "--dsn", database, "--table", table, "--json", "--encoding", asked,
                  *(str(root / name) for name in FOLDER))
    entries = json.loads(checked.stdout)
    assert sorted(line for line in checked.stderr.splitlines() if "--encoding" in line) == (
        sorted(warned))  # the same files, named the same way
    assert {entry["file"]: entry["encoding"] for entry in entries} == {
        str(root / name): encoding for name, (encoding, _) in FOLDER.items()}
    assert all(entry["near_duplicates"] for entry in entries)  # each finds itself


CSV_ROWS = {"utf8.csv": ("utf-8", "Le café coûte 3 € – “vraiment”, dit René."),
            "windows.csv": ("cp1252", "Für Müller: die Rechnung über 300 € – „prüfen“."),
            "plain.csv": ("ascii", "Nothing but ASCII in this one, all the same.")}


@pytest.mark.parametrize("asked", ["auto", "cp1252"])
def test_csv_files_are_read_by_the_same_rules_and_named_with_their_encoding(
    database: str, tmp_path: Path, asked: str
) -> None:
    root = tmp_path / "records"
    root.mkdir()
    for name, (encoding, text) in CSV_ROWS.items():
        (root / name).write_bytes(f'id,text\n{name},"{text}"\n'.encode(encoding))
    table = f"csv_{asked}"
    loaded = run("load", str(root), "--dsn", database, "--table", table, "--create", "--quiet",
                 "--json", "--encoding", asked)
    summary = json.loads(loaded.stdout)
    assert summary["loaded"] == len(CSV_ROWS) and summary["failed"] == 0, loaded.output
    assert summary["encodings"] == {str(root / name): encoding
                                    for name, (encoding, _) in CSV_ROWS.items()}  # fmt: skip
    with psycopg.connect(database) as conn:
        stored = dict(conn.execute(f"SELECT key, body FROM {table}").fetchall())
    assert stored == {name: text for name, (_, text) in CSV_ROWS.items()}
    warned = [line for line in loaded.stderr.splitlines() if "--encoding" in line]
    assert warned == ([f"warning: {root / 'utf8.csv'}: valid UTF-8 with characters outside"
                       " ASCII: read as UTF-8, not as --encoding cp1252"]
                      if asked == "cp1252" else [])  # fmt: skip
