"""The livestream domain's gates, preconditions and idempotency on its real seed (R101 last switched at 20:27, the
clock is fixed at 20:30, the shop's minimum interval is 5 minutes, the platform's maximum discount 30%)."""

from __future__ import annotations

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.tool import ResultCode

DOMAIN = get_domain("livestream")


@pytest.fixture
def env():
    with DOMAIN.make_env(None) as env:
        yield env


def price(env, sku: str) -> int:
    return next(p["price_cents"] for p in env.export()["products"] if p["sku"] == sku)


def on_air(env, room_id: str) -> str | None:
    return next(r["on_air_sku"] for r in env.export()["rooms"] if r["room_id"] == room_id)


PRICE = "change_price"
COUPON = "issue_coupon"
SWITCH = "put_product_on_air"

GATED = [
    # soft: SP006 99.00 -> 89.00, inside the business range 79.00-109.00, above cost 72.00, a 10.1% cut
    (PRICE, {"sku": "SP006", "new_price": 89}, "APPROVAL_REQUIRED", "PRICE_CHANGE_NEEDS_APPROVAL"),
    # soft: R101 last switched at 20:27, now 20:30: 3 minutes < 5
    (SWITCH, {"room_id": "R101", "sku": "SP005"}, "APPROVAL_REQUIRED", "SWITCH_WITHIN_MIN_INTERVAL"),
    # hard: SP021 at 99.00 is below its cost 520.00
    (PRICE, {"sku": "SP021", "new_price": 99}, "HARD_GATE", "PRICE_BELOW_COST"),
    # hard: SP020 268.00 -> 180.00 cuts 88.00 = 32.8% > 30% (above cost 90.00)
    (PRICE, {"sku": "SP020", "new_price": 180}, "HARD_GATE", "PLATFORM_DISCOUNT_LIMIT"),
    # hard: SP018 79.00 -> 199.00 is over the business range's top, 89.00
    (PRICE, {"sku": "SP018", "new_price": 199}, "HARD_GATE", "PRICE_OUT_OF_RANGE"),
    # hard: SP003 59.00 -> 44.00 is under the range's bottom 45.00 (a 25.4% cut, above cost 21.00)
    (PRICE, {"sku": "SP003", "new_price": 44}, "HARD_GATE", "PRICE_OUT_OF_RANGE"),
    # hard: a coupon of 150.00 on SP013 at 329.00 is 45.6% > 30% (329 - 150 = 179 >= cost 165)
    (
        COUPON,
        {"room_id": "R102", "sku": "SP013", "discount": 150, "quantity": 50},
        "HARD_GATE",
        "PLATFORM_DISCOUNT_LIMIT",
    ),
    # hard: SP006 99.00 - a 28.00 coupon = 71.00 < cost 72.00 (28.3%, under the platform's 30%)
    (COUPON, {"room_id": "R103", "sku": "SP006", "discount": 28, "quantity": 500}, "HARD_GATE", "PRICE_BELOW_COST"),
    # both red lines: SP006 at 59.00 is below cost 72.00 and a 40.4% cut; the first declared rule names it
    (PRICE, {"sku": "SP006", "new_price": 59}, "HARD_GATE", "PRICE_BELOW_COST"),
]


@pytest.mark.parametrize(("tool", "arguments", "code", "rule"), GATED)
def test_each_gate_fires_where_it_should_and_writes_nothing(env, tool, arguments, code, rule) -> None:
    before = env.state_hash()
    result = env.call(tool, {**arguments, "idempotency_key": "k1"})
    assert (result.code.value, result.value["error"]["rule"]) == (code, rule)
    assert env.state_hash() == before
    assert len(env.pending_approvals()) == (1 if code == "APPROVAL_REQUIRED" else 0)  # a red line opens no request


def test_a_price_change_counts_the_largest_coupon_already_issued(env) -> None:
    cut = {"sku": "SP006", "new_price": 80, "idempotency_key": "p1"}
    # SP006 99.00 -> 80.00: in the range 79.00-109.00, a 19.2% cut, above cost 72.00: only the soft gate.
    assert env.call(PRICE, cut).code.value == "APPROVAL_REQUIRED"
    # A 10.00 coupon in R103 (99.00 - 10.00 = 89.00, 10.1% off): no gate.
    assert env.call(
        COUPON, {"room_id": "R103", "sku": "SP006", "discount": 10, "quantity": 100, "idempotency_key": "c1"}
    ).ok
    # Now a buyer would pay 80.00 - 10.00 = 70.00 < cost 72.00 (one coupon an order): a red line.
    result = env.call(PRICE, {**cut, "idempotency_key": "p2"})
    assert (result.code.value, result.value["error"]["rule"]) == ("HARD_GATE", "PRICE_BELOW_COST")
    assert price(env, "SP006") == 9900


FREE = [
    # SP001 89.00 - a 10.00 coupon = 79.00: 11.2% off, above cost 32.00: no gate
    (COUPON, {"room_id": "R101", "sku": "SP001", "discount": 10, "quantity": 100}),
    # R102 last switched at 20:10: 20 minutes >= 5
    (SWITCH, {"room_id": "R102", "sku": "SP016"}),
    # R106 has never switched
    (SWITCH, {"room_id": "R106", "sku": "SP017"}),
]


