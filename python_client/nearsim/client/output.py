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
