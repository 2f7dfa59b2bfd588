"""A domain's database on SQLite, without writing the plumbing: declare the tables and their rows, get the rest.

A domain gives its schema (``CREATE TABLE`` statements) and its seed: table -> list of row objects, a function
returning them, or the path of a file that ``read_seed`` turns into them (by default a JSON object of that shape).
:class:`Tables` then gives every rollout:

- a template database built once per process (per seed file), and a private in-memory copy per rollout through
  SQLite's backup API (a deserialised copy is made in half the time, but every page it reads later goes through
  SQLite's memory VFS: replaying a task's gold cost 1.5-3 ms more);
- ``export()``: the state as JSON, by default table -> rows in insertion order;
- ``state_hash()``: sha256 of the state as canonical JSON (sorted keys, compact), so that equal states hash equal
  whatever order the writes came in; kept incrementally (triggers mark what a write touches, and only that is
  serialised again);
- through :class:`~rewardkit.envs.harness.ToolEnvironment`: schema-checked calls, a transaction per write, the
  audit and idempotency keys.

By default the hashed state is each table's rows as a multiset: sorted by their canonical JSON, without rowids. A
domain whose data has a nested format of its own (tau2's db.json) gives ``read_seed`` (that format -> rows) and a
:class:`Nested` (rows -> that format, entity by entity): its export is that format, and its hash that of the export
with null-valued keys dropped. Its own tables (``Nested.rows``, which no entity reads) are rows beside the
collections, exported as the hash reads them: a multiset of rows (equal whatever order their writes came in), without
null-valued keys, in the order of their canonical JSON.
Tables must have rowids (no ``WITHOUT ROWID``), and no name in a schema may start with ``_rewardkit_``
(:func:`load_schema`). docs/domains.md writes a domain on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.envs.harness import DATABASE_LOCK, ToolEnvironment, attach, pending_requests
from rewardkit.envs.schema_sql import DomainDataError, check_schema_sql
from rewardkit.envs.tool import ToolSpec

Rows = Mapping[str, Sequence[Mapping[str, Any]]]
RESERVED = "_rewardkit_"  # what the harness keeps beside a domain's tables, in ``main``: no schema may take it
DIRTY = f"{RESERVED}dirty"  # (kind, id) of every row or entity a write touched since the copy was made
ROWID = f"{RESERVED}rowid"  # selected beside a row's columns to find it again; never part of its state


def connect() -> sqlite3.Connection:
    """An in-memory connection as the harness wants it: no implicit transactions, rows by name, foreign keys on, and
    recursive triggers on (without them ``INSERT OR REPLACE`` deletes a row no trigger sees, and the incremental
    hash would keep the deleted row)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA recursive_triggers = ON")
    return conn


def load_schema(conn: sqlite3.Connection, schema: str) -> None:
    """Run a domain's ``schema`` (a Python domain's tables, a spec domain's memory) on ``conn``; a
    :class:`DomainDataError` when it holds anything but table and index definitions (:func:`check_schema_sql`, once
    per schema text) or takes a name the harness keeps: one starting with :data:`RESERVED` (the dirty marks and their
    triggers live beside the domain's tables)."""
    _checked(schema)
    conn.executescript(schema)
    taken = _reserved(conn)
    if taken is not None:
        raise DomainDataError(
            f"the schema's {taken} takes a name the harness keeps for itself (names starting with "
            f"{RESERVED}); rename it"
        )


@functools.lru_cache(maxsize=64)
def _checked(schema: str) -> None:
    check_schema_sql(schema, "the domain's schema")


def _reserved(conn: sqlite3.Connection) -> str | None:
    """The first object or column of ``conn``'s schema named with the reserved prefix (SQLite's names ignore case)."""
    found = conn.execute("SELECT type, name FROM sqlite_master UNION ALL SELECT type, name FROM sqlite_temp_master")
    for kind, name in found.fetchall():
        if name.lower().startswith(RESERVED):
            return f"{kind} {name!r}"
        columns = conn.execute("SELECT name FROM pragma_table_info(?)", (name,)) if kind == "table" else ()
        for (column,) in columns:
            if column.lower().startswith(RESERVED):
                return f"column {column!r} of table {name}"
    return None


