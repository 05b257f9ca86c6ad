"""E-mail loaded as a reviewer reads it: decoded bodies, headers as fields,
attachments and mbox messages as documents of their own, and a reply that
quotes its original found by containment."""

from __future__ import annotations

import io
import json
import mailbox
import sys
import uuid
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

import docx
import msgforge
import psycopg
import pytest
from click.testing import CliRunner, Result
from fpdf import FPDF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from nearsim.client.cli import cli
from nearsim.client.extract import REASONS, FileText, InputError
from nearsim.client.mail import mail_kind, sniff
from nearsim.client.reading import named_documents, read_named
from nearsim.client.sources import RecordInput, SourceOptions, iter_inputs

LIMIT = 1 << 20

ORIGINAL = (
    "Dear Bob, following our call I attach the revised supply contract for the north plant. "
    "The unit price stays at 12 € per crate for the first year and rises by two percent "
    "each year after that. Delivery is weekly on Mondays, and either side may end the "
    "agreement with ninety days of written notice. Penalties for late delivery are capped "
    "at five percent of the monthly invoice. Please let me know by Friday whether the legal "
    "team agrees with the new wording of the liability clause, so that we can sign next "
    "week as planned."
)
REPLY = "Alice, legal agrees with all of it. We sign on Tuesday. Bob"


OUTLOOK_SAVED = Path(__file__).resolve().parents[1] / "data" / "outlook" / "outer.msg"
"""A message saved by Outlook itself (tests/data/outlook/README.md says whose)."""