@pytest.mark.parametrize(("tool", "arguments"), FREE)
def test_ungated_writes_run_at_once(env, tool, arguments) -> None:
    assert env.call(tool, {**arguments, "idempotency_key": "k1"}).ok


@pytest.mark.parametrize(
    ("decision", "sku_price", "sku_on_air"),
    [("approve_request", 8900, "SP005"), ("decline_request", 9900, "SP002")],
)
def test_soft_gates_run_once_approved_and_never_declined(env, decision, sku_price, sku_on_air) -> None:
    calls = [
        (PRICE, {"sku": "SP006", "new_price": 89, "idempotency_key": "p"}),
        (SWITCH, {"room_id": "R101", "sku": "SP005", "idempotency_key": "s"}),
    ]
    for tool, arguments in calls:
        request = env.call(tool, arguments).value["error"]["request_id"]
        assert env.user_call(decision, {"request_id": request}).ok
        assert env.call(tool, arguments).ok is (decision == "approve_request")
    assert (price(env, "SP006"), on_air(env, "R101")) == (sku_price, sku_on_air)


def test_a_switch_made_now_gates_the_next_one_in_that_room(env) -> None:
    assert env.call(SWITCH, {"room_id": "R102", "sku": "SP016", "idempotency_key": "a"}).ok
    again = env.call(SWITCH, {"room_id": "R102", "sku": "SP015", "idempotency_key": "b"})  # 0 minutes < 5
    assert again.code is ResultCode.APPROVAL_REQUIRED and on_air(env, "R102") == "SP016"


def test_the_same_key_applies_once_and_refuses_other_arguments(env) -> None:
    first = {"room_id": "R102", "sku": "SP016", "idempotency_key": "same"}
    assert env.call(SWITCH, first).ok
    assert env.call(SWITCH, first).ok  # a retry: the stored result, no second switch (which the gate would hold)
    history = [h for h in env.export()["on_air_history"] if h["room_id"] == "R102"]
    assert len(history) == 3  # 19:35, 20:10 and the one switch at 20:30
    conflict = env.call(SWITCH, {**first, "sku": "SP015"})
    assert conflict.code is ResultCode.IDEMPOTENCY_CONFLICT and on_air(env, "R102") == "SP016"
    coupon = {"room_id": "R101", "sku": "SP001", "discount": 10, "quantity": 100, "idempotency_key": "c"}
    assert env.call(COUPON, coupon).value["coupon_id"] == env.call(COUPON, coupon).value["coupon_id"] == "C003"
    assert len(env.export()["coupons"]) == 3  # C001, C002 and one C003


PRECONDITIONS = [
    ("get_product", {"sku": "SP999"}, "NOT_FOUND"),
    ("get_live_room", {"room_id": "R999"}, "NOT_FOUND"),
    (SWITCH, {"room_id": "R106", "sku": "SP004"}, "PRECONDITION_FAILED"),  # SP004 is not in R106's list
    (SWITCH, {"room_id": "R103", "sku": "SP006"}, "PRECONDITION_FAILED"),  # R103 has not started
    (SWITCH, {"room_id": "R102", "sku": "SP014"}, "PRECONDITION_FAILED"),  # already on air
    ("write_cue_card", {"room_id": "R104", "sku": "SP018", "content": "x"}, "PRECONDITION_FAILED"),  # R104 ended
    ("enable_smart_titles", {"room_id": "R102"}, "PRECONDITION_FAILED"),  # already on
    (PRICE, {"sku": "SP006", "new_price": 89.999}, "INVALID_ARGUMENT"),  # three decimals
    (PRICE, {"sku": "SP006", "new_price": 99}, "INVALID_ARGUMENT"),  # the price it has
    ("create_live_room", {"title": "x", "scheduled_start": "2024-06-18 20:00"}, "PRECONDITION_FAILED"),  # past
    ("create_live_room", {"title": "x", "scheduled_start": "2024-13-01 20:00"}, "INVALID_ARGUMENT"),
    (PRICE, {"sku": "SP006", "new_price": 89, "approved": True}, "SCHEMA_VIOLATION"),  # no argument approves
]


@pytest.mark.parametrize(("tool", "arguments", "code"), PRECONDITIONS)
def test_refusals_are_structured_codes(env, tool, arguments, code) -> None:
    write = tool in DOMAIN.write_tools
    result = env.call(tool, {**arguments, **({"idempotency_key": "k"} if write else {})})
    assert result.code.value == code


def test_a_sold_out_product_cannot_go_on_air(env) -> None:
    assert env.call("sync_session_products", {"room_id": "R106", "session_id": "S240616"}).value["added"] == [
        "SP004",
        "SP009",
    ]  # SP017 and SP018 were already there
    refused = env.call(SWITCH, {"room_id": "R106", "sku": "SP004"})
    assert refused.code is ResultCode.PRECONDITION_FAILED and "已售罄" in refused.value["error"]["message"]
