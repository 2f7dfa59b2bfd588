"""The retail tools on SQL, with tau2-bench's retail semantics, each declared where it is written (``@tool``).

Each function takes the connection and the (already schema-checked) arguments
and returns a JSON value, or raises :class:`ToolError`. Writes run inside the
harness's transaction, so a refusal half-way through changes nothing. The model
reads each tool's docstring's first paragraph and its arguments' schemas (from
the type hints); argument names are exactly those of tau2-bench's retail tasks,
so gold actions replay unchanged. :data:`TOOLS` lists them in the order the
model sees them.

Money follows tau2 exactly: Python floats, rounded to 2 dp only where tau2
rounds (gift-card balances, exchange differences), so replayed states hash the
same as tau2's own.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Annotated, Any

from rewardkit.envs.calculator import calculate
from rewardkit.envs.retail.db import order_dict, product_dict, user_dict, variant_dict
from rewardkit.envs.tool import ResultCode, ToolError, ToolSpec, tool, toolset

CANCEL_REASONS = ("no longer needed", "ordered by mistake")

OrderId = Annotated[str, "Order id, with the leading '#', e.g. '#W0000000'."]
UserId = Annotated[str, "User id, e.g. 'sara_doe_496'."]
PaymentId = Annotated[
    str, "Payment method id from the user's details, e.g. 'gift_card_0000000' or 'credit_card_0000000'."
]
ItemIds = Annotated[list[str], {"minItems": 1}]
NewItemIds = Annotated[list[str], {"minItems": 1, "description": "New item ids, position by position, same product."}]
Address1 = Annotated[str, "First address line, e.g. '123 Main St'."]
Address2 = Annotated[str, "Second address line, e.g. 'Apt 1', or ''."]
State = Annotated[str, "State code, e.g. 'CA'."]
Country = Annotated[str, "Country, e.g. 'USA'."]
Zip = Annotated[str, "Zip code, e.g. '12345'."]


def _order(conn: sqlite3.Connection, order_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, "Order not found")
    return row


def _payment_method(conn: sqlite3.Connection, user_id: str, method_id: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM payment_methods WHERE user_id = ? AND id = ?", (user_id, method_id)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, "Payment method not found")
    return row


def _variant(conn: sqlite3.Connection, product_id: str, item_id: str) -> sqlite3.Row:
    if conn.execute("SELECT 1 FROM products WHERE product_id = ?", (product_id,)).fetchone() is None:
        raise ToolError(ResultCode.NOT_FOUND, "Product not found")
    row = conn.execute("SELECT * FROM variants WHERE product_id = ? AND item_id = ?", (product_id, item_id)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, "Variant not found")
    return row


def _items(conn: sqlite3.Connection, order_id: str) -> list[sqlite3.Row]:
    return conn.execute("SELECT * FROM order_items WHERE order_id = ? ORDER BY position", (order_id,)).fetchall()


def _payments(conn: sqlite3.Connection, order_id: str) -> list[sqlite3.Row]:
    return conn.execute("SELECT * FROM payment_history WHERE order_id = ? ORDER BY position", (order_id,)).fetchall()


def _append_payment(conn: sqlite3.Connection, order_id: str, kind: str, amount: float, method_id: str) -> None:
    conn.execute(
        "INSERT INTO payment_history SELECT ?, COALESCE(MAX(position) + 1, 0), ?, ?, ? "
        "FROM payment_history WHERE order_id = ?",
        (order_id, kind, amount, method_id, order_id),
    )


def _add_to_gift_card(conn: sqlite3.Connection, method: sqlite3.Row, amount: float) -> None:
    """Credit (or debit, if negative) a gift card; no-op for other sources, as in tau2."""
    if method["source"] == "gift_card":
        balance = round(method["balance"] + amount, 2)
        if balance < 0:
            raise ToolError(ResultCode.INSUFFICIENT_FUNDS, "Insufficient gift card balance")
        conn.execute("UPDATE payment_methods SET balance = ? WHERE id = ?", (balance, method["id"]))


def _check_items_in_order(item_ids: list[str], items: list[sqlite3.Row], message: str) -> None:
    """Every id in ``item_ids`` must be in the order at least as often as it is listed."""
    have = Counter(i["item_id"] for i in items)
    for item_id, count in Counter(item_ids).items():
        if count > have[item_id]:
            raise ToolError(ResultCode.NOT_FOUND, message.format(item_id=item_id))


def _price_difference(conn: sqlite3.Connection, items: list[sqlite3.Row], pairs: list[tuple[str, str]]) -> tuple:
    """Sum of new - old prices (float, unrounded) and the last variant looked up."""
    diff: float = 0
    variant = None
    for item_id, new_item_id in pairs:
        item = next(i for i in items if i["item_id"] == item_id)
        variant = _variant(conn, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ToolError(ResultCode.PRECONDITION_FAILED, f"New item {new_item_id} not found or available")
        diff += variant["price"] - item["price"]
    return diff, variant


# -- read tools -------------------------------------------------------------------------------------------


@tool
def find_user_id_by_email(conn: sqlite3.Connection, email: str) -> str:
    """Look up a user id by email address (case-insensitive)."""
    wanted = email.lower()
    for row in conn.execute("SELECT user_id, email FROM users ORDER BY position"):
        if row["email"].lower() == wanted:
            return row["user_id"]
    raise ToolError(ResultCode.NOT_FOUND, "User not found")


@tool
def find_user_id_by_name_zip(conn: sqlite3.Connection, first_name: str, last_name: str, zip: str) -> str:
    """Look up a user id by first name, last name (case-insensitive) and zip code. Use it only when the user cannot
    give their email."""
    rows = conn.execute("SELECT user_id, first_name, last_name FROM users WHERE zip = ? ORDER BY position", (zip,))
    for row in rows:
        if row["first_name"].lower() == first_name.lower() and row["last_name"].lower() == last_name.lower():
            return row["user_id"]
    raise ToolError(ResultCode.NOT_FOUND, "User not found")


def _found(value: Any, what: str) -> Any:
    if value is None:
        raise ToolError(ResultCode.NOT_FOUND, f"{what} not found")
    return value


@tool
def get_user_details(conn: sqlite3.Connection, user_id: UserId) -> dict[str, Any]:
    """A user's profile: name, address, email, payment methods, order ids."""
    return _found(user_dict(conn, user_id), "User")


