"""Which inputs a load sees: walking, filtering, records, and what is reported."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from nearsim.client.sources import (
    Failure,
    FileInput,
    Input,
    RecordInput,
    SourceOptions,
    iter_inputs,
)


def walk(*paths: Path | str, stdin: str | None = None, **options: object) -> list[Input]:
    return list(iter_inputs([str(p) for p in paths], SourceOptions(**options),  # type: ignore[arg-type]
                            io.StringIO(stdin) if stdin is not None else None))  # fmt: skip


def files(items: list[Input], root: Path) -> list[str]:
    return [os.path.relpath(i.path, root) for i in items if isinstance(i, FileInput)]


def failures(items: list[Input]) -> dict[str, str]:
    return {os.path.basename(i.source): i.reason for i in items if isinstance(i, Failure)}


def tree(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"text of {name}")
    return root


def test_walk_is_sorted_recursive_and_skips_hidden(tmp_path: Path) -> None:
    root = tree(tmp_path, ["b.txt", "a/z.txt", "a/b/c.md", ".git/config", "a/.secret.txt"])
    assert files(walk(root), root) == ["a/b/c.md", "a/z.txt", "b.txt"]
    assert files(walk(root, hidden=True), root) == [
        ".git/config", "a/.secret.txt", "a/b/c.md", "a/z.txt", "b.txt"]
    item = walk(root / "b.txt")[0]
    assert item == FileInput(str(root / "b.txt"), str(root / "b.txt"), len("text of b.txt"))


def test_include_and_exclude(tmp_path: Path) -> None:
    root = tree(tmp_path, ["a.txt", "b.md", "drafts/c.txt", "keep/drafts.txt", "x/y/z.txt"])
    assert files(walk(root, include=("*.txt",)), root) == [
        "a.txt", "drafts/c.txt", "keep/drafts.txt", "x/y/z.txt"]
    assert files(walk(root, exclude=("drafts",)), root) == [
        "a.txt", "b.md", "keep/drafts.txt", "x/y/z.txt"]
    assert files(walk(root, include=("x/*/*.txt", "b.*")), root) == ["b.md", "x/y/z.txt"]
    # A file named explicitly is read whatever the filters say.
    assert files(walk(root / "b.md", include=("*.txt",)), root) == ["b.md"]


def test_relative_paths_become_absolute_keys_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path, ["d/a.txt"])
    monkeypatch.chdir(root)
    items = walk("d", "d/a.txt", "./d/../d/a.txt")
    assert items == [FileInput(str(root / "d" / "a.txt"), str(root / "d" / "a.txt"), 15)]


def test_symbolic_links(tmp_path: Path) -> None:
    root = tree(tmp_path / "root", ["real/a.txt"])
    (root / "alias").symlink_to(root / "real")  # the same directory twice: walked once
    (root / "real" / "up").symlink_to(root)  # back to an enclosing directory
    (root / "self").symlink_to(root / "self")
    (root / "gone").symlink_to(root / "missing")
    (root / "link.txt").symlink_to(root / "real" / "a.txt")  # a file: its own key
    items = walk(root)
    assert files(items, root) == ["alias/a.txt", "link.txt"]
    assert failures(items) == {"up": "symlink-loop", "self": "symlink-loop", "gone": "not-found"}


def test_special_and_missing_paths(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    items = walk(tmp_path, tmp_path / "nope.txt")
    assert failures(items) == {"fifo": "not-a-file", "nope.txt": "not-found"}


def test_paths_from_stdin(tmp_path: Path) -> None:
    root = tree(tmp_path, ["a.txt", "dir/b.txt", "dir/c.txt"])
    items = walk("-", stdin=f"{root / 'a.txt'}\n\n{root / 'dir'}\r\n{root / 'a.txt'}\n")
    assert files(items, root) == ["a.txt", "dir/b.txt", "dir/c.txt"]


def test_json_lines_records(tmp_path: Path) -> None:
    path = tmp_path / "crawl.jsonl"
    lines = [
        "\ufeff" + json.dumps({"id": "doc-1", "text": "first"}),
        json.dumps({"text": "no id: keyed by place"}),
        "",
        json.dumps({"id": 42, "text": "numeric id"}),
        json.dumps({"id": "x", "body": "wrong field"}),
        json.dumps({"id": "y", "text": 17}),
        json.dumps(["not", "an", "object"]),
        '{"id": "z", "text": "cut',
        json.dumps({"id": {"nested": 1}, "text": "object id"}),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"id": "bad", "text": "\xff"}\n')
    items = walk(path)
    records = [i for i in items if isinstance(i, RecordInput)]
    assert records == [
        RecordInput("doc-1", f"{path}:1", "first", kept='{"id": "doc-1"}'),
        RecordInput(f"{path}:2", f"{path}:2", "no id: keyed by place"),
        RecordInput("42", f"{path}:4", "numeric id", kept='{"id": 42}'),  # typed
    ]
    reported = {i.source: (i.reason, i.message) for i in items if isinstance(i, Failure)}
    assert {source: reason for source, (reason, _) in reported.items()} == {
        f"{path}:5": "invalid-record", f"{path}:6": "invalid-record",
        f"{path}:7": "invalid-record", f"{path}:8": "invalid-record",
        f"{path}:9": "invalid-record", f"{path}:10": "invalid-encoding"}
    assert "no text field 'text'" in reported[f"{path}:5"][1]
    assert "not valid JSON" in reported[f"{path}:8"][1]
    # Other field names, and the same file read as plain text.
    custom = walk(path, id_field="id", text_field="body")
    assert [r.key for r in custom if isinstance(r, RecordInput)] == ["x"]
    assert walk(path, records="none") == [FileInput(str(path), str(path), path.stat().st_size)]


def test_csv_and_tsv_records(tmp_path: Path) -> None:
    csv_path = tmp_path / "sheet.csv"
    csv_path.write_bytes(b"\xef\xbb\xbfid,text\r\na,\"two\r\nlines\"\r\nb,plain\r\nc\r\n,no id\r\n")
    items = walk(csv_path)
    assert [i for i in items if isinstance(i, RecordInput)] == [
        RecordInput("a", f"{csv_path}:2", "two\r\nlines", kept='{"id": "a"}'),
        RecordInput("b", f"{csv_path}:4", "plain", kept='{"id": "b"}'),
        RecordInput(f"{csv_path}:6", f"{csv_path}:6", "no id",
                    kept='{"id": ""}'),
    ]
    assert failures(items) == {"sheet.csv:5": "invalid-record"}

    tsv_path = tmp_path / "sheet.tsv"
    tsv_path.write_text("key\tbody\nk1\tsome, text\n")
    assert walk(tsv_path, id_field="key", text_field="body") == [
        RecordInput("k1", f"{tsv_path}:2", "some, text", kept='{"key": "k1"}')]
    missing = walk(tsv_path)
    assert failures(missing) == {"sheet.tsv": "invalid-record"}
    assert "no column 'text'" in missing[0].message  # type: ignore[union-attr]

    latin = tmp_path / "latin.csv"
    latin.write_bytes("id,text\n1,Café\n".encode("latin-1"))
    assert failures(walk(latin)) == {"latin.csv:2": "invalid-encoding"}
    assert walk(latin, encoding="latin-1") == [
        RecordInput("1", f"{latin}:2", "Café", kept='{"id": "1"}')]


def test_records_format_can_be_forced(tmp_path: Path) -> None:
    path = tmp_path / "export.txt"
    path.write_text(json.dumps({"id": 1, "text": "t"}) + "\n")
    assert walk(path, records="jsonl") == [RecordInput("1", f"{path}:1", "t", kept='{"id": 1}')]
    assert walk(path) == [FileInput(str(path), str(path), path.stat().st_size)]