def message(sender: str, subject: str, body: str, cte: str, **headers: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = "Bob Martin <bob@example.com>"
    mail["Cc"] = "Legal <legal@example.com>"
    mail["Subject"] = subject
    mail["Date"] = "Mon, 06 Jan 2025 10:00:00 +0100"
    mail["Message-ID"] = f"<{abs(hash(subject))}@example.com>"
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(body, charset="utf-8", cte=cte)
    return mail


def original() -> EmailMessage:
    return message("Alice Durand <alice@example.com>", "Supply contract – revised",
                   ORIGINAL + "\n", "8bit")


def reply(cte: str) -> EmailMessage:
    quoted = "\n".join("> " + line for line in ORIGINAL.split(". "))
    return message("Bob Martin <bob@example.com>", "Re: Supply contract – revised",
                   f"{REPLY}\n\nOn Mon, 6 Jan 2025, Alice Durand wrote:\n{quoted}\n", cte,
                   In_Reply_To="<1@example.com>")


def word_file(text: str) -> bytes:
    document = docx.Document()
    for line in text.split(". "):
        document.add_paragraph(line)
    written = io.BytesIO()
    document.save(written)
    return written.getvalue()


def pdf_file(text: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 5, text.replace("€", "EUR"))
    return bytes(pdf.output())


def with_attachments(mail: EmailMessage) -> EmailMessage:
    mail.add_attachment(word_file(ORIGINAL), maintype="application",
                        subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
                        filename="contract.docx")  # fmt: skip
    mail.add_attachment(pdf_file(ORIGINAL), maintype="application", subtype="pdf",
                        filename="contract.pdf")  # fmt: skip
    mail.add_attachment(b"\x89PNG\r\n\x1a\n" + bytes(64), maintype="image", subtype="png",
                        filename="logo.png")  # an image: passed over  # fmt: skip
    mail.add_attachment("<html><body><p>Price list: 12 € per crate</p></body></html>",
                        subtype="html", filename="prices.html")  # fmt: skip
    mail.add_attachment("Notes on the contract: café, Zürich – “urgent”.".encode("cp1252"),
                        maintype="text", subtype="plain", filename="notes.txt")  # fmt: skip
    return mail


def read(item: RecordInput) -> RecordInput:
    """The input with its attachment read, as a worker of the loader reads it."""
    if item.attachment is None:
        return item
    text, _, encoding = item.attachment.read(LIMIT)
    return item._replace(text=text, encoding=encoding, attachment=None)


def text_of(name: str) -> str:
    read = read_named(name, max_bytes=LIMIT).read
    assert isinstance(read, FileText), read
    return read.text


def read_thread(path: Path, fields: tuple[str, ...]) -> dict[str, RecordInput]:
    """The documents of a mail file with its five attachments, read as the loader
    reads them (attachments come unread: its workers read them), by key; the
    body and the attachments that are text (the image is passed over)."""
    inputs = list(iter_inputs([str(path.parent)], SourceOptions(fields=fields)))
    assert all(isinstance(item, RecordInput) for item in inputs), inputs
    by_key = {item.key: read(item) for item in inputs if isinstance(item, RecordInput)}
    mail = str(path)
    assert list(by_key) == [mail, f"{mail}#1:contract.docx", f"{mail}#2:contract.pdf",
                            f"{mail}#4:prices.html",
                            f"{mail}#5:notes.txt"]  # fmt: skip
    body = by_key[mail]
    assert body.text.startswith(REPLY) and "> The unit price stays at 12 € per crate" in body.text
    assert by_key[f"{mail}#1:contract.docx"].text.split() == ORIGINAL.replace(". ", "\n").split()
    assert by_key[f"{mail}#1:contract.docx"].fields[-2:] == ("contract.docx", mail)
    assert by_key[f"{mail}#2:contract.pdf"].text.split() == ORIGINAL.replace("€", "EUR").split()
    assert by_key[f"{mail}#4:prices.html"].text == "Price list: 12 € per crate"
    notes = by_key[f"{mail}#5:notes.txt"]
    assert (notes.text, notes.encoding) == ("Notes on the contract: café, Zürich – “urgent”.",
                                            "cp1252")  # fmt: skip
    return by_key


def test_an_eml_is_its_decoded_body_and_its_attachments_with_their_headers(
    tmp_path: Path,
) -> None:
    (tmp_path / "thread.eml").write_bytes(bytes(with_attachments(reply("base64"))))
    fields = ("from", "to", "cc", "date", "subject", "message_id", "in_reply_to",
              "attachment", "message")  # fmt: skip
    eml = str(tmp_path / "thread.eml")
    body = read_thread(tmp_path / "thread.eml", fields)[eml]
    assert "Content-Transfer-Encoding" not in body.text and "base64" not in body.text
    assert body.fields == (
        "Bob Martin <bob@example.com>", "Bob Martin <bob@example.com>",
        "Legal <legal@example.com>", "2025-01-06T10:00:00+01:00",
        "Re: Supply contract – revised", body.fields[5], "<1@example.com>", None, None)


def test_quoted_printable_and_html_only_bodies_are_decoded(tmp_path: Path) -> None:
    (tmp_path / "qp.eml").write_bytes(bytes(reply("quoted-printable")))
    html = message("a@example.com", "html only", "x", "8bit")
    page = f"<html><body><p>{ORIGINAL}</p><script>x()</script></body></html>"
    html.set_content(page.encode("cp1252"), maintype="text", subtype="html",
                     cte="quoted-printable")  # the euro sign as 0x80, as Windows mailers do
    html.set_param("charset", "iso-8859-1")
    (tmp_path / "html.eml").write_bytes(bytes(html))
    assert "=E2=82=AC" in (tmp_path / "qp.eml").read_text()  # the euro sign, encoded
    assert "12 € per crate" in text_of(str(tmp_path / "qp.eml"))
    read = read_named(str(tmp_path / "html.eml"), max_bytes=LIMIT).read
    assert isinstance(read, FileText)
    assert read.text == ORIGINAL and read.encoding == "cp1252"  # iso-8859-1 read as mail does


def test_an_mbox_is_one_document_per_message(tmp_path: Path) -> None:
    box = mailbox.mbox(str(tmp_path / "archive.mbox"))
    box.add(original())
    box.add(with_attachments(reply("quoted-printable")))
    box.flush()
    box.close()
    inputs = list(iter_inputs([str(tmp_path)]))
    mbox = str(tmp_path / "archive.mbox")
    assert [item.key for item in inputs if isinstance(item, RecordInput)] == [
        f"{mbox}#1", f"{mbox}#2", f"{mbox}#2#1:contract.docx", f"{mbox}#2#2:contract.pdf",
        f"{mbox}#2#4:prices.html",
        f"{mbox}#2#5:notes.txt"]
    assert inputs[0].text.strip() == ORIGINAL  # type: ignore[union-attr]
    names = [named.name for named in named_documents(mbox, max_bytes=LIMIT)]
    assert names == [item.key for item in inputs]
    assert text_of(f"{mbox}#2#4:prices.html") == "Price list: 12 € per crate"


def test_mail_is_recognised_by_content_without_a_suffix(tmp_path: Path) -> None:
    (tmp_path / "1700000000.M1P2.host").write_bytes(bytes(original()))  # Maildir's new/
    (tmp_path / "1700000000.M3P4.host:2,S").write_bytes(bytes(original()))  # Maildir's cur/
    (tmp_path / "message").write_bytes(bytes(original()))
    (tmp_path / "notes").write_text("From the start: a note, not mail.\nSubject: none\n")
    (tmp_path / "memo.txt").write_bytes(bytes(original()))  # a .txt stays a text file
    assert sniff(b"From alice@example.com Mon Jan  6 10:00:00 2025\nFrom: a\nTo: b\n\nx") == (
        "mbox")
    assert mail_kind(str(tmp_path / "message")) == "eml"
    assert mail_kind(str(tmp_path / "1700000000.M1P2.host")) == "eml"
    assert mail_kind(str(tmp_path / "1700000000.M3P4.host:2,S")) == "eml"
    assert mail_kind(str(tmp_path / "notes")) is None
    assert mail_kind(str(tmp_path / "memo.txt")) is None
    texts = {Path(item.key).name: item for item in iter_inputs([str(tmp_path)])}
    assert isinstance(texts["message"], RecordInput)
    assert texts["message"].text.strip() == ORIGINAL


def test_broken_mail_and_parts_are_failures_that_name_them(tmp_path: Path) -> None:
    mail = original()
    mail.add_attachment(b"%PDF-1.4 not really", maintype="application", subtype="pdf",
                        filename="scan.pdf")  # fmt: skip
    (tmp_path / "a.eml").write_bytes(bytes(mail))
    (tmp_path / "b.msg").write_bytes(b"not an Outlook file at all")
    (tmp_path / "c.mbox").write_bytes(b"no messages in here\n")
    (tmp_path / "d.eml").write_bytes(b"")
    failures = {named.name: named.read.reason
                for path in sorted(tmp_path.iterdir())
                for named in named_documents(str(path), max_bytes=LIMIT)
                if isinstance(named.read, InputError)}  # fmt: skip
    assert failures == {f"{tmp_path}/a.eml#1:scan.pdf": "corrupt-pdf",
                        f"{tmp_path}/b.msg": "corrupt-mail", f"{tmp_path}/c.mbox": "corrupt-mail",
                        f"{tmp_path}/d.eml": "empty"}  # fmt: skip
    with pytest.raises(InputError, match="has no part"):
        read_named(f"{tmp_path}/a.eml#7:nothing.pdf", max_bytes=LIMIT)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("cte", ["quoted-printable", "base64"])
def test_a_reply_quoting_its_original_is_found_by_containment(
    database: str, tmp_path: Path, cte: str
) -> None:
    root = tmp_path / "mail"
    root.mkdir()
    (root / "original.eml").write_bytes(bytes(original()))
    (root / "reply.eml").write_bytes(bytes(reply(cte)))
    assert "12 € per crate" not in (root / "reply.eml").read_text()  # encoded on disk
    table = f"mail_{cte.replace('-', '_')}"
    loaded = run("load", str(root), "--dsn", database, "--table", table, "--create", "--quiet",
                 "--json")
    summary = json.loads(loaded.stdout)
    assert summary["loaded"] == 2, loaded.output
    assert summary["encodings"] == {str(root / "original.eml"): "utf-8",
                                    str(root / "reply.eml"): "utf-8"}  # fmt: skip
    found = run("pairs", "--dsn", database, "--table", table, "--measure", "containment",
                "-s", "0.9", "--json")
    pairs = json.loads(found.stdout)
    assert [sorted((pair["a"], pair["b"])) for pair in pairs] == [
        [str(root / "original.eml"), str(root / "reply.eml")]]
    checked = run("check", "--dsn", database, "--table", table, "--measure", "containment",
                  "-s", "0.9", "--json", str(root / "original.eml"))
    [entry] = json.loads(checked.stdout)
    assert {match["key"] for match in entry["near_duplicates"]} >= {str(root / "reply.eml")}


def test_headers_reach_the_columns_of_a_table_of_your_own(database: str, tmp_path: Path) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE review (key text PRIMARY KEY, body text, sender text,"
                     " sent timestamptz, subject text, headers jsonb, attached_to text)")
        conn.execute("SELECT nearsim_enable('review', 'body')")
    (tmp_path / "thread.eml").write_bytes(bytes(with_attachments(reply("base64"))))
    loaded = run("load", str(tmp_path), "--dsn", database, "--table", "review", "--quiet",
                 "--column", "from=sender", "--column", "date=sent", "--column",
                 "subject=subject", "--column", "headers=headers", "--column",
                 "message=attached_to")  # fmt: skip
    assert loaded.exit_code == 0, loaded.output
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT key, sender, sent = '2025-01-06 09:00:00+00', subject,"
                            " headers->>'Cc', attached_to FROM review ORDER BY key").fetchall()
    eml = str(tmp_path / "thread.eml")
    assert rows[0] == (eml, "Bob Martin <bob@example.com>", True, "Re: Supply contract – revised",
                       "Legal <legal@example.com>", None)
    assert [row[0] for row in rows[1:]] == [f"{eml}#1:contract.docx", f"{eml}#2:contract.pdf",
                                            f"{eml}#4:prices.html",
                                            f"{eml}#5:notes.txt"]  # fmt: skip
    assert all(row[1:] == (*rows[0][1:5], eml) for row in rows[1:])


