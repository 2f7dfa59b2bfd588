"""The retail tools: tau2 semantics, on hand-picked orders of the vendored db.json."""

from __future__ import annotations

from typing import Any

import pytest

from rewardkit.envs import get_domain, make_env
from rewardkit.envs.harness import ToolEnvironment
from rewardkit.envs.retail.tools import TOOLS
from rewardkit.envs.tool import ResultCode

# Orders of the vendored db.json, by what the tests need of them.
PENDING_GIFT = "#W6779827"  # ethan_lopez_6291, 4079.45 paid by gift_card_7219486 (balance 49.0)
PENDING_CARD = "#W5918442"  # sofia_rossi_8776, credit_card_5051208; two Action Cameras
PROCESSED = "#W2611340"
DELIVERED_GIFT = "#W4817420"  # ava_moore_2033, gift_card_8168843 (balance 69.0)
DELIVERED_PAYPAL = "#W1840144"  # harper_brown_7363, paypal_2306935; two 8590708195 jackets


@pytest.fixture
def env() -> ToolEnvironment:
    return make_env("retail")


def order(env: ToolEnvironment, order_id: str) -> dict[str, Any]:
    return env.call("get_order_details", {"order_id": order_id}).value


def refused_without_writing(env: ToolEnvironment, tool: str, arguments: dict[str, Any]) -> ResultCode:
    """The call's code, after checking that the call left the state as it was."""
    before = env.state_hash()
    code = env.call(tool, arguments).code
    assert env.state_hash() == before
    return code


def balance(env: ToolEnvironment, user_id: str, method_id: str) -> float:
    return env.call("get_user_details", {"user_id": user_id}).value["payment_methods"][method_id]["balance"]


class TestDeclarations:
    READS = frozenset(
        {
            "find_user_id_by_email",
            "find_user_id_by_name_zip",
            "get_user_details",
            "get_order_details",
            "get_product_details",
            "get_item_details",
            "list_all_product_types",
            "calculate",
            "transfer_to_human_agents",
        }
    )
    WRITES = frozenset(
        {
            "cancel_pending_order",
            "exchange_delivered_order_items",
            "return_delivered_order_items",
            "modify_pending_order_address",
            "modify_pending_order_items",
            "modify_pending_order_payment",
            "modify_user_address",
        }
    )

    def test_each_tool_with_its_risk(self) -> None:
        assert {n for n, s in TOOLS.items() if s.risk == "read"} == self.READS
        assert {n for n, s in TOOLS.items() if s.risk == "write"} == self.WRITES

    def test_openai_specs_match_the_gold_argument_names(self) -> None:
        from rewardkit.envs.retail.domain import tasks

        specs = {s["function"]["name"]: s["function"]["parameters"] for s in get_domain("retail").tool_specs()}
        for task in tasks().values():
            for action in task["evaluation_criteria"]["actions"]:
                assert set(action["arguments"]) == set(specs[action["name"]]["required"]), action

    def test_only_writes_take_an_idempotency_key(self) -> None:
        for spec in TOOLS.values():
            assert ("idempotency_key" in spec.parameters["properties"]) == (spec.risk == "write")
            assert "idempotency_key" not in spec.parameters["required"]


