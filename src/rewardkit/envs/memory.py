"""A simulated domain's memory: a small synthetic database that fits the domain's schema, in a real SQLite copy.

In MUA-RL's B1 cold start a domain is only a schema, tools and a policy; for each task an LLM writes a small database
that fits the schema (the memory), and a tool LLM answers every call from it. rewardkit keeps the memory in SQLite, so
the schema's own constraints check it (types as declared, ``NOT NULL``, ``CHECK``, primary and foreign keys) and the
writes a simulated tool reports are applied to it: a later read sees them.

- :func:`open_memory`: the memory of a task (table -> rows) as a fresh connection, or :class:`MemorySchemaError`
  naming the table and row that does not fit;
- :func:`apply_writes`: the writes a simulated call reports, each ``{"op", "table", "key", "values"}``, applied in
  order to the domain's own tables (never to any other table the connection holds, the harness's record included);
  :class:`MemorySchemaError` names the write that cannot be (an unknown table or column, a key that matches no row, a
  constraint), and the caller's transaction is left for it to roll back.

Every value a model sends is checked before SQLite sees it (:func:`unstorable`): a list, an object, an integer past 64
bits, a non-finite number or a string with a lone surrogate is a :class:`MemorySchemaError`, refused and asked again,
never an exception of sqlite3's.

>>> conn = open_memory("CREATE TABLE books (id TEXT PRIMARY KEY, copies INTEGER NOT NULL CHECK (copies >= 0));",
...                    {"books": [{"id": "b1", "copies": 2}]})
>>> apply_writes(conn, [{"op": "update", "table": "books", "key": {"id": "b1"}, "values": {"copies": 1}}], ["books"])
>>> conn.execute("SELECT copies FROM books").fetchone()[0]
1
>>> apply_writes(conn, [{"op": "update", "table": "books", "key": {"id": "b9"}, "values": {"copies": 1}}], ["books"])
Traceback (most recent call last):
...
rewardkit.envs.memory.MemorySchemaError: writes[0]: update books: no row has id = 'b9'
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.harness import SQLITE_INTEGERS
from rewardkit.envs.schemas import unencodable
from rewardkit.envs.sqlite_env import connect, load_schema
from rewardkit.errors import UserError

OPS = ("insert", "update", "delete", "upsert")  # upsert: insert, or replace the row with the same key
WRITE_SCHEMA: dict[str, Any] = {  # one reported write, as the tool LLM is told to give it
    "type": "object",
    "properties": {
        "op": {"enum": list(OPS)},
        "table": {"type": "string"},
        "key": {"type": "object"},
        "values": {"type": "object"},
    },
    "required": ["op", "table"],
    "additionalProperties": False,
}


class MemorySchemaError(UserError, ValueError):
    """A memory or a write that does not fit the domain's schema; the message names the table, row or write."""


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def tables(conn: sqlite3.Connection) -> list[str]:
    found = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")
    return [r[0] for r in found]


def unstorable(value: Any) -> str | None:
    """Why ``value`` (what JSON decodes to) is no column value SQLite holds as it is, or None: a column value is null,
    a boolean, an integer of 64 bits, a finite number or a string of valid Unicode."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if value in SQLITE_INTEGERS else "an integer past 64 bits (-2**63 to 2**63 - 1)"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    if isinstance(value, str):
        return f"{ascii(value)[:80]} holds a lone surrogate, which is not Unicode text" if unencodable(value) else None
    kind = "list" if isinstance(value, list) else "JSON object" if isinstance(value, Mapping) else type(value).__name__
    return f"a {kind} is not a column value (a string, a number, a boolean or null)"


def _said(text: str) -> str:
    """``text`` as a message may carry it: a lone surrogate (a table name a model made up) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _values(conn: sqlite3.Connection, table: str, row: Mapping[str, Any], at: str) -> tuple[Any, ...]:
    """``row``'s values, once its columns are the table's and each value is one SQLite holds."""
    known = columns(conn, table)
    unknown = sorted(set(row) - set(known))
    if unknown:
        raise MemorySchemaError(f"{at}: columns {unknown} are not in table {table} (columns: {', '.join(known)})")
    for column, value in row.items():
        problem = unstorable(value)
        if problem is not None:
            raise MemorySchemaError(f"{at}: {column}: {problem}")
    return tuple(row.values())


