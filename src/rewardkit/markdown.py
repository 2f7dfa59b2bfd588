"""Markdown tables: every table a report or a generated doc page carries (the audit, the config reference, the
layers) is written by :func:`table`, so cells are escaped and numbers aligned alike.

>>> print("\\n".join(table(["reward", "mean"], [["a|b", 0.5], ["c", None]], right={1})))
| reward | mean |
| --- | ---: |
| a\\|b | 0.5 |
| c |  |
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], right: Collection[int] = ()) -> list[str]:
    """The lines of a table: the header, its rule (the columns numbered in ``right`` aligned right: numbers), one
    line a row; a cell is its text, ``|`` escaped, and None an empty cell."""
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    return [_line(header), "| " + " | ".join(rule) + " |", *(_line(row) for row in rows)]


def _line(cells: Sequence[Any]) -> str:
    return "| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in cells) + " |"