def canonical(value: Any) -> str:
    """Compact JSON with sorted keys: the text a state is hashed as."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def drop_nulls(value: Any) -> Any:
    """``value`` with every null-valued key removed, recursively: a null and a missing key are the same state."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


@dataclass(frozen=True)
class Nested:
    """A state in a nested JSON format of the domain's own: collection -> key -> entity, an entity made of rows of
    one or more tables (a tau2 order: its row of ``orders`` and its rows of ``order_items``, ``payment_history``)."""

    owners: Mapping[str, tuple[str, str]]  # every table an entity reads -> (the collection, its entity's key column)
    entity: Callable[[sqlite3.Connection, str, str], Any]  # (collection, key) -> the entity's JSON; None when gone
    export: Callable[[sqlite3.Connection], dict[str, dict[str, Any]]]  # the whole state: collection -> key -> entity
    # The domain's own tables besides, which no entity reads: exported, hashed and diffed as rows of their own.
    rows: tuple[str, ...] = ()


class _Snapshot:
    """A state serialised unit by unit (a row, or a nested entity), with each kind's part of the hashed text."""

    def __init__(self, units: dict[str, dict[Any, str]], keyed: frozenset[str] = frozenset()) -> None:
        self.units = units
        self.keyed = keyed  # nested collections: an object, key -> entity; every other kind a list of rows, sorted
        self.bodies = {kind: self.body(kind, found) for kind, found in units.items()}  # unchanged kinds reuse these
        # Nested: each collection's "key":entity entries in key order, so that a few touched entities are put in
        # place instead of every key being sorted and serialised again.
        ordered = {kind: sorted(units[kind]) for kind in keyed}
        self.entries = {kind: [f"{canonical(k)}:{units[kind][k]}" for k in keys] for kind, keys in ordered.items()}
        self.places = {kind: {k: i for i, k in enumerate(keys)} for kind, keys in ordered.items()}
        self._unchanged: str | None = None  # digest({}), once asked for

    def body(self, kind: str, units: Mapping[Any, str | None]) -> str:
        if kind in self.keyed:
            return "{" + ",".join(f"{canonical(k)}:{t}" for k, t in sorted(units.items()) if t is not None) + "}"
        return "[" + ",".join(sorted(t for t in units.values() if t is not None)) + "]"

    def changed_body(self, kind: str, changed: Mapping[Any, str | None]) -> str:
        if kind not in self.keyed or not changed.keys() <= self.places[kind].keys():  # rows re-sorted, a new entity
            return self.body(kind, {**self.units[kind], **changed})
        entries: list[str | None] = list(self.entries[kind])
        for key, text in changed.items():
            entries[self.places[kind][key]] = None if text is None else f"{canonical(key)}:{text}"
        return "{" + ",".join(e for e in entries if e is not None) + "}"

    def digest(self, changed: Mapping[str, Mapping[Any, str | None]]) -> str:
        """sha256 of the whole state's canonical JSON, with the units in ``changed`` (None: gone) replaced."""
        if not changed:  # untouched, as many rollouts end: the snapshot's own hash, computed once
            if self._unchanged is None:
                self._unchanged = self._digest({})
            return self._unchanged
        return self._digest(changed)

    def _digest(self, changed: Mapping[str, Mapping[Any, str | None]]) -> str:
        parts = []
        for kind in sorted(self.units):
            body = self.changed_body(kind, changed[kind]) if kind in changed else self.bodies[kind]
            parts.append(f"{canonical(kind)}:{body}")
        return hashlib.sha256(("{" + ",".join(parts) + "}").encode("utf-8", "surrogatepass")).hexdigest()


def _row_text(row: sqlite3.Row, nulls: bool = True) -> str:
    """A row as the hash reads it: its columns, without the rowid (and, unless ``nulls``, the null ones: a nested
    domain's own tables, as its export writes them)."""
    columns = dict(row)
    columns.pop(ROWID, None)  # the rowid depends on insertion order, not on the state
    return canonical(columns if nulls else drop_nulls(columns))


