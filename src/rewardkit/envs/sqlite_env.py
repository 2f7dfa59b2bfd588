"""A domain's database on SQLite, without writing the plumbing: declare the tables and their rows, get the rest.

A domain gives its schema (``CREATE TABLE`` statements) and its seed rows (table -> list of row objects, or a JSON
file of that shape); :class:`Tables` then gives every rollout what retail's hand-written database has:

- a template database built once per process (per seed file), and a private in-memory copy per rollout through
  SQLite's backup API;
- ``export()``: the state as JSON, table -> rows in insertion order;
- ``state_hash()``: sha256 of each table's rows as a sorted multiset of canonical JSON, so that equal states hash
  equal whatever order the writes came in; kept incrementally (triggers mark the rows a write touches, and only
  those are serialised again);
- through :class:`~rewardkit.envs.harness.ToolEnvironment`: schema-checked calls, a transaction per write, the
  audit and idempotency keys.

Tables must have rowids (no ``WITHOUT ROWID``). docs/domains.md writes a domain on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.harness import ToolEnvironment, ToolSpec

Rows = Mapping[str, Sequence[Mapping[str, Any]]]
DIRTY = "_rewardkit_dirty"


def connect() -> sqlite3.Connection:
    """An in-memory connection as the harness wants it: no implicit transactions, rows by name, foreign keys on."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


ROWID = "_rewardkit_rowid"  # selected beside a row's columns to find it again; never part of its state


def _canonical(row: sqlite3.Row) -> str:
    """A row's columns as compact JSON with sorted keys, without the rowid (which depends on insertion order)."""
    columns = dict(row)
    columns.pop(ROWID, None)
    return json.dumps(columns, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _insert(conn: sqlite3.Connection, table: str, rows: Sequence[Mapping[str, Any]], where: str) -> None:
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or not row:
            raise DomainDataError(f"{where}: {table}[{i}] must be an object of column values")
        names = ", ".join(f'"{k}"' for k in row)
        marks = ", ".join("?" for _ in row)
        try:
            conn.execute(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', tuple(row.values()))
        except (sqlite3.Error, TypeError) as exc:
            raise DomainDataError(f"{where}: {table}[{i}] cannot be stored ({exc})") from exc


class Tables:
    """One domain's schema and seed rows: templates, private copies, exports and state hashes."""

    def __init__(self, schema: str, seed: Callable[[], Rows] | Rows) -> None:
        self.schema = schema
        self._seed = seed if callable(seed) else (lambda: seed)
        self._lock = threading.Lock()

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one template per seed file, for the process's life
    def template(self, seed_file: str | None = None) -> tuple[sqlite3.Connection, dict[str, dict[int, str]]]:
        """The template database (the seed rows, or those of ``seed_file``) and each table's rows serialised."""
        where = seed_file or "the domain's seed"
        rows = self._seed() if seed_file is None else _read_seed(Path(seed_file))
        conn = connect()
        conn.executescript(self.schema)
        names = [r["name"] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        unknown = sorted(set(rows) - set(names))
        if unknown:
            raise DomainDataError(f"{where}: tables {unknown} are not in the schema (tables: {', '.join(names)})")
        conn.execute("BEGIN")
        for table, table_rows in rows.items():
            _insert(conn, table, table_rows, where)
        conn.execute("COMMIT")
        _track(conn, names)
        parts = {
            t: {r[ROWID]: _canonical(r) for r in conn.execute(f'SELECT rowid AS {ROWID}, * FROM "{t}"')} for t in names
        }
        return conn, parts

    def copy(self, seed_file: str | None = None) -> sqlite3.Connection:
        """A private in-memory copy of the template (SQLite's backup API: far cheaper than re-inserting)."""
        base, _ = self.template(seed_file)
        out = connect()
        with self._lock:
            base.backup(out)
        return out

    def tables(self, seed_file: str | None = None) -> list[str]:
        return list(self.template(seed_file)[1])

    def export(self, conn: sqlite3.Connection, seed_file: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Every declared table's rows, in insertion order."""
        return {
            t: [dict(r) for r in conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid')] for t in self.tables(seed_file)
        }

    def state_hash(self, conn: sqlite3.Connection, seed_file: str | None = None) -> str:
        """sha256 of each table's rows as a sorted list of canonical JSON (order-free), re-serialising only the rows
        the triggers marked as touched since the copy was made."""
        _, parts = self.template(seed_file)
        changed: dict[str, dict[int, str | None]] = {}
        for table, rowid in conn.execute(f"SELECT tbl, id FROM {DIRTY}"):
            found = conn.execute(f'SELECT rowid AS {ROWID}, * FROM "{table}" WHERE rowid = ?', (rowid,)).fetchone()
            changed.setdefault(table, {})[rowid] = None if found is None else _canonical(found)
        body = {}
        for table, rows in parts.items():
            merged = {**rows, **changed.get(table, {})}
            body[table] = sorted(text for text in merged.values() if text is not None)
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()


def _read_seed(path: Path) -> Rows:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DomainDataError(f"{path}: cannot be read as the domain's seed rows ({exc})") from exc
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise DomainDataError(f"{path}: must be a JSON object of table name -> list of rows")
    return data


def _track(conn: sqlite3.Connection, tables: Sequence[str]) -> None:
    """A table of touched rows, and triggers that fill it on every insert, update and delete."""
    statements = [f"CREATE TABLE {DIRTY} (tbl TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (tbl, id));"]
    for table in tables:
        for event, rows in (("INSERT", ("NEW",)), ("DELETE", ("OLD",)), ("UPDATE", ("OLD", "NEW"))):
            marks = " ".join(f"INSERT OR IGNORE INTO {DIRTY} VALUES ('{table}', {r}.rowid);" for r in rows)
            statements.append(
                f'CREATE TRIGGER "{DIRTY}_{table}_{event.lower()}" AFTER {event} ON "{table}" BEGIN {marks} END;'
            )
    conn.executescript("\n".join(statements))


def environment(tables: Tables, tools: Mapping[str, ToolSpec]) -> Callable[[str | Path | None], ToolEnvironment]:
    """``make_env`` for a :class:`~rewardkit.envs.Domain`: ``make_env(seed_file=None)`` is a fresh environment on
    a private copy of the template (of ``seed_file``'s rows when given, a JSON object of table -> rows)."""

    class TablesEnvironment(ToolEnvironment):
        def __init__(self, seed_file: str | Path | None = None) -> None:
            self._seed_file = str(seed_file) if seed_file is not None else None
            super().__init__(tables.copy(self._seed_file))

        def export(self) -> dict[str, Any]:
            with self.lock:
                return tables.export(self.conn, self._seed_file)

        def state_hash(self) -> str:
            with self.lock:
                return tables.state_hash(self.conn, self._seed_file)

    TablesEnvironment.tools = tools
    return TablesEnvironment
