"""Plain-text tables for the command line."""

from __future__ import annotations

from collections.abc import Sequence


def print_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    """Left-aligned columns, two spaces apart, header first."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