def test_headers_are_kept_in_the_fields_of_the_loaders_own_table(
    database: str, tmp_path: Path
) -> None:
    (tmp_path / "thread.eml").write_bytes(bytes(with_attachments(reply("base64"))))
    table = f"mail_{uuid.uuid4().hex[:8]}"
    loaded = run("load", str(tmp_path), "--dsn", database, "--table", table, "--create",
                 "--quiet")
    assert loaded.exit_code == 0, loaded.output
    eml = str(tmp_path / "thread.eml")
    with psycopg.connect(database) as conn:
        rows = dict(conn.execute(sql.SQL("SELECT key, fields FROM {}").format(
            sql.Identifier(table))).fetchall())
    assert rows[eml]["from"] == "Bob Martin <bob@example.com>"
    assert rows[eml]["subject"] == "Re: Supply contract – revised"
    assert rows[eml]["date"] == "2025-01-06T10:00:00+01:00"
    assert rows[eml]["headers"]["Cc"] == "Legal <legal@example.com>"
    attachment = rows[f"{eml}#1:contract.docx"]
    assert (attachment["attachment"], attachment["message"]) == ("contract.docx", eml)
    assert attachment["subject"] == rows[eml]["subject"]


def outlook(sender: tuple[str, str], subject: str, body: str, attachments: bool) -> bytes:
    """An Outlook message as Outlook saves one (MS-OXMSG in a compound file)."""
    mail = msgforge.Message(subject=subject, text_body=body, sender=sender,
                            to=[("bob@example.com", "Bob Martin")],
                            cc=[("legal@example.com", "Legal")],
                            sent=datetime(2025, 1, 6, 9, 0, tzinfo=UTC))  # fmt: skip
    if attachments:
        mail.attach_bytes("contract.docx", word_file(ORIGINAL))
        mail.attach_bytes("contract.pdf", pdf_file(ORIGINAL))
        mail.attach_bytes("logo.png", b"\x89PNG\r\n\x1a\n" + bytes(64))  # an image: passed over
        mail.attach_bytes("prices.html",
                          "<html><body><p>Price list: 12 € per crate</p></body></html>".encode())
        mail.attach_bytes("notes.txt",
                          "Notes on the contract: café, Zürich – “urgent”.".encode("cp1252"))
    return mail.as_bytes()


