"""The read tools: rules, rooms, products, past sessions and coupons, as the agent sees them (money in yuan), each
declared where it is written (``@tool``)."""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any

from rewardkit.envs.livestream.tables import RoomId, SessionId, Sku, now, product, room, yuan
from rewardkit.envs.tool import ResultCode, ToolError, tool


@tool
def get_shop_rules(conn: sqlite3.Connection) -> dict[str, Any]:
    """查看店铺信息、当前时间，以及商家规则（改价审批、切品最小间隔）和平台红线（成本价底线、最大优惠比例）。"""
    shop = conn.execute("SELECT * FROM shop").fetchone()
    platform = conn.execute("SELECT * FROM platform").fetchone()
    interval, limit = shop["min_switch_interval_min"], platform["max_discount_pct"]
    return {
        "shop": shop["name"],
        "streamer": shop["streamer"],
        "now": now(conn),
        "business_rules": {
            "price_change": "改价须在商品的调价区间内，并经主播批准后才执行",
            "min_switch_interval": f"同一直播间两次切品至少间隔{interval}分钟，未满需主播批准",
        },
        "platform_rules": {
            "price_floor": "到手价（售价或券后价）不得低于成本价",
            "max_discount": f"单次降价或单张优惠券的优惠不得超过当前售价的{limit}%",
        },
    }


def _room_summary(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "room_id": row["room_id"],
        "title": row["title"],
        "status": row["status"],
        "scheduled_start": row["scheduled_start"],
    }


@tool
def list_live_rooms(
    conn: sqlite3.Connection,
    status: Annotated[str | None, {"enum": ["直播中", "预告", "已结束"], "description": "直播间状态"}] = None,
) -> list[dict[str, Any]]:
    """列出店铺的直播间（可按状态筛选）。"""
    rows = conn.execute(
        "SELECT * FROM rooms WHERE ? IS NULL OR status = ? ORDER BY room_id", (status, status)
    ).fetchall()
    return [_room_summary(r) for r in rows]


@tool
def get_live_room(conn: sqlite3.Connection, room_id: RoomId) -> dict[str, Any]:
    """查看一个直播间：状态、智能标题开关、正在讲解的商品、上次切品时间、商品列表及手卡。"""
    found = room(conn, room_id)
    items = conn.execute(
        "SELECT p.sku, p.name, p.price_cents, p.stock, c.content FROM room_products rp "
        "JOIN products p ON p.sku = rp.sku LEFT JOIN cue_cards c ON c.room_id = rp.room_id AND c.sku = rp.sku "
        "WHERE rp.room_id = ? ORDER BY rp.position",
        (room_id,),
    ).fetchall()
    last = conn.execute(
        "SELECT sku, switched_at FROM on_air_history WHERE room_id = ? ORDER BY switched_at DESC, rowid DESC LIMIT 1",
        (room_id,),
    ).fetchone()
    on_air = None
    if found["on_air_sku"] is not None:
        on_air = {"sku": found["on_air_sku"], "name": product(conn, found["on_air_sku"])["name"]}
    return {
        **_room_summary(found),
        "smart_titles": "已开启" if found["smart_titles"] else "未开启",
        "on_air": on_air,
        "last_switch_at": None if last is None else last["switched_at"],
        "now": now(conn),
        "products": [
            {
                "sku": r["sku"],
                "name": r["name"],
                "price": yuan(r["price_cents"]),
                "stock": r["stock"],
                "cue_card": r["content"],
            }
            for r in items
        ],
    }


@tool
def search_products(
    conn: sqlite3.Connection,
    keyword: Annotated[str, {"minLength": 1, "maxLength": 40, "description": "关键词，如 面膜、零食"}],
) -> list[dict[str, Any]]:
    """按名称、类目或编号搜索商品，返回编号、售价和库存。"""
    pattern = f"%{keyword}%"
    rows = conn.execute(
        "SELECT * FROM products WHERE name LIKE ? OR category LIKE ? OR sku = ? ORDER BY sku",
        (pattern, pattern, keyword),
    ).fetchall()
    if not rows:
        raise ToolError(ResultCode.NOT_FOUND, f"没有名称或类目包含“{keyword}”的商品")
    return [{"sku": r["sku"], "name": r["name"], "price": yuan(r["price_cents"]), "stock": r["stock"]} for r in rows]


@tool
def get_product(conn: sqlite3.Connection, sku: Sku) -> dict[str, Any]:
    """查看商品详情：售价、成本价、库存、商家设定的调价区间。"""
    row = product(conn, sku)
    return {
        "sku": row["sku"],
        "name": row["name"],
        "category": row["category"],
        "price": yuan(row["price_cents"]),
        "cost": yuan(row["cost_cents"]),
        "stock": row["stock"],
        "stock_status": "有货" if row["stock"] > 0 else "已售罄",
        "price_range": {"min": yuan(row["price_min_cents"]), "max": yuan(row["price_max_cents"])},
    }


@tool
def list_past_sessions(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """列出往期直播场次（最近的在前），含商品数量。"""
    rows = conn.execute(
        "SELECT s.*, COUNT(sp.sku) AS n FROM sessions s LEFT JOIN session_products sp USING (session_id) "
        "GROUP BY s.session_id ORDER BY s.date DESC"
    ).fetchall()
    return [
        {
            "session_id": r["session_id"],
            "title": r["title"],
            "date": r["date"],
            "room_id": r["room_id"],
            "product_count": r["n"],
        }
        for r in rows
    ]


@tool
def get_past_session(conn: sqlite3.Connection, session_id: SessionId) -> dict[str, Any]:
    """查看一场往期直播的商品及销量。"""
    found = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if found is None:
        raise ToolError(ResultCode.NOT_FOUND, f"没有往期场次 {session_id}")
    rows = conn.execute(
        "SELECT p.sku, p.name, sp.sold FROM session_products sp JOIN products p USING (sku) "
        "WHERE sp.session_id = ? ORDER BY sp.rowid",
        (session_id,),
    ).fetchall()
    return {
        "session_id": session_id,
        "title": found["title"],
        "date": found["date"],
        "products": [{"sku": r["sku"], "name": r["name"], "sold": r["sold"]} for r in rows],
    }


@tool
def list_coupons(conn: sqlite3.Connection, room_id: RoomId) -> list[dict[str, Any]]:
    """列出直播间已发放的优惠券。"""
    room(conn, room_id)
    rows = conn.execute(
        "SELECT c.*, p.name FROM coupons c JOIN products p USING (sku) WHERE c.room_id = ? ORDER BY c.coupon_id",
        (room_id,),
    ).fetchall()
    return [
        {
            "coupon_id": r["coupon_id"],
            "sku": r["sku"],
            "name": r["name"],
            "discount": yuan(r["discount_cents"]),
            "quantity": r["quantity"],
        }
        for r in rows
    ]
