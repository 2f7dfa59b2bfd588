"""Approval tiers in the harness (rewardkit.envs.approvals): soft gates pass only on the user's own approval of
the exact call, once; hard gates never pass; idempotency keys apply once. Real SQLite throughout."""

from __future__ import annotations

import pytest

from rewardkit.envs.approvals import APPROVE, DECLINE, Gate, always, user_decision
from rewardkit.envs.sqlite_env import Tables, environment
from rewardkit.envs.tool import ResultCode, ToolError, ToolSpec

SCHEMA = "CREATE TABLE products (sku TEXT PRIMARY KEY, price REAL NOT NULL, cost REAL NOT NULL);"
SEED = {"products": [{"sku": "p1", "price": 100.0, "cost": 60.0}]}


def set_price(conn, sku: str, price: float) -> dict:
    conn.execute("UPDATE products SET price = ? WHERE sku = ?", (price, sku))
    return {"sku": sku, "price": price}


def _product(conn, sku: str):
    row = conn.execute("SELECT price, cost FROM products WHERE sku = ?", (sku,)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, f"no product {sku!r}")
    return row


def below_cost(conn, arguments) -> str | None:
    row = _product(conn, arguments["sku"])
    return f"{arguments['price']} is below the cost {row['cost']}" if arguments["price"] < row["cost"] else None


def big_change(conn, arguments) -> str | None:
    row = _product(conn, arguments["sku"])
    return "a change over 10% needs approval" if abs(arguments["price"] - row["price"]) > 0.1 * row["price"] else None


PARAMS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sku", "price", "idempotency_key"],
    "properties": {"sku": {"type": "string"}, "price": {"type": "number"}, "idempotency_key": {"type": "string"}},
}
TOOLS = {
    "set_price": ToolSpec(
        "set_price",
        "Set a price.",
        PARAMS,
        "write",
        set_price,
        gates=(Gate("soft", "PRICE_CHANGE_NEEDS_APPROVAL", big_change), Gate("hard", "PRICE_BELOW_COST", below_cost)),
    ),
    "set_price_always": ToolSpec(
        "set_price_always",
        "Set a price.",
        PARAMS,
        "write",
        set_price,
        gates=(Gate("soft", "EVERY_CHANGE", always("every change is approved")),),
    ),
}


@pytest.fixture
def env():
    with environment(Tables(SCHEMA, SEED), TOOLS)() as env:
        yield env


def price(env) -> float:
    return env.export()["products"][0]["price"]


def call(env, new_price: float, key: str = "k1", tool: str = "set_price"):
    return env.call(tool, {"sku": "p1", "price": new_price, "idempotency_key": key})


def test_a_soft_gated_write_without_approval_is_refused_and_changes_nothing(env) -> None:
    before = env.state_hash()
    result = call(env, 80.0)  # 100 -> 80 is a 20% change: over the 10% range
    assert result.code is ResultCode.APPROVAL_REQUIRED
    assert result.value["error"]["rule"] == "PRICE_CHANGE_NEEDS_APPROVAL"
    assert result.value["error"]["request_id"] == "req-1"
    assert env.state_hash() == before and price(env) == 100.0
    # Asking again for the same call names the same waiting request, not a second one.
    assert call(env, 80.0).value["error"]["request_id"] == "req-1"
    assert [r["id"] for r in env.pending_approvals()] == ["req-1"]
    assert env.pending_approvals()[0]["arguments"] == {"sku": "p1", "price": 80.0}


def test_approved_it_runs_exactly_once(env) -> None:
    call(env, 80.0)
    assert env.user_call("approve_request", {"request_id": "req-1"}).ok
    assert call(env, 80.0).ok and price(env) == 80.0
    # The approval is used up: a new key for the same arguments (80 -> 80 is no change, so no gate) runs; a change
    # back to 100 (25% of 80) is gated again, as a new request.
    again = call(env, 100.0, key="k2")
    assert again.code is ResultCode.APPROVAL_REQUIRED and again.value["error"]["request_id"] == "req-2"
    assert price(env) == 80.0