@tool
def get_order_details(conn: sqlite3.Connection, order_id: OrderId) -> dict[str, Any]:
    """An order's status, address, items, fulfillments and payments."""
    return _found(order_dict(conn, order_id), "Order")


@tool
def get_product_details(conn: sqlite3.Connection, product_id: str) -> dict[str, Any]:
    """A product and all its variants (item ids, options, availability, price). A product id is not an item id."""
    return _found(product_dict(conn, product_id), "Product")


@tool
def get_item_details(conn: sqlite3.Connection, item_id: str) -> dict[str, Any]:
    """One item (a product variant) by item id."""
    row = _found(conn.execute("SELECT * FROM variants WHERE item_id = ?", (item_id,)).fetchone(), "Item")
    return variant_dict(row)


@tool
def list_all_product_types(conn: sqlite3.Connection) -> str:
    """All product names with their product ids, as a JSON object."""
    names = {
        r["name"]: r["product_id"] for r in conn.execute("SELECT name, product_id FROM products ORDER BY position")
    }
    return json.dumps(names, sort_keys=True)


# -- generic tools (calculate is shared: src/rewardkit/envs/calculator.py) ----------------------------------------


@tool
def transfer_to_human_agents(conn: sqlite3.Connection, summary: str) -> str:
    """Hand the conversation to a human agent, with a summary. Only when the user asks for one or the request cannot
    be handled with these tools under the policy."""
    return "Transfer successful"


# -- write tools ------------------------------------------------------------------------------------------


