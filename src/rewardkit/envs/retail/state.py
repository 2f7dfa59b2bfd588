"""The canonical state hash, and a fast incremental way to compute the same value.

Canonical: sha256 of the exported db.json-shaped state as JSON with sorted
keys, null-valued keys dropped, compact separators. Computing it from scratch
exports and serialises the whole database (~80 ms). A rollout touches a few
orders and users, so :class:`StateHasher` keeps the template's serialised
entities and re-exports only those that triggers marked dirty in the copy;
the bytes fed to sha256 are identical, hence the hash is too.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from typing import Any

from rewardkit.envs.retail.db import drop_nulls, export, order_dict, product_dict, user_dict

# table -> (top-level collection, key column of the entity it belongs to)
_OWNER = {
    "users": ("users", "user_id"),
    "payment_methods": ("users", "user_id"),
    "user_orders": ("users", "user_id"),
    "products": ("products", "product_id"),
    "variants": ("products", "product_id"),
    "orders": ("orders", "order_id"),
    "order_items": ("orders", "order_id"),
    "fulfillments": ("orders", "order_id"),
    "payment_history": ("orders", "order_id"),
}
_ENTITY: dict[str, Callable[[sqlite3.Connection, str], dict[str, Any] | None]] = {
    "users": user_dict,
    "products": product_dict,
    "orders": order_dict,
}


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def state_hash(conn: sqlite3.Connection) -> str:
    """The canonical hash, from a full export (the reference the fast path is tested against)."""
    return _digest(_json(drop_nulls(export(conn))))


def track_changes(conn: sqlite3.Connection) -> None:
    """Add a ``dirty`` table and triggers that record every entity a write touches."""
    statements = ["CREATE TABLE dirty (kind TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID;"]
    for table, (kind, key) in _OWNER.items():
        for event, rows in (("INSERT", ("NEW",)), ("DELETE", ("OLD",)), ("UPDATE", ("OLD", "NEW"))):
            marks = " ".join(f"INSERT OR IGNORE INTO dirty VALUES ('{kind}', {row}.{key});" for row in rows)
            statements.append(f"CREATE TRIGGER {table}_{event.lower()} AFTER {event} ON {table} BEGIN {marks} END;")
    conn.executescript("\n".join(statements))


class StateHasher:
    """Canonical hashes of copies of one template, re-serialising only what changed.

    Build it from the template *before* any copy is written; copies must come
    from a template on which :func:`track_changes` ran.
    """

    def __init__(self, template: sqlite3.Connection) -> None:
        state = drop_nulls(export(template))
        self._parts = {kind: {key: _json(value) for key, value in entities.items()} for kind, entities in state.items()}
        self._bodies = {kind: self._body(parts) for kind, parts in self._parts.items()}  # unchanged kinds reuse these

    @staticmethod
    def _body(parts: dict[str, str | None]) -> str:
        return ",".join(f"{_json(key)}:{text}" for key, text in sorted(parts.items()) if text is not None)

    def __call__(self, conn: sqlite3.Connection) -> str:
        changed: dict[str, dict[str, str | None]] = {}
        for kind, key in conn.execute("SELECT kind, id FROM dirty"):
            entity = _ENTITY[kind](conn, key)
            changed.setdefault(kind, {})[key] = None if entity is None else _json(drop_nulls(entity))
        chunks = []
        for kind in sorted(self._parts):
            body = self._body({**self._parts[kind], **changed[kind]}) if kind in changed else self._bodies[kind]
            chunks.append(f"{_json(kind)}:{{{body}}}")
        return _digest("{" + ",".join(chunks) + "}")
