"""Markdown pipe tables in a document's text: each table's header and rows, cells as written, with where the table
stands among the text's lines. Pure: text in, tables out (claims.py decides which rows state measurements)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    first: int          # index of the header line among the text's lines
    last: int           # index of the last row line


def cells(line: str) -> list[str]:
    """The cells of one pipe-table line (an escaped ``\\|`` stays inside its cell)."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in _SPLIT.split(line)]


def _is_row(line: str) -> bool:
    return "|" in line and line.strip() != ""


def find(lines: list[str]) -> list[Table]:
    """Every table: a row line, then a separator line (``|---|:--:|``), then row lines until one that is not."""
    out, i = [], 0
    while i + 1 < len(lines):
        if _is_row(lines[i]) and _SEPARATOR.match(lines[i + 1]) and "-" in lines[i + 1]:
            header, j, rows = cells(lines[i]), i + 2, []
            while j < len(lines) and _is_row(lines[j]) and not _SEPARATOR.match(lines[j]):
                rows.append(cells(lines[j]))
                j += 1
            out.append(Table(header, rows, i, j - 1))
            i = j
        else:
            i += 1
    return out
