"""The write tools. A gated write's preconditions are a function of their own (``*_target``), which its gates
call too: gates run before the tool, and an approval is never asked for a call that could not run."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from rewardkit.envs.livestream.tables import (
    LIVE,
    SCHEDULED,
    TIME,
    cents,
    next_id,
    now,
    product,
    room,
    room_product,
    yuan,
)
from rewardkit.envs.tool import ResultCode, ToolError


def price_target(conn: sqlite3.Connection, sku: str, new_price: float) -> tuple[sqlite3.Row, int]:
    """The product and the new price in cents; the same price as now is INVALID_ARGUMENT."""
    row = product(conn, sku)
    new = cents(new_price, "new_price")
    if new == row["price_cents"]:
        raise ToolError(ResultCode.INVALID_ARGUMENT, f"{sku} 现价已是 {yuan(new)}，无需改价")
    return row, new


def coupon_target(conn: sqlite3.Connection, room_id: str, sku: str, discount: float) -> tuple[sqlite3.Row, int]:
    """The product (in the room's list) and the coupon's discount in cents."""
    return room_product(conn, room_id, sku), cents(discount, "discount")


def switch_target(conn: sqlite3.Connection, room_id: str, sku: str) -> sqlite3.Row:
    """The product to put on air: the room is live, the product in its list, in stock and not on air already."""
    row = room_product(conn, room_id, sku)
    current = room(conn, room_id)
    if current["status"] != LIVE:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"直播间 {room_id} {current['status']}，开播后才能上播商品")
    if current["on_air_sku"] == sku:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"{sku} 已经在直播间 {room_id} 讲解中")
    if row["stock"] <= 0:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"{sku} {row['name']} 已售罄，不能上播")
    return row


def create_live_room(conn: sqlite3.Connection, title: str, scheduled_start: str) -> dict[str, Any]:
    try:
        datetime.strptime(scheduled_start, TIME)
    except ValueError:
        raise ToolError(ResultCode.INVALID_ARGUMENT, f"scheduled_start: {scheduled_start!r} 不是有效时间") from None
    if scheduled_start <= now(conn):
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"开播时间 {scheduled_start} 必须晚于当前时间 {now(conn)}")
    room_id = next_id(conn, "rooms", "room_id", "R", 3)
    conn.execute("INSERT INTO rooms VALUES (?, ?, ?, ?, 0, NULL)", (room_id, title, SCHEDULED, scheduled_start))
    return {"room_id": room_id, "title": title, "status": SCHEDULED, "scheduled_start": scheduled_start}


def sync_session_products(conn: sqlite3.Connection, room_id: str, session_id: str) -> dict[str, Any]:
    room(conn, room_id, writable=True)
    if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone() is None:
        raise ToolError(ResultCode.NOT_FOUND, f"没有往期场次 {session_id}")
    skus = [
        r[0]
        for r in conn.execute("SELECT sku FROM session_products WHERE session_id = ? ORDER BY rowid", (session_id,))
    ]
    present = {r[0] for r in conn.execute("SELECT sku FROM room_products WHERE room_id = ?", (room_id,))}
    added = [s for s in skus if s not in present]
    (top,) = conn.execute(
        "SELECT COALESCE(MAX(position), 0) FROM room_products WHERE room_id = ?", (room_id,)
    ).fetchone()
    conn.executemany(
        "INSERT INTO room_products VALUES (?, ?, ?)", [(room_id, s, top + i + 1) for i, s in enumerate(added)]
    )
    kept = [s for s in skus if s in present]
    total = len(present) + len(added)
    return {
        "room_id": room_id,
        "session_id": session_id,
        "added": added,
        "already_in_room": kept,
        "product_count": total,
    }


def put_product_on_air(conn: sqlite3.Connection, room_id: str, sku: str) -> dict[str, Any]:
    row = switch_target(conn, room_id, sku)
    at = now(conn)
    conn.execute("UPDATE rooms SET on_air_sku = ? WHERE room_id = ?", (sku, room_id))
    conn.execute("INSERT INTO on_air_history VALUES (?, ?, ?)", (room_id, sku, at))
    return {"room_id": room_id, "on_air": {"sku": sku, "name": row["name"]}, "switched_at": at}


def change_price(conn: sqlite3.Connection, sku: str, new_price: float) -> dict[str, Any]:
    row, new = price_target(conn, sku, new_price)
    conn.execute("UPDATE products SET price_cents = ? WHERE sku = ?", (new, sku))
    return {"sku": sku, "name": row["name"], "old_price": yuan(row["price_cents"]), "new_price": yuan(new)}


def issue_coupon(conn: sqlite3.Connection, room_id: str, sku: str, discount: float, quantity: int) -> dict[str, Any]:
    row, off = coupon_target(conn, room_id, sku, discount)
    coupon_id = next_id(conn, "coupons", "coupon_id", "C", 3)
    conn.execute("INSERT INTO coupons VALUES (?, ?, ?, ?, ?)", (coupon_id, room_id, sku, off, quantity))
    return {
        "coupon_id": coupon_id,
        "room_id": room_id,
        "sku": sku,
        "name": row["name"],
        "discount": yuan(off),
        "price_after_coupon": yuan(row["price_cents"] - off),
        "quantity": quantity,
    }


def write_cue_card(conn: sqlite3.Connection, room_id: str, sku: str, content: str) -> dict[str, Any]:
    room_product(conn, room_id, sku)
    replaced = conn.execute("SELECT 1 FROM cue_cards WHERE room_id = ? AND sku = ?", (room_id, sku)).fetchone()
    if replaced:  # an UPDATE, not INSERT OR REPLACE: the state hash's triggers see an update
        conn.execute("UPDATE cue_cards SET content = ? WHERE room_id = ? AND sku = ?", (content, room_id, sku))
    else:
        conn.execute("INSERT INTO cue_cards VALUES (?, ?, ?)", (room_id, sku, content))
    return {"room_id": room_id, "sku": sku, "content": content, "replaced_previous": replaced is not None}


def enable_smart_titles(conn: sqlite3.Connection, room_id: str) -> dict[str, Any]:
    if room(conn, room_id, writable=True)["smart_titles"]:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"直播间 {room_id} 的智能标题已经是开启状态")
    conn.execute("UPDATE rooms SET smart_titles = 1 WHERE room_id = ?", (room_id,))
    return {"room_id": room_id, "smart_titles": "已开启"}
