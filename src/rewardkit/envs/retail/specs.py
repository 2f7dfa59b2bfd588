"""The retail tools' declarations: JSON Schemas, risk levels, descriptions for the model.

Argument names are exactly those of tau2-bench's retail tasks, so gold actions
replay unchanged. Every write tool also accepts an optional ``idempotency_key``.
"""

from __future__ import annotations

from typing import Any

from rewardkit.envs.calculator import calculate
from rewardkit.envs.retail import tools
from rewardkit.envs.tool import ToolSpec, declare

_ORDER_ID = {"type": "string", "description": "Order id, with the leading '#', e.g. '#W0000000'."}
_USER_ID = {"type": "string", "description": "User id, e.g. 'sara_doe_496'."}
_ITEM_IDS = {"type": "array", "items": {"type": "string"}, "minItems": 1}
_PAYMENT_ID = {
    "type": "string",
    "description": "Payment method id from the user's details, e.g. 'gift_card_0000000' or 'credit_card_0000000'.",
}
_ADDRESS = {
    "address1": {"type": "string", "description": "First address line, e.g. '123 Main St'."},
    "address2": {"type": "string", "description": "Second address line, e.g. 'Apt 1', or ''."},
    "city": {"type": "string"},
    "state": {"type": "string", "description": "State code, e.g. 'CA'."},
    "country": {"type": "string", "description": "Country, e.g. 'USA'."},
    "zip": {"type": "string", "description": "Zip code, e.g. '12345'."},
}


def _swap(verb: str) -> dict[str, Any]:
    """Arguments shared by the exchange and modify-items tools."""
    return {
        "order_id": _ORDER_ID,
        "item_ids": {**_ITEM_IDS, "description": f"Item ids to {verb}; repeat an id to {verb} several units."},
        "new_item_ids": {**_ITEM_IDS, "description": "New item ids, position by position, same product."},
        "payment_method_id": _PAYMENT_ID,
    }


_SPECS = [
    declare(
        tools.find_user_id_by_email,
        "Look up a user id by email address (case-insensitive).",
        email={"type": "string"},
    ),
    declare(
        tools.find_user_id_by_name_zip,
        "Look up a user id by first name, last name (case-insensitive) and zip code. "
        "Use it only when the user cannot give their email.",
        first_name={"type": "string"},
        last_name={"type": "string"},
        zip={"type": "string"},
    ),
    declare(
        tools.get_user_details,
        "A user's profile: name, address, email, payment methods, order ids.",
        user_id=_USER_ID,
    ),
    declare(
        tools.get_order_details,
        "An order's status, address, items, fulfillments and payments.",
        order_id=_ORDER_ID,
    ),
    declare(
        tools.get_product_details,
        "A product and all its variants (item ids, options, availability, price). A product id is not an item id.",
        product_id={"type": "string"},
    ),
    declare(tools.get_item_details, "One item (a product variant) by item id.", item_id={"type": "string"}),
    declare(tools.list_all_product_types, "All product names with their product ids, as a JSON object."),
    declare(
        calculate,
        "Evaluate arithmetic on numbers with + - * / and parentheses; the result is rounded to 2 decimals.",
        expression={"type": "string", "description": "e.g. '(19.99 + 5) * 2'."},
    ),
    declare(
        tools.transfer_to_human_agents,
        "Hand the conversation to a human agent, with a summary. Only when the user asks for one "
        "or the request cannot be handled with these tools under the policy.",
        summary={"type": "string"},
    ),
    declare(
        tools.cancel_pending_order,
        "Cancel a pending order and refund every payment (gift cards at once, other methods in 5-7 "
        "business days). Confirm with the user first.",
        write=True,
        order_id=_ORDER_ID,
        reason={"type": "string", "enum": list(tools.CANCEL_REASONS)},
    ),
    declare(
        tools.exchange_delivered_order_items,
        "Request an exchange of delivered items for other variants of the same products; the price "
        "difference is settled with the given payment method. Once per order. Confirm with the user first.",
        write=True,
        **_swap("exchange"),
    ),
    declare(
        tools.return_delivered_order_items,
        "Request a return of delivered items, refunded to the original payment method or a gift card. "
        "Confirm with the user first.",
        write=True,
        order_id=_ORDER_ID,
        item_ids={**_ITEM_IDS, "description": "Item ids to return; repeat an id to return several units."},
        payment_method_id=_PAYMENT_ID,
    ),
    declare(
        tools.modify_pending_order_address,
        "Change the shipping address of a pending order. Confirm with the user first.",
        write=True,
        order_id=_ORDER_ID,
        **_ADDRESS,
    ),
    declare(
        tools.modify_pending_order_items,
        "Swap items of a pending order for other variants of the same products; the difference is "
        "charged or refunded to the given payment method. Once per order. Confirm with the user first.",
        write=True,
        **_swap("modify"),
    ),
    declare(
        tools.modify_pending_order_payment,
        "Pay a pending order with another of the user's payment methods. Confirm with the user first.",
        write=True,
        order_id=_ORDER_ID,
        payment_method_id=_PAYMENT_ID,
    ),
    declare(
        tools.modify_user_address,
        "Change a user's default address. Confirm with the user first.",
        write=True,
        user_id=_USER_ID,
        **_ADDRESS,
    ),
]

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}
