"""The merchant console's tables, its seed (data/seed.json) and the helpers every tool shares.

Money is stored in cents and shown as yuan with two decimals ("89.00"); times are "YYYY-MM-DD HH:MM" on a fixed
simulated clock (the ``clock`` table), so the minimum interval between two switches is deterministic.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.sqlite_env import Tables
from rewardkit.envs.tool import ResultCode, ToolError

DATA = Path(__file__).resolve().parent / "data"
SEED = DATA / "seed.json"
TIME = "%Y-%m-%d %H:%M"
LIVE, SCHEDULED, ENDED = "直播中", "预告", "已结束"

# The arguments' JSON Schemas the tools share (each tool's own in its signature).
RoomId = Annotated[str, {"pattern": "^R[0-9]{3}$", "description": "直播间编号，如 R101"}]
Sku = Annotated[str, {"pattern": "^SP[0-9]{3}$", "description": "商品编号，如 SP001"}]
SessionId = Annotated[str, {"pattern": "^S[0-9]{6}$", "description": "往期场次编号，如 S240610"}]
YUAN = {"exclusiveMinimum": 0, "maximum": 100000}  # a sum of money, in yuan
KEY = {  # the idempotency key's schema, described in the console's language
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "幂等键：每个写操作传一个新的 UUID；重试同一操作时沿用原键，同一个键绝不会执行两次",
}

SCHEMA = f"""
CREATE TABLE clock (now TEXT NOT NULL);
CREATE TABLE shop (shop_id TEXT PRIMARY KEY, name TEXT NOT NULL, streamer TEXT NOT NULL,
                   min_switch_interval_min INTEGER NOT NULL);
CREATE TABLE platform (platform TEXT PRIMARY KEY, max_discount_pct INTEGER NOT NULL);
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                       price_cents INTEGER NOT NULL, cost_cents INTEGER NOT NULL, stock INTEGER NOT NULL,
                       price_min_cents INTEGER NOT NULL, price_max_cents INTEGER NOT NULL);
CREATE TABLE rooms (room_id TEXT PRIMARY KEY, title TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('{LIVE}', '{SCHEDULED}', '{ENDED}')),
                    scheduled_start TEXT NOT NULL, smart_titles INTEGER NOT NULL,
                    on_air_sku TEXT REFERENCES products(sku));
CREATE TABLE room_products (room_id TEXT NOT NULL REFERENCES rooms(room_id),
                            sku TEXT NOT NULL REFERENCES products(sku), position INTEGER NOT NULL,
                            PRIMARY KEY (room_id, sku));
CREATE TABLE on_air_history (room_id TEXT NOT NULL REFERENCES rooms(room_id),
                             sku TEXT NOT NULL REFERENCES products(sku), switched_at TEXT NOT NULL);
CREATE TABLE sessions (session_id TEXT PRIMARY KEY, room_id TEXT NOT NULL, title TEXT NOT NULL, date TEXT NOT NULL);
CREATE TABLE session_products (session_id TEXT NOT NULL REFERENCES sessions(session_id),
                               sku TEXT NOT NULL REFERENCES products(sku), sold INTEGER NOT NULL,
                               PRIMARY KEY (session_id, sku));
CREATE TABLE coupons (coupon_id TEXT PRIMARY KEY, room_id TEXT NOT NULL REFERENCES rooms(room_id),
                      sku TEXT NOT NULL REFERENCES products(sku), discount_cents INTEGER NOT NULL,
                      quantity INTEGER NOT NULL);
CREATE TABLE cue_cards (room_id TEXT NOT NULL REFERENCES rooms(room_id), sku TEXT NOT NULL REFERENCES products(sku),
                        content TEXT NOT NULL, PRIMARY KEY (room_id, sku));
"""


def read_seed() -> dict[str, list[dict[str, Any]]]:
    try:
        return json.loads(SEED.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DomainDataError(f"{SEED}: cannot be read as the livestream seed rows ({exc})") from None


TABLES = Tables(SCHEMA, read_seed)


def yuan(cents: int) -> str:
    """Cents as the tools show money: ``8990`` -> ``"89.90"``, ``-1050`` -> ``"-10.50"``."""
    sign, cents = ("-", -cents) if cents < 0 else ("", cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def cents(value: float, field: str) -> int:
    """A price in yuan as cents; more than two decimals is INVALID_ARGUMENT."""
    out = round(value * 100)
    if abs(value * 100 - out) > 1e-6:
        raise ToolError(ResultCode.INVALID_ARGUMENT, f"{field}: {value} 元最多两位小数")
    return out


def now(conn: sqlite3.Connection) -> str:
    return conn.execute("SELECT now FROM clock").fetchone()["now"]


def minutes_between(earlier: str, later: str) -> float:
    return (datetime.strptime(later, TIME) - datetime.strptime(earlier, TIME)).total_seconds() / 60


def product(conn: sqlite3.Connection, sku: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM products WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, f"没有商品 {sku}")
    return row


def room(conn: sqlite3.Connection, room_id: str, writable: bool = False) -> sqlite3.Row:
    """The room; with ``writable``, one that has not ended (an ended room takes no writes)."""
    row = conn.execute("SELECT * FROM rooms WHERE room_id = ?", (room_id,)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, f"没有直播间 {room_id}")
    if writable and row["status"] == ENDED:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"直播间 {room_id} 已结束，不能再修改")
    return row


def room_product(conn: sqlite3.Connection, room_id: str, sku: str) -> sqlite3.Row:
    """The product, which must be in the (not ended) room's product list."""
    room(conn, room_id, writable=True)
    found = product(conn, sku)
    if conn.execute("SELECT 1 FROM room_products WHERE room_id = ? AND sku = ?", (room_id, sku)).fetchone() is None:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"{sku} 不在直播间 {room_id} 的商品列表里，请先同步商品")
    return found