@tool(risk="write")
def cancel_pending_order(
    conn: sqlite3.Connection, order_id: OrderId, reason: Annotated[str, {"enum": list(CANCEL_REASONS)}]
) -> dict[str, Any]:
    """Cancel a pending order and refund every payment (gift cards at once, other methods in 5-7 business days).
    Confirm with the user first."""
    order = _order(conn, order_id)
    if order["status"] != "pending":
        raise ToolError(ResultCode.PRECONDITION_FAILED, "Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError(ResultCode.INVALID_ARGUMENT, f"Invalid reason; use one of {list(CANCEL_REASONS)}")
    for payment in _payments(conn, order_id):  # one refund per payment, gift cards credited at once
        method = _payment_method(conn, order["user_id"], payment["payment_method_id"])
        _add_to_gift_card(conn, method, payment["amount"])
        _append_payment(conn, order_id, "refund", payment["amount"], payment["payment_method_id"])
    conn.execute("UPDATE orders SET status = 'cancelled', cancel_reason = ? WHERE order_id = ?", (reason, order_id))
    return get_order_details(conn, order_id)


def _swap_check(conn: sqlite3.Connection, order: sqlite3.Row, item_ids: list[str], new_item_ids: list[str]):
    items = _items(conn, order["order_id"])
    _check_items_in_order(item_ids, items, "{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolError(ResultCode.INVALID_ARGUMENT, "The number of items to be exchanged should match")
    return items


@tool(risk="write")
def exchange_delivered_order_items(
    conn: sqlite3.Connection,
    order_id: OrderId,
    item_ids: ItemIds,
    new_item_ids: NewItemIds,
    payment_method_id: PaymentId,
) -> dict[str, Any]:
    """Request an exchange of delivered items for other variants of the same products; the price difference is
    settled with the given payment method. Once per order. Confirm with the user first.

    Args:
        item_ids: Item ids to exchange; repeat an id to exchange several units.
    """
    order = _order(conn, order_id)
    if order["status"] != "delivered":
        raise ToolError(ResultCode.PRECONDITION_FAILED, "Non-delivered order cannot be exchanged")
    items = _swap_check(conn, order, item_ids, new_item_ids)
    diff = round(_price_difference(conn, items, list(zip(item_ids, new_item_ids, strict=True)))[0], 2)
    method = _payment_method(conn, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError(ResultCode.INSUFFICIENT_FUNDS, "Insufficient gift card balance to pay for the price difference")
    # Nothing is charged yet: the difference settles when the exchange is processed.
    conn.execute(
        "UPDATE orders SET status = 'exchange requested', exchange_items = ?, exchange_new_items = ?, "
        "exchange_payment_method_id = ?, exchange_price_difference = ? WHERE order_id = ?",
        (json.dumps(sorted(item_ids)), json.dumps(sorted(new_item_ids)), payment_method_id, diff, order_id),
    )
    return get_order_details(conn, order_id)


@tool(risk="write")
def return_delivered_order_items(
    conn: sqlite3.Connection, order_id: OrderId, item_ids: ItemIds, payment_method_id: PaymentId
) -> dict[str, Any]:
    """Request a return of delivered items, refunded to the original payment method or a gift card. Confirm with the
    user first.

    Args:
        item_ids: Item ids to return; repeat an id to return several units.
    """
    order = _order(conn, order_id)
    if order["status"] != "delivered":
        raise ToolError(ResultCode.PRECONDITION_FAILED, "Non-delivered order cannot be returned")
    method = _payment_method(conn, order["user_id"], payment_method_id)
    payments = _payments(conn, order_id)
    original = payments[0]["payment_method_id"] if payments else None
    if method["source"] != "gift_card" and payment_method_id != original:
        raise ToolError(
            ResultCode.PRECONDITION_FAILED, "Payment method should be the original payment method or a gift card"
        )
    _check_items_in_order(item_ids, _items(conn, order_id), "Some item not found")
    conn.execute(
        "UPDATE orders SET status = 'return requested', return_items = ?, return_payment_method_id = ? "
        "WHERE order_id = ?",
        (json.dumps(sorted(item_ids)), payment_method_id, order_id),
    )
    return get_order_details(conn, order_id)


_ADDRESS_SET = "address1 = ?, address2 = ?, city = ?, state = ?, country = ?, zip = ?"


@tool(risk="write")
def modify_pending_order_address(
    conn: sqlite3.Connection,
    order_id: OrderId,
    address1: Address1,
    address2: Address2,
    city: str,
    state: State,
    country: Country,
    zip: Zip,
) -> dict[str, Any]:
    """Change the shipping address of a pending order. Confirm with the user first."""
    order = _order(conn, order_id)
    if "pending" not in order["status"]:  # tau2: any pending state, "pending (item modified)" included
        raise ToolError(ResultCode.PRECONDITION_FAILED, "Non-pending order cannot be modified")
    conn.execute(
        f"UPDATE orders SET {_ADDRESS_SET} WHERE order_id = ?",
        (address1, address2, city, state, country, zip, order_id),
    )
    return get_order_details(conn, order_id)


@tool(risk="write")
def modify_pending_order_items(
    conn: sqlite3.Connection,
    order_id: OrderId,
    item_ids: ItemIds,
    new_item_ids: NewItemIds,
    payment_method_id: PaymentId,
) -> dict[str, Any]:
    """Swap items of a pending order for other variants of the same products; the difference is charged or refunded
    to the given payment method. Once per order. Confirm with the user first.

    Args:
        item_ids: Item ids to modify; repeat an id to modify several units.
    """
    order = _order(conn, order_id)
    if order["status"] != "pending":  # tau2: items can be modified once, so strictly "pending"
        raise ToolError(ResultCode.PRECONDITION_FAILED, "Non-pending order cannot be modified")
    items = _swap_check(conn, order, item_ids, new_item_ids)
    if any(old == new for old, new in zip(item_ids, new_item_ids, strict=True)):
        raise ToolError(ResultCode.INVALID_ARGUMENT, "The new item id should be different from the old item id")
    diff, last_variant = _price_difference(conn, items, list(zip(item_ids, new_item_ids, strict=True)))
    method = _payment_method(conn, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError(ResultCode.INSUFFICIENT_FUNDS, "Insufficient gift card balance to pay for the new item")
    _append_payment(conn, order_id, "payment" if diff > 0 else "refund", abs(diff), payment_method_id)
    _add_to_gift_card(conn, method, -diff)
    # As in tau2, each pair rewrites the first line whose *current* id matches, and every rewritten
    # line takes the price and options of the last new variant looked up (tau2's loop reuses that
    # variable; it only matters when several items change at once). Kept for state-hash parity.
    current = [i["item_id"] for i in items]
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        pos = current.index(item_id)
        current[pos] = new_item_id
        conn.execute(
            "UPDATE order_items SET item_id = ?, price = ?, options = ? WHERE order_id = ? AND position = ?",
            (new_item_id, last_variant["price"], last_variant["options"], order_id, items[pos]["position"]),
        )
    conn.execute("UPDATE orders SET status = 'pending (item modified)' WHERE order_id = ?", (order_id,))
    return get_order_details(conn, order_id)


@tool(risk="write")
def modify_pending_order_payment(
    conn: sqlite3.Connection, order_id: OrderId, payment_method_id: PaymentId
) -> dict[str, Any]:
    """Pay a pending order with another of the user's payment methods. Confirm with the user first."""
    order = _order(conn, order_id)
    if "pending" not in order["status"]:
        raise ToolError(ResultCode.PRECONDITION_FAILED, "Non-pending order cannot be modified")
    method = _payment_method(conn, order["user_id"], payment_method_id)
    payments = _payments(conn, order_id)
    if len(payments) != 1 or payments[0]["transaction_type"] != "payment":
        raise ToolError(ResultCode.PRECONDITION_FAILED, "There should be exactly one payment for a pending order")
    old_id, amount = payments[0]["payment_method_id"], payments[0]["amount"]
    if old_id == payment_method_id:
        raise ToolError(ResultCode.INVALID_ARGUMENT, "The new payment method should be different from the current one")
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise ToolError(ResultCode.INSUFFICIENT_FUNDS, "Insufficient gift card balance to pay for the order")
    _append_payment(conn, order_id, "payment", amount, payment_method_id)
    _append_payment(conn, order_id, "refund", amount, old_id)
    _add_to_gift_card(conn, method, -amount)
    _add_to_gift_card(conn, _payment_method(conn, order["user_id"], old_id), amount)
    return get_order_details(conn, order_id)


@tool(risk="write")
def modify_user_address(
    conn: sqlite3.Connection,
    user_id: UserId,
    address1: Address1,
    address2: Address2,
    city: str,
    state: State,
    country: Country,
    zip: Zip,
) -> dict[str, Any]:
    """Change a user's default address. Confirm with the user first."""
    cur = conn.execute(
        f"UPDATE users SET {_ADDRESS_SET} WHERE user_id = ?", (address1, address2, city, state, country, zip, user_id)
    )
    if cur.rowcount == 0:
        raise ToolError(ResultCode.NOT_FOUND, "User not found")
    return get_user_details(conn, user_id)


# The tools in the order the model reads them.
TOOLS: dict[str, ToolSpec] = toolset(
    find_user_id_by_email,
    find_user_id_by_name_zip,
    get_user_details,
    get_order_details,
    get_product_details,
    get_item_details,
    list_all_product_types,
    calculate,
    transfer_to_human_agents,
    cancel_pending_order,
    exchange_delivered_order_items,
    return_delivered_order_items,
    modify_pending_order_address,
    modify_pending_order_items,
    modify_pending_order_payment,
    modify_user_address,
)