def outlook_reply(attachments: bool = False) -> bytes:
    quoted = "\n".join("> " + line for line in ORIGINAL.split(". "))
    return outlook(("bob@example.com", "Bob Martin"), "Re: Supply contract – revised",
                   f"{REPLY}\n\nOn Mon, 6 Jan 2025, Alice Durand wrote:\n{quoted}\n", attachments)


def test_an_outlook_msg_is_its_body_and_its_attachments_with_their_headers(
    tmp_path: Path,
) -> None:
    (tmp_path / "thread.msg").write_bytes(outlook_reply(attachments=True))
    stored = (tmp_path / "thread.msg").read_bytes()
    assert "stays at 12 € per".encode("utf-16-le") in stored  # Outlook's texts are UTF-16
    assert "stays at 12 € per".encode() not in stored
    fields = ("from", "to", "cc", "date", "subject", "attachment", "message")
    msg = str(tmp_path / "thread.msg")
    by_key = read_thread(tmp_path / "thread.msg", fields)
    body = by_key[msg]
    assert (body.encoding, body.fields[4], body.fields[5:]) == (
        "utf-16", "Re: Supply contract – revised", (None, None))
    assert "bob@example.com" in body.fields[0] and "Bob Martin" in body.fields[1]
    assert "legal@example.com" in body.fields[2]
    assert body.fields[3] == "2025-01-06T09:00:00+00:00"
    assert by_key[f"{msg}#1:contract.docx"].fields[4] == body.fields[4]
    names = [named.name for named in named_documents(msg, max_bytes=LIMIT)]
    assert names == list(by_key)
    assert text_of(f"{msg}#4:prices.html") == "Price list: 12 € per crate"


