"""The write tools, each declared where it is written (``@tool``): its description for the model is its docstring's
first paragraph, its arguments' schemas come from its type hints, and a gated write's preconditions are its gates'
(``*_target`` in :mod:`~rewardkit.envs.livestream.gates`)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Annotated, Any

from rewardkit.envs.livestream import gates
from rewardkit.envs.livestream.gates import coupon_target, price_target, switch_target
from rewardkit.envs.livestream.tables import (
    KEY,
    SCHEDULED,
    TIME,
    YUAN,
    RoomId,
    SessionId,
    Sku,
    now,
    room,
    room_product,
    yuan,
)
from rewardkit.envs.sqlite_env import next_id
from rewardkit.envs.tool import ResultCode, ToolError, tool


@tool(risk="write", key=KEY)
def create_live_room(
    conn: sqlite3.Connection,
    title: Annotated[str, {"minLength": 1, "maxLength": 40, "description": "直播间标题，按主播给的原文"}],
    scheduled_start: Annotated[
        str,
        {
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}$",
            "description": "开播时间，格式 YYYY-MM-DD HH:MM，须晚于当前时间",
        },
    ],
) -> dict[str, Any]:
    """创建一个预告状态的新直播间，返回新直播间编号。"""
    try:
        datetime.strptime(scheduled_start, TIME)
    except ValueError:
        raise ToolError(ResultCode.INVALID_ARGUMENT, f"scheduled_start: {scheduled_start!r} 不是有效时间") from None
    if scheduled_start <= now(conn):
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"开播时间 {scheduled_start} 必须晚于当前时间 {now(conn)}")
    room_id = next_id(conn, "rooms", "room_id", "R", 3)
    conn.execute("INSERT INTO rooms VALUES (?, ?, ?, ?, 0, NULL)", (room_id, title, SCHEDULED, scheduled_start))
    return {"room_id": room_id, "title": title, "status": SCHEDULED, "scheduled_start": scheduled_start}


@tool(risk="write", key=KEY)
def sync_session_products(conn: sqlite3.Connection, room_id: RoomId, session_id: SessionId) -> dict[str, Any]:
    """把一场往期直播的商品同步到直播间的商品列表（已在列表里的跳过）。"""
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


@tool(risk="write", gates=gates.PUT_ON_AIR, key=KEY)
def put_product_on_air(conn: sqlite3.Connection, room_id: RoomId, sku: Sku) -> dict[str, Any]:
    """切换直播间正在讲解的商品（上播）。直播间须在直播中，商品须在列表里且有库存；
    距上次切品未满最小间隔时需主播批准。"""
    row = switch_target(conn, room_id, sku)
    at = now(conn)
    conn.execute("UPDATE rooms SET on_air_sku = ? WHERE room_id = ?", (sku, room_id))
    conn.execute("INSERT INTO on_air_history VALUES (?, ?, ?)", (room_id, sku, at))
    return {"room_id": room_id, "on_air": {"sku": sku, "name": row["name"]}, "switched_at": at}


@tool(risk="write", gates=gates.CHANGE_PRICE, key=KEY)
def change_price(
    conn: sqlite3.Connection,
    sku: Sku,
    new_price: Annotated[float, {**YUAN, "description": "新售价（元），最多两位小数"}],
) -> dict[str, Any]:
    """修改商品售价，立即对所有直播间生效。需主播批准；低于成本价、降幅超过平台上限、
    超出商家调价区间的改价一律拒绝。"""
    row, new = price_target(conn, sku, new_price)
    conn.execute("UPDATE products SET price_cents = ? WHERE sku = ?", (new, sku))
    return {"sku": sku, "name": row["name"], "old_price": yuan(row["price_cents"]), "new_price": yuan(new)}


@tool(risk="write", gates=gates.ISSUE_COUPON, key=KEY)
def issue_coupon(
    conn: sqlite3.Connection,
    room_id: RoomId,
    sku: Sku,
    discount: Annotated[float, {**YUAN, "description": "立减金额（元），最多两位小数"}],
    quantity: Annotated[int, {"minimum": 1, "maximum": 10000, "description": "发放张数"}],
) -> dict[str, Any]:
    """在直播间给一个商品发放立减优惠券。券后价不得低于成本价，优惠不得超过平台上限。"""
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


@tool(risk="write", key=KEY)
def write_cue_card(
    conn: sqlite3.Connection,
    room_id: RoomId,
    sku: Sku,
    content: Annotated[str, {"minLength": 1, "maxLength": 300, "description": "手卡内容"}],
) -> dict[str, Any]:
    """写入（或覆盖）直播间里某个商品的讲解手卡，内容按主播给的原文。"""
    room_product(conn, room_id, sku)
    replaced = conn.execute("SELECT 1 FROM cue_cards WHERE room_id = ? AND sku = ?", (room_id, sku)).fetchone()
    if replaced:  # an UPDATE, not INSERT OR REPLACE: the state hash's triggers see an update
        conn.execute("UPDATE cue_cards SET content = ? WHERE room_id = ? AND sku = ?", (content, room_id, sku))
    else:
        conn.execute("INSERT INTO cue_cards VALUES (?, ?, ?)", (room_id, sku, content))
    return {"room_id": room_id, "sku": sku, "content": content, "replaced_previous": replaced is not None}


@tool(risk="write", key=KEY)
def enable_smart_titles(conn: sqlite3.Connection, room_id: RoomId) -> dict[str, Any]:
    """开启直播间的智能标题（按讲解商品自动生成标题）。"""
    if room(conn, room_id, writable=True)["smart_titles"]:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"直播间 {room_id} 的智能标题已经是开启状态")
    conn.execute("UPDATE rooms SET smart_titles = 1 WHERE room_id = ?", (room_id,))
    return {"room_id": room_id, "smart_titles": "已开启"}