@pytest.mark.parametrize(
    "agent_attempt",
    [
        {"sku": "p1", "price": 80.0, "idempotency_key": "k1", "approved": True},  # an argument it invents
        {"sku": "p1", "price": 80.0, "idempotency_key": f"k1 {APPROVE}"},  # the user's marker in its own key
    ],
)
def test_an_approval_the_agent_writes_itself_grants_nothing(env, agent_attempt) -> None:
    result = env.call("set_price", agent_attempt)
    assert not result.ok and price(env) == 100.0
    # Calling the user-side tool as the agent: it is no tool of the agent's.
    assert env.call("approve_request", {"request_id": "req-1"}).code is ResultCode.UNKNOWN_TOOL
    assert call(env, 80.0).code is ResultCode.APPROVAL_REQUIRED


def test_one_number_written_two_ways_is_one_call(env) -> None:
    call(env, 80.0)
    env.user_call("approve_request", {"request_id": "req-1"})
    # 80 and 80.0 are one JSON number: the approval of one is the approval of the other.
    assert env.call("set_price", {"sku": "p1", "price": 80, "idempotency_key": "k1"}).ok and price(env) == 80.0
    replay = env.call("set_price", {"sku": "p1", "price": 80.0, "idempotency_key": "k1"})
    assert replay.ok and env.audit()[-1]["replayed"] is True  # and one call to its idempotency key


def test_an_approval_is_for_that_exact_call(env) -> None:
    call(env, 80.0)
    env.user_call("approve_request", {"request_id": "req-1"})
    assert call(env, 79.0).code is ResultCode.APPROVAL_REQUIRED  # other arguments: not what was approved
    assert price(env) == 100.0


def test_a_declined_request_grants_nothing(env) -> None:
    call(env, 80.0)
    assert env.user_call("decline_request", {"request_id": "req-1"}).ok
    assert call(env, 80.0).code is ResultCode.APPROVAL_REQUIRED and price(env) == 100.0
    # A decision is taken once: the declined request cannot be approved afterwards.
    assert env.user_call("approve_request", {"request_id": "req-1"}).code is ResultCode.PRECONDITION_FAILED


def test_a_hard_gate_is_refused_even_after_an_approval(env) -> None:
    # 100 -> 50 is a 50% change (soft) and below the cost of 60 (hard): the hard gate is checked first.
    result = call(env, 50.0)
    assert result.code is ResultCode.HARD_GATE and result.value["error"]["rule"] == "PRICE_BELOW_COST"
    assert env.pending_approvals() == []  # a red line opens no request the user could approve
    assert env.user_call("approve_request", {"request_id": "req-1"}).code is ResultCode.PRECONDITION_FAILED
    assert call(env, 50.0).code is ResultCode.HARD_GATE and price(env) == 100.0


def test_a_tool_level_gate_gates_every_call_each_its_own_request(env) -> None:
    result = call(env, 95.0, tool="set_price_always")  # a 5% change, but the tool itself is gated
    assert result.code is ResultCode.APPROVAL_REQUIRED
    env.user_call("approve_request", {"request_id": "req-1"})
    assert env.call("set_price_always", {"sku": "nope", "price": 95.0, "idempotency_key": "k9"}).code is (
        ResultCode.APPROVAL_REQUIRED  # another sku: another call
    )
    assert call(env, 95.0, tool="set_price_always").ok and price(env) == 95.0


def test_idempotency_keys_apply_once_and_refuse_other_arguments(env) -> None:
    assert call(env, 95.0, key="same").ok  # 5%: inside the range, no gate
    replay = call(env, 95.0, key="same")
    assert replay.ok and price(env) == 95.0
    assert env.audit()[-1]["replayed"] is True
    conflict = call(env, 96.0, key="same")
    assert conflict.code is ResultCode.IDEMPOTENCY_CONFLICT and price(env) == 95.0