def test_a_message_saved_by_outlook_itself_is_read_with_the_message_attached_to_it(
    tmp_path: Path,
) -> None:  # fmt: skip
    """tests/data/outlook/outer.msg, saved by Outlook (not made by a library): its body
    and the message attached to it, each with its own headers."""
    saved = tmp_path / "outer.msg"
    saved.write_bytes(OUTLOOK_SAVED.read_bytes())
    fields = ("to", "subject", "attachment", "message")
    inputs = list(iter_inputs([str(tmp_path)], SourceOptions(fields=fields)))
    by_key = {item.key: read(item) for item in inputs if isinstance(item, RecordInput)}
    outer = str(saved)
    assert list(by_key) == [outer, f"{outer}#1:attachment-1"]
    body, attached = by_key[outer], by_key[f"{outer}#1:attachment-1"]
    assert (body.text.strip(), body.encoding) == ("Outer body", "utf-16")
    assert body.fields == ("outer@foo.bar <outer@foo.bar>", "outer subject", None, None)
    assert attached.text.strip() == "body"
    assert attached.fields == ("test@foobar.com <test@foobar.com>", "test", "attachment-1",
                               outer)  # fmt: skip


def test_an_outlook_reply_quoting_an_eml_original_is_found_by_containment(
    database: str, tmp_path: Path
) -> None:
    (tmp_path / "original.eml").write_bytes(bytes(original()))
    (tmp_path / "reply.msg").write_bytes(outlook_reply())
    loaded = run("load", str(tmp_path), "--dsn", database, "--table", "outlook_thread",
                 "--create", "--quiet", "--json")
    summary = json.loads(loaded.stdout)
    assert (loaded.exit_code, summary["loaded"]) == (0, 2), loaded.output
    assert summary["encodings"][str(tmp_path / "reply.msg")] == "utf-16"
    found = run("pairs", "--dsn", database, "--table", "outlook_thread", "--measure",
                "containment", "-s", "0.9", "--json")
    assert [sorted((pair["a"], pair["b"])) for pair in json.loads(found.stdout)] == [
        [str(tmp_path / "original.eml"), str(tmp_path / "reply.msg")]]


def test_a_file_named_msg_that_is_not_outlook_mail_is_refused(tmp_path: Path) -> None:
    (tmp_path / "note.msg").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    [(name, read, _)] = named_documents(str(tmp_path / "note.msg"), max_bytes=LIMIT)
    assert isinstance(read, InputError), read
    assert (name, read.reason) == (str(tmp_path / "note.msg"), "corrupt-mail"), read.message
    (tmp_path / "cut.msg").write_bytes(outlook_reply(attachments=True)[:3000])
    [(name, read, _)] = named_documents(str(tmp_path / "cut.msg"), max_bytes=LIMIT)
    assert isinstance(read, InputError), read
    assert (name, read.reason) == (str(tmp_path / "cut.msg"), "corrupt-mail"), read.message
    assert "\n" not in read.message


