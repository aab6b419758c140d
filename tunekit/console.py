"""What the ``tunekit`` command prints: tables for people, JSON and CSV for scripts.

A command describes its output once, as rows (mappings of plain values, as the store gives
them) and the ``Column``s a table shows of them; ``emit`` writes them in the format asked for.
JSON holds every field of every row, JSON text (keys, configs) decoded into objects, and is
strict (RFC 8259): a value that is not finite, such as a budget without a seconds limit, is null.
CSV holds every field as text; a table the columns, each cut to its width unless ``wide``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

#: The output formats of the commands that list things (``--format``).
FORMATS = ("table", "json", "csv")
#: Fields the store holds as JSON text; JSON output gives them as objects.
JSON_FIELDS = ("key", "config", "winner", "budget", "costs")


@dataclass(frozen=True)
class Column:
    """One column of a table: its header, the text of a row's cell, and the width it is cut to
    (None: never cut)."""

    header: str
    text: Callable[[Mapping[str, Any]], object]
    width: int | None = None


def field(name: str, header: str | None = None, width: int | None = None, missing: str = "-") -> Column:
    """A column showing one field of the row as it is (``missing`` where it is None)."""
    return Column(header or name, lambda row: missing if row.get(name) is None else row[name], width)


def number(name: str, spec: str, header: str | None = None) -> Column:
    """A column showing a numeric field formatted with ``spec`` ("-" where it is None)."""
    return Column(header or name, lambda row: "-" if row.get(name) is None else format(row[name], spec))


def emit(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], fmt: str = "table", *, wide: bool = False,
         stream: TextIO | None = None) -> None:
    """Write ``rows`` to ``stream`` (stdout) as a table of ``columns``, JSON or CSV."""
    stream = stream or sys.stdout
    if fmt == "json":
        json.dump([finite(decoded(row)) for row in rows], stream, indent=2, default=str, allow_nan=False)
        stream.write("\n")
    elif fmt == "csv":
        names = list(dict.fromkeys(name for row in rows for name in row))
        writer = csv.DictWriter(stream, fieldnames=names, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    elif fmt == "table":
        cells = [[_cut(str(column.text(row)), None if wide else column.width) for column in columns] for row in rows]
        print_table(cells, [column.header for column in columns], stream)
    else:
        raise ValueError(f"unknown output format {fmt!r}; valid formats: {', '.join(FORMATS)}")


def decoded(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with its JSON text fields (``JSON_FIELDS``) as objects."""
    out = dict(row)
    for name in JSON_FIELDS:
        if isinstance(out.get(name), str):
            try:
                out[name] = json.loads(out[name])
            except json.JSONDecodeError:
                pass  # not JSON after all (a strategy's name, say): kept as text
    return out


def finite(value: Any, *, as_text: bool = False) -> Any:
    """``value`` with every float that is not finite (NaN, infinity) replaced by None, or by its
    text ("inf", "nan", which ``float()`` reads back) with ``as_text``, in lists and mappings too:
    what strict JSON can hold (Python writes ``Infinity``, which other JSON parsers refuse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value) if as_text else None
    if isinstance(value, Mapping):
        return {name: finite(item, as_text=as_text) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item, as_text=as_text) for item in value]
    return value


def _cut(text: str, width: int | None) -> str:
    text = text.splitlines()[0] if text else ""
    return text if width is None or len(text) <= width else text[: width - 3] + "..."


def print_table(rows: Sequence[Sequence[object]], header: Sequence[str], stream: TextIO | None = None) -> None:
    """Left-aligned columns, two spaces apart, header first."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip(), file=stream or sys.stdout)
