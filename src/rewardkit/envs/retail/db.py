"""The retail database on SQLite: its schema, and how tau2's db.json maps to rows and back.

``read → export`` reproduces db.json exactly (as JSON, after dropping null-valued keys): list order is kept in
``position`` columns, prices and balances are REAL, which stores the JSON doubles bit for bit. :data:`TABLES`
is retail on the shared plumbing (:mod:`rewardkit.envs.sqlite_env`): a template per process, a private copy per
rollout, and the state hash of the exported db.json, kept incrementally per user, product and order. A table of
retail's own, beside tau2's three collections and read by none of their entities, is its ``CREATE TABLE`` in
:data:`SCHEMA`, its name in :data:`OWN_TABLES`, and a key of db.json holding its rows (exported and hashed row by
row).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.sqlite_env import Nested, Rows, Tables

SCHEMA = """
CREATE TABLE users (
    user_id TEXT PRIMARY KEY, position INTEGER NOT NULL,
    first_name TEXT NOT NULL, last_name TEXT NOT NULL, email TEXT NOT NULL,
    address1 TEXT, address2 TEXT, city TEXT, country TEXT, state TEXT, zip TEXT
);
CREATE INDEX users_email ON users(email);
CREATE TABLE payment_methods (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(user_id), position INTEGER NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('credit_card', 'paypal', 'gift_card')),
    brand TEXT, last_four TEXT,
    balance REAL CHECK (balance IS NULL OR balance >= 0)
);
CREATE TABLE user_orders (
    user_id TEXT NOT NULL REFERENCES users(user_id), position INTEGER NOT NULL, order_id TEXT NOT NULL,
    PRIMARY KEY (user_id, position)
);
CREATE TABLE products (product_id TEXT PRIMARY KEY, position INTEGER NOT NULL, name TEXT NOT NULL);
CREATE TABLE variants (
    item_id TEXT PRIMARY KEY, product_id TEXT NOT NULL REFERENCES products(product_id), position INTEGER NOT NULL,
    options TEXT NOT NULL, available INTEGER NOT NULL CHECK (available IN (0, 1)), price REAL NOT NULL
);
CREATE TABLE orders (
    order_id TEXT PRIMARY KEY, position INTEGER NOT NULL, user_id TEXT NOT NULL REFERENCES users(user_id),
    address1 TEXT, address2 TEXT, city TEXT, country TEXT, state TEXT, zip TEXT,
    status TEXT NOT NULL,
    -- fields the write tools add (tau2 stores them on the order; NULL = absent)
    cancel_reason TEXT, exchange_items TEXT, exchange_new_items TEXT, exchange_payment_method_id TEXT,
    exchange_price_difference REAL, return_items TEXT, return_payment_method_id TEXT
);
CREATE INDEX orders_user ON orders(user_id);
CREATE TABLE order_items (
    order_id TEXT NOT NULL REFERENCES orders(order_id), position INTEGER NOT NULL,
    item_id TEXT NOT NULL, product_id TEXT NOT NULL, name TEXT NOT NULL, price REAL NOT NULL, options TEXT NOT NULL,
    PRIMARY KEY (order_id, position)
);
CREATE TABLE fulfillments (
    order_id TEXT NOT NULL REFERENCES orders(order_id), position INTEGER NOT NULL,
    tracking_ids TEXT NOT NULL, item_ids TEXT NOT NULL,
    PRIMARY KEY (order_id, position)
);
CREATE TABLE payment_history (
    order_id TEXT NOT NULL REFERENCES orders(order_id), position INTEGER NOT NULL,
    transaction_type TEXT NOT NULL CHECK (transaction_type IN ('payment', 'refund')),
    amount REAL NOT NULL, payment_method_id TEXT NOT NULL,
    PRIMARY KEY (order_id, position)
);
"""
# The tables of SCHEMA beside the collections, which no entity reads: db.json's other keys, rows as they are.
OWN_TABLES: tuple[str, ...] = ()

_ADDRESS = ("address1", "address2", "city", "country", "state", "zip")
# Order fields stored as JSON text (lists) or plain values; absent when NULL.
_ORDER_EXTRAS_JSON = ("exchange_items", "exchange_new_items", "return_items")
_ORDER_EXTRAS = ("cancel_reason", "exchange_payment_method_id", "exchange_price_difference", "return_payment_method_id")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _rows(db: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """db.json's products, users and orders as rows, parents before children (the foreign keys are checked), and the
    rows of :data:`OWN_TABLES` as they are."""
    products, variants, users, methods, user_orders = [], [], [], [], []
    for pos, p in enumerate(db["products"].values()):
        products.append({"product_id": p["product_id"], "position": pos, "name": p["name"]})
        variants += [
            {
                "item_id": v["item_id"],
                "product_id": p["product_id"],
                "position": i,
                "options": _dumps(v["options"]),
                "available": int(v["available"]),
                "price": v["price"],
            }
            for i, v in enumerate(p["variants"].values())
        ]
    for pos, u in enumerate(db["users"].values()):
        users.append(
            {
                "user_id": u["user_id"],
                "position": pos,
                "first_name": u["name"]["first_name"],
                "last_name": u["name"]["last_name"],
                "email": u["email"],
                **{k: u["address"].get(k) for k in _ADDRESS},
            }
        )
        methods += [
            {
                "id": m["id"],
                "user_id": u["user_id"],
                "position": i,
                "source": m["source"],
                "brand": m.get("brand"),
                "last_four": m.get("last_four"),
                "balance": m.get("balance"),
            }
            for i, m in enumerate(u["payment_methods"].values())
        ]
        user_orders += [{"user_id": u["user_id"], "position": i, "order_id": o} for i, o in enumerate(u["orders"])]
    orders, items, fulfillments, payments = [], [], [], []
    for pos, o in enumerate(db["orders"].values()):
        key = o["order_id"]
        orders.append(
            {
                "order_id": key,
                "position": pos,
                "user_id": o["user_id"],
                **{k: o["address"].get(k) for k in _ADDRESS},
                "status": o["status"],
                **{k: _dumps(o[k]) if k in o else None for k in _ORDER_EXTRAS_JSON},
                **{k: o.get(k) for k in _ORDER_EXTRAS},
            }
        )
        items += [
            {
                "order_id": key,
                "position": i,
                "item_id": it["item_id"],
                "product_id": it["product_id"],
                "name": it["name"],
                "price": it["price"],
                "options": _dumps(it["options"]),
            }
            for i, it in enumerate(o["items"])
        ]
        fulfillments += [
            {
                "order_id": key,
                "position": i,
                "tracking_ids": _dumps(f["tracking_id"]),
                "item_ids": _dumps(f["item_ids"]),
            }
            for i, f in enumerate(o["fulfillments"])
        ]
        payments += [
            {
                "order_id": key,
                "position": i,
                "transaction_type": p["transaction_type"],
                "amount": p["amount"],
                "payment_method_id": p["payment_method_id"],
            }
            for i, p in enumerate(o["payment_history"])
        ]
    return {
        "products": products,
        "variants": variants,
        "users": users,
        "payment_methods": methods,
        "user_orders": user_orders,
        "orders": orders,
        "order_items": items,
        "fulfillments": fulfillments,
        "payment_history": payments,
        **{name: db[name] for name in OWN_TABLES if name in db},
    }


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise ValueError(f"non-finite number {text}")
    return value


def _no_constants(name: str) -> float:
    raise ValueError(f"non-finite number {name}")  # NaN, Infinity, -Infinity: JSON extensions Python accepts


def read_db(path: Path) -> Rows:
    """A db.json as rows; money is checked finite, and a malformed file fails here, naming it."""
    try:
        with path.open(encoding="utf-8") as f:
            db = json.load(f, parse_float=_finite, parse_constant=_no_constants)
    except (OSError, ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise DomainDataError(f"{path}: not a usable db.json: {exc}") from None
    unknown = sorted(set(db) - set(_ENTITY) - set(OWN_TABLES)) if isinstance(db, dict) else []
    if unknown:
        raise DomainDataError(
            f"{path}: keys {unknown} are neither users, products, orders nor a table of retail's OWN_TABLES"
        )
    try:
        return _rows(db)
    except (KeyError, TypeError, AttributeError) as exc:
        raise DomainDataError(f"{path}: not a tau2 retail db.json: missing or malformed field {exc}") from None


def _address(row: sqlite3.Row) -> dict[str, Any]:
    return {k: row[k] for k in _ADDRESS}


def _grouped(conn: sqlite3.Connection, sql: str, *params: Any) -> dict[str, list[sqlite3.Row]]:
    out: dict[str, list[sqlite3.Row]] = {}
    for row in conn.execute(sql, params):
        out.setdefault(row[0], []).append(row)
    return out


# Each entity is built from its rows by one function, used both by the bulk
# export (rows grouped in one query per table) and by the tools (one entity).


def _product(p: sqlite3.Row, variants: list[sqlite3.Row]) -> dict[str, Any]:
    return {
        "name": p["name"],
        "product_id": p["product_id"],
        "variants": {v["item_id"]: variant_dict(v) for v in variants},
    }


def variant_dict(v: sqlite3.Row) -> dict[str, Any]:
    return {
        "item_id": v["item_id"],
        "options": json.loads(v["options"]),
        "available": bool(v["available"]),
        "price": v["price"],
    }


def _user(u: sqlite3.Row, methods: list[sqlite3.Row], order_ids: list[sqlite3.Row]) -> dict[str, Any]:
    pms = {}
    for m in methods:
        pm = {
            "source": m["source"],
            "id": m["id"],
            "brand": m["brand"],
            "last_four": m["last_four"],
            "balance": m["balance"],
        }
        pms[m["id"]] = {k: v for k, v in pm.items() if v is not None}
    return {
        "user_id": u["user_id"],
        "name": {"first_name": u["first_name"], "last_name": u["last_name"]},
        "address": _address(u),
        "email": u["email"],
        "payment_methods": pms,
        "orders": [r["order_id"] for r in order_ids],
    }


def _order(o: sqlite3.Row, items: list[sqlite3.Row], fulfil: list[sqlite3.Row], payments: list[sqlite3.Row]) -> dict:
    order: dict[str, Any] = {
        "order_id": o["order_id"],
        "user_id": o["user_id"],
        "address": _address(o),
        "items": [
            {
                "name": i["name"],
                "product_id": i["product_id"],
                "item_id": i["item_id"],
                "price": i["price"],
                "options": json.loads(i["options"]),
            }
            for i in items
        ],
        "status": o["status"],
        "fulfillments": [
            {"tracking_id": json.loads(f["tracking_ids"]), "item_ids": json.loads(f["item_ids"])} for f in fulfil
        ],
        "payment_history": [
            {
                "transaction_type": p["transaction_type"],
                "amount": p["amount"],
                "payment_method_id": p["payment_method_id"],
            }
            for p in payments
        ],
    }
    for k in _ORDER_EXTRAS_JSON:
        if o[k] is not None:
            order[k] = json.loads(o[k])
    for k in _ORDER_EXTRAS:
        if o[k] is not None:
            order[k] = o[k]
    return order


def product_dict(conn: sqlite3.Connection, product_id: str) -> dict[str, Any] | None:
    p = conn.execute("SELECT * FROM products WHERE product_id = ?", (product_id,)).fetchone()
    if p is None:
        return None
    return _product(
        p, conn.execute("SELECT * FROM variants WHERE product_id = ? ORDER BY position", (product_id,)).fetchall()
    )


def user_dict(conn: sqlite3.Connection, user_id: str) -> dict[str, Any] | None:
    u = conn.execute("SELECT * FROM users WHERE user_id = ?", (user_id,)).fetchone()
    if u is None:
        return None
    methods = conn.execute("SELECT * FROM payment_methods WHERE user_id = ? ORDER BY position", (user_id,)).fetchall()
    orders = conn.execute("SELECT order_id FROM user_orders WHERE user_id = ? ORDER BY position", (user_id,)).fetchall()
    return _user(u, methods, orders)


def order_dict(conn: sqlite3.Connection, order_id: str) -> dict[str, Any] | None:
    o = conn.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    if o is None:
        return None
    rows = [
        conn.execute(f"SELECT * FROM {table} WHERE order_id = ? ORDER BY position", (order_id,)).fetchall()
        for table in ("order_items", "fulfillments", "payment_history")
    ]
    return _order(o, *rows)


def export(conn: sqlite3.Connection) -> dict[str, Any]:
    """The database in db.json's shape (keys whose value would be null are omitted)."""
    variants = _grouped(conn, "SELECT product_id, * FROM variants ORDER BY product_id, position")
    methods = _grouped(conn, "SELECT user_id, * FROM payment_methods ORDER BY user_id, position")
    user_orders = _grouped(conn, "SELECT user_id, order_id FROM user_orders ORDER BY user_id, position")
    items = _grouped(conn, "SELECT order_id, * FROM order_items ORDER BY order_id, position")
    fulfil = _grouped(conn, "SELECT order_id, * FROM fulfillments ORDER BY order_id, position")
    payments = _grouped(conn, "SELECT order_id, * FROM payment_history ORDER BY order_id, position")
    return {
        "products": {
            p["product_id"]: _product(p, variants.get(p["product_id"], []))
            for p in conn.execute("SELECT * FROM products ORDER BY position")
        },
        "users": {
            u["user_id"]: _user(u, methods.get(u["user_id"], []), user_orders.get(u["user_id"], []))
            for u in conn.execute("SELECT * FROM users ORDER BY position")
        },
        "orders": {
            o["order_id"]: _order(
                o, items.get(o["order_id"], []), fulfil.get(o["order_id"], []), payments.get(o["order_id"], [])
            )
            for o in conn.execute("SELECT * FROM orders ORDER BY position")
        },
    }


# table -> (db.json's collection, the column holding the key of the entity its rows belong to)
_OWNERS = {
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
_ENTITY = {"users": user_dict, "products": product_dict, "orders": order_dict}

TABLES = Tables(
    SCHEMA,
    DATA_DIR / "db.json",
    read_seed=read_db,
    nested=Nested(_OWNERS, lambda conn, collection, key: _ENTITY[collection](conn, key), export, OWN_TABLES),
)
