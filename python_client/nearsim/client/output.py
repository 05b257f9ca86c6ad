"""Plain-text output shared by the command-line programs."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], align: str, indent: str = ""
) -> str:
    """Aligned text columns under a dashed rule; ``align`` has one "<" or ">" per column."""
    if len(align) != len(header):
        raise ValueError(f"align has {len(align)} columns, the header {len(header)}")
    cells = [list(header), *([str(value) for value in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    cells.insert(1, ["-" * width for width in widths])
    lines = []
    for row in cells:
        line = "  ".join(
            value.ljust(width) if side == "<" else value.rjust(width)
            for value, width, side in zip(row, widths, align, strict=True)
        )
        lines.append((indent + line).rstrip())
    return "\n".join(lines)


def one_line(error: BaseException) -> str:
    """An error message on a single line, for a command's last words."""
    return " ".join(str(error).split())


def storable(name: str) -> str:
    """``name`` as text that PostgreSQL, JSON and a terminal can hold.

    A file name that is not UTF-8 keeps its bytes: Python decodes each bad
    byte to a lone surrogate (``surrogateescape``), and here it becomes
    ``%XX`` (and a ``%`` of such a name ``%25``, so that the form is
    unambiguous).  A lone surrogate from a record becomes ``%uXXXX``.  Valid
    names stay as they are.

    >>> storable("caf\\udce9.txt")
    'caf%E9.txt'
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return name
    escaped = []
    for char in name:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            escaped.append(f"%{code - 0xDC00:02X}")
        elif 0xD800 <= code <= 0xDFFF:
            escaped.append(f"%u{code:04X}")
        else:
            escaped.append("%25" if char == "%" else char)
    return "".join(escaped)