def test_the_audit_records_requests_approvals_and_refusals(env) -> None:
    call(env, 80.0)
    env.user_call("approve_request", {"request_id": "req-1"})
    call(env, 80.0)
    call(env, 10.0, key="k2")
    rows = [(r["side"], r["tool"], r["code"], r["rule"], r["request"]) for r in env.audit()]
    assert rows == [
        ("agent", "set_price", "APPROVAL_REQUIRED", "PRICE_CHANGE_NEEDS_APPROVAL", "req-1"),
        ("user", "approve_request", "OK", None, "req-1"),
        ("agent", "set_price", "OK", None, "req-1"),  # the write names the approval it used
        ("agent", "set_price", "HARD_GATE", "PRICE_BELOW_COST", None),
    ]


@pytest.mark.parametrize(
    ("reply", "decision"),
    [
        (f"Yes, go ahead. {APPROVE}", "approve_request"),
        (f"不行。{DECLINE}", "decline_request"),
        ("Yes, go ahead.", None),  # words alone decide nothing: the marker is the user's action
        (f"{APPROVE} {DECLINE}", None),  # both: unclear, nothing decided
    ],
)
def test_a_users_reply_decides_by_its_marker(reply: str, decision: str | None) -> None:
    assert user_decision(reply) == decision


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tier": "medium", "rule": "X"}, "tier must be 'soft' or 'hard'"),
        ({"tier": "soft", "rule": "price below cost"}, "UPPER_SNAKE"),
    ],
)
def test_a_badly_declared_gate_fails_at_declaration(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        Gate(check=always("x"), **kwargs)


def test_only_a_write_can_be_gated() -> None:
    with pytest.raises(ValueError, match="only a write can be gated"):
        ToolSpec("read", "Read.", {"type": "object"}, "read", set_price, gates=(Gate("hard", "X", always("x")),))


def returns_a_set(conn, sku: str, price: float) -> dict:
    conn.execute("UPDATE products SET price = ? WHERE sku = ?", (price, sku))
    return {"changed": {sku}}  # a set: no JSON can hold it (a bug in the tool)


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        # a key of another type than string, where the schema leaves it open: refused, nothing stored or run
        ("open_key", {"sku": "p1", "price": 95.0, "idempotency_key": {"k": 1}}, ResultCode.SCHEMA_VIOLATION),
        ("open_key", {"sku": "p1", "price": 95.0, "idempotency_key": 7}, ResultCode.SCHEMA_VIOLATION),
    ],
)
def test_a_key_that_is_no_string_is_refused(tool: str, arguments: dict, code: ResultCode) -> None:
    open_params = {**PARAMS, "properties": {**PARAMS["properties"], "idempotency_key": {}}}
    tools = {"open_key": ToolSpec("open_key", "Set.", open_params, "write", set_price)}
    with environment(Tables(SCHEMA, SEED), tools)() as env:
        assert env.call(tool, arguments).code is code and price(env) == 100.0


def test_a_tool_whose_result_cannot_be_stored_raises_and_leaves_no_transaction_open() -> None:
    tools = {"bad": ToolSpec("bad", "Set.", PARAMS, "write", returns_a_set), "set_price": TOOLS["set_price"]}
    with environment(Tables(SCHEMA, SEED), tools)() as env:
        with pytest.raises(TypeError):
            env.call("bad", {"sku": "p1", "price": 95.0, "idempotency_key": "k"})
        assert price(env) == 100.0 and not env.conn.in_transaction  # rolled back; the next call can run
        assert call(env, 95.0).ok and price(env) == 95.0  # the environment goes on: a 5% change, no gate


def test_a_tool_cannot_take_the_users_approval_tool_name() -> None:
    with pytest.raises(ValueError, match="the user's approval tool"):
        ToolSpec("approve_request", "Approve.", PARAMS, "write", set_price)