def next_id(conn: sqlite3.Connection, table: str, column: str, prefix: str = "", width: int = 3) -> str:
    """The next id after the largest of ``column``'s with ``prefix`` (any other value ignored): ``C007`` -> ``C008``."""
    found = (str(r[0]) for r in conn.execute(f'SELECT "{column}" FROM "{table}"'))
    numbers = [int(i[len(prefix) :]) for i in found if i.startswith(prefix) and i[len(prefix) :].isdecimal()]
    return f"{prefix}{max(numbers, default=0) + 1:0{width}d}"


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


def read_rows(path: Path) -> Rows:
    """A seed file: a JSON object of table name -> list of rows."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DomainDataError(f"{path}: cannot be read as the domain's seed rows ({exc})") from exc
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise DomainDataError(f"{path}: must be a JSON object of table name -> list of rows")
    return data


class Tables:
    """One domain's schema and seed: templates, private copies, exports and state hashes."""

    def __init__(
        self,
        schema: str,
        seed: Rows | Callable[[], Rows] | Path,
        read_seed: Callable[[Path], Rows] = read_rows,
        nested: Nested | None = None,
    ) -> None:
        self.schema = schema
        self.seed = seed
        self.read_seed = read_seed
        self.nested = nested
        self._building = threading.Lock()

    @functools.cached_property
    def names(self) -> list[str]:
        """The schema's tables."""
        return list(self._primary_keys)

    @functools.cached_property
    def _primary_keys(self) -> dict[str, list[str]]:
        """The schema's tables, each with its primary key's columns in key order (none for a table without one)."""
        conn = connect()
        load_schema(conn, self.schema)
        found = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")
        out = {}
        for table in [r["name"] for r in found]:
            keyed = sorted((r["pk"], r["name"]) for r in conn.execute(f'PRAGMA table_info("{table}")') if r["pk"])
            out[table] = [name for _, name in keyed]
        return out

    @functools.cached_property
    def _owners(self) -> dict[str, tuple[str, str]]:
        """Table -> (the kind its rows are hashed under, the SQL of the unit a row belongs to)."""
        if self.nested is None:
            return {t: (t, "rowid") for t in self.names}
        missing = sorted(set(self.names) - set(self.nested.owners) - set(self.nested.rows))
        if missing:  # their writes would never reach the hash
            raise DomainDataError(
                f"Nested.owners: tables {missing} of the schema have no collection; list a table an entity reads in "
                "owners, and one of the domain's own in Nested.rows"
            )
        owned = {t: (kind, f'"{key}"') for t, (kind, key) in self.nested.owners.items()}
        clash = sorted(set(self.nested.rows) & ({kind for kind, _ in owned.values()} | set(owned)))
        if clash:  # one name for a table of its own and a collection (or an owned table): they would share the key
            raise DomainDataError(f"Nested.rows: {clash} also named in Nested.owners; a table is one or the other")
        return {**owned, **{t: (t, "rowid") for t in self.nested.rows}}

    @functools.cached_property
    def flat(self) -> list[str]:
        """The tables whose rows are the state as they are: every table, or a nested domain's own (``Nested.rows``),
        exported and hashed beside its collections."""
        return list(self.names) if self.nested is None else [t for t in self.names if t in self.nested.rows]

    def _rows(self, seed_file: str | None) -> tuple[Rows, str]:
        if seed_file is not None or isinstance(self.seed, Path):
            path = Path(seed_file) if seed_file is not None else self.seed
            return self.read_seed(path), str(path)  # type: ignore[arg-type]
        return (self.seed() if callable(self.seed) else self.seed), "the domain's seed"

    def seed_rows(self) -> Rows:
        """The seed's rows, table -> rows (read again from its file, if it is one)."""
        return self._rows(None)[0]

    def template(self, seed_file: str | None = None) -> tuple[sqlite3.Connection, _Snapshot]:
        """The template database (the seed, or ``seed_file`` read by ``read_seed``) and its state serialised.
        Built once: the rollouts of a step that start together wait for one build instead of each reading the seed."""
        with self._building:
            return self._template(seed_file)

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one template per seed file, for the process's life
    def _template(self, seed_file: str | None) -> tuple[sqlite3.Connection, _Snapshot]:
        rows, where = self._rows(seed_file)
        unknown = sorted(set(rows) - set(self.names))
        if unknown:
            raise DomainDataError(f"{where}: tables {unknown} are not in the schema (tables: {', '.join(self.names)})")
        conn = connect()
        load_schema(conn, self.schema)
        conn.execute("BEGIN")
        for table, table_rows in rows.items():
            if not isinstance(table_rows, list):
                raise DomainDataError(f"{where}: {table} must be a list of rows, got {type(table_rows).__name__}")
            _insert(conn, table, table_rows, where)
        conn.execute("COMMIT")
        _track(conn, self._owners)
        attach(conn)  # the template's (empty) approval requests are every fresh copy's: ``fresh_requests``
        return conn, self._snapshot(conn)

    def _snapshot(self, conn: sqlite3.Connection) -> _Snapshot:
        select = 'SELECT rowid AS {}, * FROM "{}"'
        nulls = self.nested is None  # a nested domain's own tables drop them, as its export does
        rows = {t: {r[ROWID]: _row_text(r, nulls) for r in conn.execute(select.format(ROWID, t))} for t in self.flat}
        if self.nested is None:
            return _Snapshot(rows)
        state = self.nested.export(conn)
        owned = {collection for collection, _ in self.nested.owners.values()}
        if set(state) != owned:  # a write to a collection the export lacks would never reach the hash
            raise DomainDataError(f"Nested: export() gives collections {sorted(state)}, owners name {sorted(owned)}")
        entities = {c: {str(k): canonical(drop_nulls(v)) for k, v in e.items()} for c, e in state.items()}
        return _Snapshot({**entities, **rows}, frozenset(entities))

    def _unit(self, conn: sqlite3.Connection, kind: str, unit: Any) -> tuple[Any, str | None]:
        """A touched unit's id and its text now (None: gone)."""
        if self.nested is None or kind in self.flat:
            found = conn.execute(f'SELECT rowid AS {ROWID}, * FROM "{kind}" WHERE rowid = ?', (unit,)).fetchone()
            return unit, None if found is None else _row_text(found, self.nested is None)
        value = self.nested.entity(conn, kind, unit)
        return str(unit), None if value is None else canonical(drop_nulls(value))

    def copy(self, seed_file: str | None = None) -> sqlite3.Connection:
        """A private in-memory copy of the template (SQLite's backup API: far cheaper than re-inserting)."""
        base, _ = self.template(seed_file)
        with DATABASE_LOCK:  # the template's reads, like every database call, take turns
            out = connect()
            base.backup(out)
        return out

    def export(self, conn: sqlite3.Connection) -> dict[str, Any]:
        """The state as JSON: every table's rows in insertion order; or the nested format's collections, and its own
        tables' rows as the hash reads them (no null-valued key, in the order of their text)."""
        rows = {t: [dict(r) for r in conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid')] for t in self.flat}
        if self.nested is None:
            return rows
        own = {t: sorted((drop_nulls(r) for r in found), key=canonical) for t, found in rows.items()}
        return {**self.nested.export(conn), **own}

    def state_hash(self, conn: sqlite3.Connection, seed_file: str | None = None) -> str:
        """The state's hash, serialising again only what the triggers marked as touched since the copy was made."""
        _, snapshot = self.template(seed_file)
        changed: dict[str, dict[Any, str | None]] = {}
        for kind, unit in conn.execute(f"SELECT kind, id FROM {DIRTY}"):
            key, text = self._unit(conn, kind, unit)
            changed.setdefault(kind, {})[key] = text
        return snapshot.digest(changed)

    def changes(self, conn: sqlite3.Connection, seed_file: str | None = None) -> dict[str, dict[str, tuple[Any, Any]]]:
        """Each unit the writes touched since the copy was made and left different, by kind and key: (its value in the
        template, its value now), None where there is none; as the hash reads them (a nested entity without its nulls).
        A nested entity's key is its own; a row's is its primary key (columns joined by ``|``), or for a table without
        one the row's own text, so that two states with the same rows in another order or under other rowids agree,
        as their hashes do."""
        _, snapshot = self.template(seed_file)
        before: dict[str, dict[str, Any]] = {}
        now: dict[str, dict[str, Any]] = {}
        for kind, unit in conn.execute(f"SELECT kind, id FROM {DIRTY}"):
            key, text = self._unit(conn, kind, unit)
            was = snapshot.units.get(kind, {}).get(key)
            if text == was:
                continue
            for side, found in ((before, was), (now, text)):
                if found is not None:
                    value = json.loads(found)
                    flat = kind in self.flat
                    side.setdefault(kind, {})[self._row_key(kind, value, found) if flat else str(key)] = value
        out: dict[str, dict[str, tuple[Any, Any]]] = {}
        for kind in set(before) | set(now):
            was_rows, now_rows = before.get(kind, {}), now.get(kind, {})
            for key in set(was_rows) | set(now_rows):
                pair = (was_rows.get(key), now_rows.get(key))
                if pair[0] != pair[1]:
                    out.setdefault(kind, {})[key] = pair
        return out

    def _row_key(self, table: str, row: Mapping[str, Any], text: str) -> str:
        columns = self._primary_keys.get(table)
        return "|".join(str(row.get(c)) for c in columns) if columns else text

    def full_hash(self, conn: sqlite3.Connection) -> str:
        """The same hash from every row of ``conn`` (the reference :meth:`state_hash` is checked against)."""
        return self._snapshot(conn).digest({})


def _track(conn: sqlite3.Connection, owners: Mapping[str, tuple[str, str]]) -> None:
    """A table of touched units, and triggers that fill it on every insert, update and delete."""
    statements = [f"CREATE TABLE {DIRTY} (kind TEXT NOT NULL, id NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID;"]
    for table, (kind, unit) in owners.items():
        for event, rows in (("INSERT", ("NEW",)), ("DELETE", ("OLD",)), ("UPDATE", ("OLD", "NEW"))):
            marks = " ".join(f"INSERT OR IGNORE INTO {DIRTY} VALUES ('{kind}', {r}.{unit});" for r in rows)
            statements.append(
                f'CREATE TRIGGER "{DIRTY}_{table}_{event.lower()}" AFTER {event} ON "{table}" BEGIN {marks} END;'
            )
    conn.executescript("\n".join(statements))


def environment(tables: Tables, tools: Mapping[str, ToolSpec]) -> Callable[[str | Path | None], ToolEnvironment]:
    """``make_env`` for a :class:`~rewardkit.envs.Domain`: ``make_env(seed_file=None)`` is a fresh environment on
    a private copy of the template (of ``seed_file``'s rows when given, read by the tables' ``read_seed``)."""

    class TablesEnvironment(ToolEnvironment):
        def __init__(self, seed_file: str | Path | None = None) -> None:
            self._seed_file = str(seed_file) if seed_file is not None else None
            super().__init__(tables.copy(self._seed_file))

        @staticmethod
        @functools.cache
        def fresh_requests() -> tuple[dict[str, Any], ...]:
            """The approval requests a new environment starts with (its template's), read without making a copy."""
            return tuple(pending_requests(tables.template()[0], DATABASE_LOCK))

        def export(self) -> dict[str, Any]:
            with self.lock:
                return tables.export(self.conn)

        def state_hash(self) -> str:
            with self.lock:
                return tables.state_hash(self.conn, self._seed_file)

        def changes(self) -> dict[str, dict[str, tuple[Any, Any]]]:
            with self.lock:
                return tables.changes(self.conn, self._seed_file)

    TablesEnvironment.tools = tools
    return TablesEnvironment