def open_memory(schema: str, rows: Any) -> sqlite3.Connection:
    """A fresh in-memory database of ``schema`` holding ``rows`` (table -> list of row objects), every constraint
    checked, foreign keys once all rows are in (so rows may come in any order)."""
    conn = connect()
    load_schema(conn, schema)
    if not isinstance(rows, Mapping) or not all(isinstance(v, list) for v in rows.values()):
        raise MemorySchemaError("the memory must be a JSON object of table name -> list of rows")
    known = tables(conn)
    unknown = sorted(set(rows) - set(known))
    if unknown:
        raise MemorySchemaError(f"tables {unknown} are not in the schema (tables: {', '.join(known)})")
    conn.execute("BEGIN")
    conn.execute("PRAGMA defer_foreign_keys = ON")
    try:
        for table, table_rows in rows.items():
            for i, row in enumerate(table_rows):
                _insert(conn, table, row, f"{table}[{i}]", "INSERT")
        conn.execute("COMMIT")
    except sqlite3.IntegrityError as exc:  # a deferred foreign key fails the commit
        conn.execute("ROLLBACK")
        raise MemorySchemaError(f"a row refers to a row that is not there ({exc})") from None
    except MemorySchemaError:
        conn.execute("ROLLBACK")
        raise
    return conn


def _insert(conn: sqlite3.Connection, table: str, row: Any, at: str, verb: str) -> None:
    if not isinstance(row, Mapping) or not row:
        raise MemorySchemaError(f"{at}: must be an object of column values")
    values = _values(conn, table, row, at)
    names = ", ".join(f'"{k}"' for k in row)
    try:
        conn.execute(f'{verb} INTO "{table}" ({names}) VALUES ({", ".join("?" for _ in row)})', values)
    except sqlite3.Error as exc:  # a constraint: a key taken, a NOT NULL, a CHECK
        raise MemorySchemaError(f"{at}: cannot be stored ({exc})") from None


def _where(conn: sqlite3.Connection, table: str, key: Any, at: str) -> tuple[str, tuple[Any, ...]]:
    if not isinstance(key, Mapping) or not key:
        raise MemorySchemaError(f"{at}: 'key' must name the row, as an object of column values")
    args = _values(conn, table, key, f"{at}: key")
    where = " AND ".join(f'"{k}" = ?' for k in key)
    found = conn.execute(f'SELECT count(*) FROM "{table}" WHERE {where}', args).fetchone()[0]
    if found == 0:
        said = " AND ".join(f"{k} = {v!r}" for k, v in key.items())
        raise MemorySchemaError(f"{at}: no row has {said}")
    return where, args


def apply_write(conn: sqlite3.Connection, write: Any, at: str, names: Sequence[str]) -> None:
    """One write to one of the domain's tables ``names``: ``insert``/``upsert`` ``values`` into ``table``; ``update``
    the row ``key`` names with ``values``; ``delete`` it. A table the connection holds besides (the harness's, or one
    a schema made behind the domain's back) is no table a simulated tool can write."""
    if not isinstance(write, Mapping) or write.get("op") not in OPS or not isinstance(write.get("table"), str):
        raise MemorySchemaError(f"{at}: must be an object with an op ({', '.join(OPS)}) and a table")
    op, table = write["op"], write["table"]
    at = f"{at}: {op} {_said(table)}"
    if table not in names:
        raise MemorySchemaError(f"{at}: no such table (tables: {', '.join(names)})")
    values = write.get("values")
    if op in ("insert", "upsert", "update") and (not isinstance(values, Mapping) or not values):
        raise MemorySchemaError(f"{at}: 'values' must be an object of column values")
    if op in ("insert", "upsert"):
        _insert(conn, table, values, at, "INSERT" if op == "insert" else "INSERT OR REPLACE")
        return
    where, args = _where(conn, table, write.get("key"), at)
    sets = ", ".join(f'"{k}" = ?' for k in values) if op == "update" else ""  # type: ignore[union-attr]
    statement = f'DELETE FROM "{table}"' if op == "delete" else f'UPDATE "{table}" SET {sets}'
    new = _values(conn, table, values, at) if op == "update" else ()  # type: ignore[arg-type]
    try:
        conn.execute(f"{statement} WHERE {where}", (*new, *args))
    except sqlite3.Error as exc:  # a constraint
        raise MemorySchemaError(f"{at}: cannot be applied ({exc})") from None


def apply_writes(conn: sqlite3.Connection, writes: Sequence[Any], names: Sequence[str]) -> None:
    """Every write in order, each to one of the domain's tables ``names`` (the caller's transaction holds them all,
    or none)."""
    for i, write in enumerate(writes):
        apply_write(conn, write, f"writes[{i}]", names)