def test_outlook_mail_without_extract_msg_is_a_failure_that_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "extract_msg", None)  # the msg extra not installed
    (tmp_path / "reply.msg").write_bytes(outlook_reply())
    [(name, read, _)] = named_documents(str(tmp_path / "reply.msg"), max_bytes=LIMIT)
    assert isinstance(read, InputError), read
    assert (name, read.reason) == (str(tmp_path / "reply.msg"), "needs-package")
    assert "pip install 'nearsim[msg]'" in read.message


def test_attachments_are_read_by_the_loader_and_a_bad_one_fails_alone(
    database: str, tmp_path: Path
) -> None:
    mail = with_attachments(original())
    mail.add_attachment(b"%PDF-1.4 cut short", maintype="application", subtype="pdf",
                        filename="scan.pdf")  # fmt: skip
    (tmp_path / "thread.eml").write_bytes(bytes(mail))
    eml = str(tmp_path / "thread.eml")
    first = run("load", str(tmp_path), "--dsn", database, "--table", "attached", "--create",
                "--quiet", "--json")
    assert first.exit_code == 1
    summary = json.loads(first.stdout)
    assert (summary["loaded"], summary["failed_by_reason"]) == (5, {"corrupt-pdf": 1})
    assert f"{eml}#6:scan.pdf: cannot parse the PDF" in first.stderr
    assert summary["encodings"] == {eml: "utf-8", f"{eml}#4:prices.html": "utf-8",
                                    f"{eml}#5:notes.txt": "cp1252"}  # fmt: skip
    with psycopg.connect(database) as conn:
        stored = dict(conn.execute("SELECT key, body FROM attached").fetchall())
    assert stored[f"{eml}#1:contract.docx"].split() == ORIGINAL.replace(". ", "\n").split()
    again = json.loads(run("load", str(tmp_path), "--dsn", database, "--table", "attached",
                           "--quiet", "--json").stdout)  # fmt: skip
    assert (again["loaded"], again["unchanged"], again["failed"]) == (0, 5, 1)


MAIL_HEADS = [b"", b"From: a@b.c\nTo: d@e.f\n", b"From x Mon Jan  6 2025\nFrom: a\n",
              b'Content-Type: multipart/mixed; boundary="b"\nFrom: a\n\n--b\n']


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(head=st.sampled_from(MAIL_HEADS), body=st.binary(max_size=2000),
       kind=st.sampled_from(["eml", "mbox"]))  # fmt: skip
def test_any_bytes_as_mail_give_documents_or_reasons(
    tmp_path: Path, head: bytes, body: bytes, kind: str
) -> None:
    path = tmp_path / f"fuzz.{kind}"
    path.write_bytes(head + body)
    for named in named_documents(str(path), max_bytes=LIMIT):
        if isinstance(named.read, InputError):
            assert named.read.reason in REASONS and named.read.message
        else:
            assert "\x00" not in named.read.text and named.read.text.strip()


def test_compare_reads_a_part_of_a_mail_named_by_its_key(tmp_path: Path) -> None:
    (tmp_path / "thread.eml").write_bytes(bytes(with_attachments(reply("base64"))))
    (tmp_path / "contract.docx").write_bytes(word_file(ORIGINAL))
    part = f"{tmp_path / 'thread.eml'}#1:contract.docx"
    compared = run("compare", part, str(tmp_path / "contract.docx"), "--json")
    assert compared.exit_code == 0, compared.output
    result = json.loads(compared.stdout)
    assert result["a"]["name"] == part and result["a"]["kind"] == "file"
    assert result["measures"]["s_r"] == 1.0 and result["near_duplicates"] is True
    quoted = json.loads(run("compare", str(tmp_path / "thread.eml"), part, "--json",
                            "--measure", "containment").stdout)  # fmt: skip
    assert quoted["a"]["encoding"] == "utf-8" and quoted["b"]["encoding"] == ""