class TestReads:
    @pytest.mark.parametrize(
        ("tool", "arguments", "code", "value"),
        [
            ("find_user_id_by_email", {"email": "sofia.rossi2645@example.com"}, ResultCode.OK, "sofia_rossi_8776"),
            ("find_user_id_by_email", {"email": "SOFIA.ROSSI2645@EXAMPLE.COM"}, ResultCode.OK, "sofia_rossi_8776"),
            ("find_user_id_by_email", {"email": "nobody@example.com"}, ResultCode.NOT_FOUND, None),
            (
                "find_user_id_by_name_zip",
                {"first_name": "yusuf", "last_name": "ROSSI", "zip": "19122"},
                ResultCode.OK,
                "yusuf_rossi_9620",
            ),
            # the zip must match exactly
            (
                "find_user_id_by_name_zip",
                {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19123"},
                ResultCode.NOT_FOUND,
                None,
            ),
            ("get_order_details", {"order_id": "W6779827"}, ResultCode.NOT_FOUND, None),  # the '#' matters
            # an item id, not a product
            ("get_product_details", {"product_id": "6700049080"}, ResultCode.NOT_FOUND, None),
            ("calculate", {"expression": "(19.99 + 5) * 2"}, ResultCode.OK, "49.98"),
            ("calculate", {"expression": "1 / 3"}, ResultCode.OK, "0.33"),  # rounded to 2 dp
            ("calculate", {"expression": "1 / 0"}, ResultCode.INVALID_ARGUMENT, None),
            ("calculate", {"expression": "__import__('os')"}, ResultCode.INVALID_ARGUMENT, None),
            ("calculate", {"expression": "2 ** 999999"}, ResultCode.INVALID_ARGUMENT, None),  # no power operator
            ("calculate", {"expression": "((("}, ResultCode.INVALID_ARGUMENT, None),
            ("transfer_to_human_agents", {"summary": "wants a human"}, ResultCode.OK, "Transfer successful"),
        ],
    )
    def test_table(self, env: ToolEnvironment, tool: str, arguments: dict, code: ResultCode, value: Any) -> None:
        result = env.call(tool, arguments)
        assert result.code is code, result.value
        if value is not None:
            assert result.value == value

    def test_item_details_search_every_product(self, env: ToolEnvironment) -> None:
        item = env.call("get_item_details", {"item_id": "6700049080"}).value
        assert item == {"item_id": "6700049080", "options": item["options"], "available": True, "price": 466.75}

    def test_product_types_are_a_sorted_name_to_id_json_string(self, env: ToolEnvironment) -> None:
        import json

        text = env.call("list_all_product_types", {}).value
        types = json.loads(text)
        assert len(types) == 50 and list(types) == sorted(types) and types["Action Camera"] == "3377618313"


class TestWrites:
    def test_cancel_refunds_a_gift_card_at_once(self, env: ToolEnvironment) -> None:
        result = env.call("cancel_pending_order", {"order_id": PENDING_GIFT, "reason": "no longer needed"})
        assert result.ok
        o = order(env, PENDING_GIFT)
        assert o["status"] == "cancelled" and o["cancel_reason"] == "no longer needed"
        assert o["payment_history"][-1] == {
            "transaction_type": "refund",
            "amount": 4079.45,
            "payment_method_id": "gift_card_7219486",
        }
        assert balance(env, "ethan_lopez_6291", "gift_card_7219486") == round(49.0 + 4079.45, 2)  # 4128.45

    @pytest.mark.parametrize(
        ("arguments", "code"),
        [
            ({"order_id": PROCESSED, "reason": "no longer needed"}, ResultCode.PRECONDITION_FAILED),
            ({"order_id": PENDING_GIFT, "reason": "changed my mind"}, ResultCode.SCHEMA_VIOLATION),  # enum
            ({"order_id": "#W0000000", "reason": "ordered by mistake"}, ResultCode.NOT_FOUND),
        ],
    )
    def test_cancel_refusals_change_nothing(self, env: ToolEnvironment, arguments: dict, code: ResultCode) -> None:
        assert refused_without_writing(env, "cancel_pending_order", arguments) is code

    def test_modify_items_charges_the_unrounded_difference_and_copies_the_last_variant(
        self, env: ToolEnvironment
    ) -> None:
        args = {
            "order_id": PENDING_CARD,
            "item_ids": ["1586641416", "6117189161"],
            "new_item_ids": ["6700049080", "7523669277"],
            "payment_method_id": "credit_card_5051208",
        }
        assert env.call("modify_pending_order_items", args).ok
        o = order(env, PENDING_CARD)
        diff = 0 + (466.75 - 497.39) + (523.66 - 481.5)  # tau2 sums floats and does not round: 11.52 (ish)
        assert o["payment_history"][-1] == {
            "transaction_type": "payment",
            "amount": abs(diff),
            "payment_method_id": "credit_card_5051208",
        }
        assert o["status"] == "pending (item modified)"
        cameras = [i for i in o["items"] if i["product_id"] == "3377618313"]
        assert [i["item_id"] for i in cameras] == ["6700049080", "7523669277"]
        # tau2 parity: both modified lines carry the price of the last variant looked up (523.66)
        assert [i["price"] for i in cameras] == [523.66, 523.66]
        # items can be modified once: the status is no longer exactly "pending"
        again = {**args, "item_ids": ["6700049080"], "new_item_ids": ["5925362855"]}
        assert env.call("modify_pending_order_items", again).code is ResultCode.PRECONDITION_FAILED
        # ... but the address can still change ("pending" in the status)
        address = {
            "address1": "1 Main St",
            "address2": "",
            "city": "Austin",
            "state": "TX",
            "country": "USA",
            "zip": "78701",
        }
        assert env.call("modify_pending_order_address", {"order_id": PENDING_CARD, **address}).ok
        assert order(env, PENDING_CARD)["address"] == address

    @pytest.mark.parametrize(
        ("item_ids", "new_item_ids", "code"),
        [
            (["1586641416"], ["1586641416"], ResultCode.INVALID_ARGUMENT),  # same item
            (["1586641416"], ["4859937227"], ResultCode.PRECONDITION_FAILED),  # variant not available
            (["1586641416"], ["8590708195"], ResultCode.NOT_FOUND),  # a jacket is not an Action Camera variant
            (["1586641416", "1586641416"], ["6700049080", "6700049080"], ResultCode.NOT_FOUND),  # only one in the order
            (["1586641416"], ["6700049080", "7523669277"], ResultCode.INVALID_ARGUMENT),  # lengths differ
        ],
    )
    def test_modify_items_refusals(
        self, env: ToolEnvironment, item_ids: list, new_item_ids: list, code: ResultCode
    ) -> None:
        args = {
            "order_id": PENDING_CARD,
            "item_ids": item_ids,
            "new_item_ids": new_item_ids,
            "payment_method_id": "credit_card_5051208",
        }
        assert refused_without_writing(env, "modify_pending_order_items", args) is code

    def test_modify_payment_moves_money_between_gift_card_and_card(self, env: ToolEnvironment) -> None:
        args = {"order_id": PENDING_GIFT, "payment_method_id": "credit_card_9789590"}
        assert env.call("modify_pending_order_payment", args).ok
        history = order(env, PENDING_GIFT)["payment_history"]
        assert [(p["transaction_type"], p["payment_method_id"]) for p in history] == [
            ("payment", "gift_card_7219486"),
            ("payment", "credit_card_9789590"),
            ("refund", "gift_card_7219486"),
        ]
        assert balance(env, "ethan_lopez_6291", "gift_card_7219486") == 4128.45  # 49.0 + 4079.45
        # now two payments: a second change is refused
        back = {"order_id": PENDING_GIFT, "payment_method_id": "gift_card_7219486"}
        assert env.call("modify_pending_order_payment", back).code is ResultCode.PRECONDITION_FAILED

    def test_exchange_records_the_rounded_difference_without_charging(self, env: ToolEnvironment) -> None:
        # Action Camera 6700049080 (466.75) -> 9391733462 (521.07): round(54.32, 2), covered by the 69.0 gift card
        args = {
            "order_id": DELIVERED_GIFT,
            "item_ids": ["6700049080"],
            "new_item_ids": ["9391733462"],
            "payment_method_id": "gift_card_8168843",
        }
        result = env.call("exchange_delivered_order_items", args)
        assert result.ok and result.value["status"] == "exchange requested"
        assert result.value["exchange_price_difference"] == 54.32
        assert result.value["exchange_new_items"] == ["9391733462"]
        assert len(result.value["payment_history"]) == 1  # settled later, not now
        assert balance(env, "ava_moore_2033", "gift_card_8168843") == 69.0

    @pytest.mark.parametrize(
        ("item_ids", "new_item_ids", "code"),
        [
            # Bookshelf 4900661478 (463.04) -> 1768466237 (549.84): +86.80 > 69.0 on the gift card
            (["4900661478"], ["1768466237"], ResultCode.INSUFFICIENT_FUNDS),
            (["6700049080"], ["5436236388"], ResultCode.PRECONDITION_FAILED),  # unavailable variant
            (["6700049080"], ["0000000000"], ResultCode.NOT_FOUND),
        ],
    )
    def test_exchange_refusals(
        self, env: ToolEnvironment, item_ids: list, new_item_ids: list, code: ResultCode
    ) -> None:
        args = {
            "order_id": DELIVERED_GIFT,
            "item_ids": item_ids,
            "new_item_ids": new_item_ids,
            "payment_method_id": "gift_card_8168843",
        }
        assert refused_without_writing(env, "exchange_delivered_order_items", args) is code

    def test_return_to_original_method_or_gift_card_only(self, env: ToolEnvironment) -> None:
        other = {"order_id": DELIVERED_PAYPAL, "item_ids": ["8590708195"], "payment_method_id": "credit_card_3240550"}
        assert env.call("return_delivered_order_items", other).code is ResultCode.PRECONDITION_FAILED
        three = {**other, "item_ids": ["8590708195"] * 3, "payment_method_id": "paypal_2306935"}
        assert env.call("return_delivered_order_items", three).code is ResultCode.NOT_FOUND  # only two in the order
        two = {**three, "item_ids": ["8590708195", "6534134392", "8590708195"]}
        result = env.call("return_delivered_order_items", two)
        assert result.ok and result.value["status"] == "return requested"
        assert result.value["return_items"] == ["6534134392", "8590708195", "8590708195"]  # sorted
        assert (
            env.call("return_delivered_order_items", two).code is ResultCode.PRECONDITION_FAILED
        )  # no longer delivered

    def test_modify_user_address(self, env: ToolEnvironment) -> None:
        address = {
            "address1": "9 Elm",
            "address2": "Unit 2",
            "city": "Reno",
            "state": "NV",
            "country": "USA",
            "zip": "89501",
        }
        assert env.call("modify_user_address", {"user_id": "sofia_rossi_8776", **address}).value["address"] == address
        assert env.call("modify_user_address", {"user_id": "nobody_1", **address}).code is ResultCode.NOT_FOUND
