"""Approval tiers of the console's writes.

Hard (platform red lines, refused whatever was approved): a price, or a price after a coupon, below cost
(``PRICE_BELOW_COST``); a price cut or a coupon worth more than the platform's maximum share of the current price
(``PLATFORM_DISCOUNT_LIMIT``); a price outside the range the business declared for the product
(``PRICE_OUT_OF_RANGE``). Soft (the streamer approves the exact call): every price change within that range
(``PRICE_CHANGE_NEEDS_APPROVAL``); a switch of the product on air sooner than the shop's minimum interval after the
room's last one (``SWITCH_WITHIN_MIN_INTERVAL``).

A gated write's preconditions are a function of their own (``*_target``), which the write calls too: gates run
before the tool, and an approval is never asked for a call that could not run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from rewardkit.envs.approvals import Gate
from rewardkit.envs.livestream.tables import LIVE, cents, minutes_between, now, product, room, room_product, yuan
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


# (product, current price, price the buyer pays) in cents, for a call's arguments
Effective = Callable[[sqlite3.Connection, Mapping[str, Any]], tuple[sqlite3.Row, int, int]]


def changed_price(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> tuple[sqlite3.Row, int, int]:
    row, new = price_target(conn, arguments["sku"], arguments["new_price"])
    return row, row["price_cents"], new


def paid_after_change(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> tuple[sqlite3.Row, int, int]:
    """What a buyer pays at the new price with the largest coupon issued for the product (one coupon an order)."""
    row, price, new = changed_price(conn, arguments)
    query = "SELECT COALESCE(MAX(discount_cents), 0) FROM coupons WHERE sku = ?"
    (best,) = conn.execute(query, (row["sku"],)).fetchone()
    return row, price, new - best


def coupon_price(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> tuple[sqlite3.Row, int, int]:
    row, off = coupon_target(conn, arguments["room_id"], arguments["sku"], arguments["discount"])
    return row, row["price_cents"], row["price_cents"] - off


def below_cost(effective: Effective):
    def check(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> str | None:
        row, _, pays = effective(conn, arguments)
        if pays >= row["cost_cents"]:
            return None
        return f"{row['name']} 到手价 {yuan(pays)} 低于成本价 {yuan(row['cost_cents'])}"

    return check


def over_platform_limit(effective: Effective):
    def check(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> str | None:
        row, price, pays = effective(conn, arguments)
        (limit,) = conn.execute("SELECT max_discount_pct FROM platform").fetchone()
        if (price - pays) * 100 <= limit * price:
            return None
        return f"{row['name']} 优惠 {yuan(price - pays)} 超过现价 {yuan(price)} 的{limit}%（平台上限）"

    return check


def out_of_range(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> str | None:
    row, _, new = changed_price(conn, arguments)
    low, high = row["price_min_cents"], row["price_max_cents"]
    if low <= new <= high:
        return None
    return f"{row['name']} 新价 {yuan(new)} 超出商家设定的调价区间 {yuan(low)}–{yuan(high)}"


def needs_approval(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> str | None:
    row, old, new = changed_price(conn, arguments)
    return f"{row['name']} 改价 {yuan(old)} → {yuan(new)} 需主播批准"


def too_soon(conn: sqlite3.Connection, arguments: Mapping[str, Any]) -> str | None:
    switch_target(conn, arguments["room_id"], arguments["sku"])
    (last,) = conn.execute(
        "SELECT MAX(switched_at) FROM on_air_history WHERE room_id = ?", (arguments["room_id"],)
    ).fetchone()
    (interval,) = conn.execute("SELECT min_switch_interval_min FROM shop").fetchone()
    if last is None or minutes_between(last, now(conn)) >= interval:
        return None
    gap = minutes_between(last, now(conn))
    return f"直播间 {arguments['room_id']} 上次切品在 {last}，距今 {gap:g} 分钟，未满 {interval} 分钟"


CHANGE_PRICE = (
    Gate("hard", "PRICE_BELOW_COST", below_cost(paid_after_change)),
    Gate("hard", "PLATFORM_DISCOUNT_LIMIT", over_platform_limit(changed_price)),
    Gate("hard", "PRICE_OUT_OF_RANGE", out_of_range),
    Gate("soft", "PRICE_CHANGE_NEEDS_APPROVAL", needs_approval),
)
ISSUE_COUPON = (
    Gate("hard", "PRICE_BELOW_COST", below_cost(coupon_price)),
    Gate("hard", "PLATFORM_DISCOUNT_LIMIT", over_platform_limit(coupon_price)),
)
PUT_ON_AIR = (Gate("soft", "SWITCH_WITHIN_MIN_INTERVAL", too_soon),)
