"""The harness rules on the retail tools: validation, idempotency, transactions, audit, isolation."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.envs import make_env
from rewardkit.envs.harness import ToolEnvironment
from rewardkit.envs.retail.db import TABLES
from rewardkit.envs.retail.domain import tasks
from rewardkit.envs.retail.tools import TOOLS
from rewardkit.envs.tool import ResultCode, ToolSpec
from rewardkit.envs.tool_calls import ToolCall

CANCEL = {"order_id": "#W6779827", "reason": "no longer needed"}  # pending, paid by gift card
INJECTIONS = ["'; DROP TABLE users; --", '" OR 1=1 --', "x'); DELETE FROM orders; --", "%", "_", "\x00", "⛔️ 🙂"]


@pytest.fixture
def env() -> ToolEnvironment:
    return make_env("retail")


def payments(env: ToolEnvironment, order_id: str = "#W6779827") -> list[dict[str, Any]]:
    return env.call("get_order_details", {"order_id": order_id}).value["payment_history"]


class TestSchemaViolations:
    @pytest.mark.parametrize(
        "arguments",
        [
            {"order_id": "#W6779827"},  # reason missing
            {"order_id": 6779827, "reason": "no longer needed"},  # wrong type
            {**CANCEL, "force": True},  # unknown argument
            {**CANCEL, "idempotency_key": ""},  # too short
            {**CANCEL, "idempotency_key": 7},
            {"order_id": "#W6779827", "reason": "ordered by mistake\ud800"},  # lone surrogate
        ],
    )
    def test_nothing_is_written(self, env: ToolEnvironment, arguments: dict[str, Any]) -> None:
        before = env.state_hash()
        result = env.call("cancel_pending_order", arguments)
        assert result.code is ResultCode.SCHEMA_VIOLATION
        assert result.value["error"]["code"] == "SCHEMA_VIOLATION" and result.value["error"]["message"]
        assert env.state_hash() == before
        assert env.audit()[-1]["code"] == "SCHEMA_VIOLATION"

    def test_empty_item_lists_are_refused(self, env: ToolEnvironment) -> None:
        args = {"order_id": "#W5918442", "item_ids": [], "new_item_ids": [], "payment_method_id": "credit_card_5051208"}
        assert env.call("modify_pending_order_items", args).code is ResultCode.SCHEMA_VIOLATION

    def test_undecodable_and_unknown_calls(self, env: ToolEnvironment) -> None:
        assert env.execute(ToolCall("cancel_pending_order", {}, "arguments are not valid JSON")).code is (
            ResultCode.SCHEMA_VIOLATION
        )
        result = env.call("drop_database", {})
        assert result.code is ResultCode.UNKNOWN_TOOL and "cancel_pending_order" in result.value["error"]["message"]
        assert [a["code"] for a in env.audit()] == ["SCHEMA_VIOLATION", "UNKNOWN_TOOL"]


class TestIdempotency:
    def test_a_repeated_key_returns_the_first_result_without_writing(self, env: ToolEnvironment) -> None:
        args = {"order_id": "#W6779827", "payment_method_id": "credit_card_9789590", "idempotency_key": "k1"}
        first = env.call("modify_pending_order_payment", args)
        state = env.state_hash()
        second = env.call("modify_pending_order_payment", args)
        # without the key the same call fails (two payments now), with it the first result comes back
        assert first.ok and second.ok and second.value == first.value
        assert env.state_hash() == state and len(payments(env)) == 3
        assert [a["replayed"] for a in env.audit()] == [False, True, False]  # the last: get_order_details

    def test_the_key_with_other_arguments_is_a_conflict(self, env: ToolEnvironment) -> None:
        assert env.call("cancel_pending_order", {**CANCEL, "idempotency_key": "k"}).ok
        other = {"order_id": "#W5918442", "reason": "no longer needed", "idempotency_key": "k"}
        assert env.call("cancel_pending_order", other).code is ResultCode.IDEMPOTENCY_CONFLICT
        assert env.call("get_order_details", {"order_id": "#W5918442"}).value["status"] == "pending"

    def test_a_failed_write_does_not_burn_its_key(self, env: ToolEnvironment) -> None:
        bad = {"order_id": "#W2611340", "reason": "no longer needed", "idempotency_key": "k"}  # processed
        assert env.call("cancel_pending_order", bad).code is ResultCode.PRECONDITION_FAILED
        assert env.call("cancel_pending_order", {**CANCEL, "idempotency_key": "k"}).ok

    def test_keys_are_private_to_a_rollout(self) -> None:
        a, b = make_env("retail"), make_env("retail")
        assert a.call("cancel_pending_order", {**CANCEL, "idempotency_key": "k"}).ok
        assert b.call("cancel_pending_order", {**CANCEL, "idempotency_key": "k"}).ok
        assert b.audit()[-1]["replayed"] is False and len(payments(b)) == 2


class TestTransactions:
    def test_a_write_failing_half_way_changes_nothing(self, env: ToolEnvironment) -> None:
        # A second payment by an unknown method: the cancel credits the gift card for the first
        # payment, then fails on the second; the gift card credit must be rolled back.
        env.conn.execute("INSERT INTO payment_history VALUES ('#W6779827', 1, 'payment', 1.0, 'ghost_card_1')")
        before = env.state_hash()
        result = env.call("cancel_pending_order", CANCEL)
        assert result.code is ResultCode.NOT_FOUND and "Payment method" in result.value["error"]["message"]
        assert env.state_hash() == before
        user = env.call("get_user_details", {"user_id": "ethan_lopez_6291"}).value
        assert user["payment_methods"]["gift_card_7219486"]["balance"] == 49.0

    def test_the_audit_keeps_failed_calls_and_is_not_state(self, env: ToolEnvironment) -> None:
        before = env.state_hash()
        env.call("get_order_details", {"order_id": "#nope"})
        env.call("cancel_pending_order", {"order_id": "#W2611340", "reason": "no longer needed"})
        assert env.state_hash() == before  # two audit rows later
        assert [(a["seq"], a["tool"], a["code"]) for a in env.audit()] == [
            (1, "get_order_details", "NOT_FOUND"),
            (2, "cancel_pending_order", "PRECONDITION_FAILED"),
        ]


class TestInjection:
    @pytest.mark.parametrize("tool", sorted(TOOLS))
    def test_every_string_argument_is_plain_data(self, env: ToolEnvironment, tool: str) -> None:
        spec = TOOLS[tool]
        for text in INJECTIONS:
            args = {
                name: [text] if prop["type"] == "array" else "no longer needed" if "enum" in prop else text
                for name, prop in spec.parameters["properties"].items()
                if name in spec.parameters["required"]
            }
            result = env.call(tool, args)
            assert result.code in set(ResultCode)
        counts = [env.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("users", "orders", "products")]
        assert counts == [500, 1000, 50]

    def test_an_address_holding_sql_is_stored_verbatim(self, env: ToolEnvironment) -> None:
        address = {k: INJECTIONS[0] for k in ("address1", "address2", "city", "state", "country", "zip")}
        assert env.call("modify_user_address", {"user_id": "sofia_rossi_8776", **address}).ok
        assert env.call("get_user_details", {"user_id": "sofia_rossi_8776"}).value["address"] == address


class TestIsolation:
    def test_64_concurrent_rollouts_see_only_their_own_writes(self) -> None:
        pending = [
            t
            for t in tasks().values()
            if any(a["name"] == "cancel_pending_order" for a in t["evaluation_criteria"]["actions"])
        ]
        cancels = [
            a["arguments"]
            for t in pending
            for a in t["evaluation_criteria"]["actions"]
            if a["name"] == "cancel_pending_order"
        ]
        template_hash = TABLES.full_hash(TABLES.template()[0])

        def rollout(i: int) -> tuple[str, list[str]]:
            with make_env("retail") as env:
                mine = cancels[i % len(cancels)]
                env.call("cancel_pending_order", mine)
                statuses = [env.call("get_order_details", {"order_id": c["order_id"]}).value["status"] for c in cancels]
                return mine["order_id"], statuses

        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(rollout, range(64)))
        orders = [c["order_id"] for c in cancels]
        for mine, statuses in results:
            assert {o for o, s in zip(orders, statuses, strict=True) if s == "cancelled"} == {mine}
        assert TABLES.full_hash(TABLES.template()[0]) == template_hash


class TestStateHash:
    def test_incremental_equals_full_after_every_gold_trajectory(self) -> None:
        for task in tasks().values():
            with make_env("retail") as env:
                env.replay(task["evaluation_criteria"]["actions"])
                assert env.state_hash() == TABLES.full_hash(env.conn), task["id"]

    def test_hash_is_sha256_of_sorted_compact_json(self, env: ToolEnvironment) -> None:
        import hashlib

        from rewardkit.envs.sqlite_env import drop_nulls

        env.call("cancel_pending_order", CANCEL)
        text = json.dumps(drop_nulls(env.export()), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        assert env.state_hash() == hashlib.sha256(text.encode()).hexdigest()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_IDS = st.sampled_from(
    [
        "#W6779827",
        "#W5918442",
        "#W4817420",
        "sofia_rossi_8776",
        "gift_card_7219486",
        "6700049080",
        "credit_card_9789590",
        "3377618313",
        "no longer needed",
        "1+1",
        "",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=st.sampled_from(sorted(TOOLS)),
    values=st.dictionaries(st.text(max_size=20), _JSON, max_size=4),
    ids=st.lists(_IDS, min_size=8, max_size=8),
    as_lists=st.booleans(),
)
def test_any_arguments_give_a_structured_result(tool: str, values: dict, ids: list[str], as_lists: bool) -> None:
    """Random values, and plausible ids in every slot: never an exception, and failures never write."""
    env = make_env("retail")
    plausible = {name: [ids[i]] if as_lists else ids[i] for i, name in enumerate(TOOLS[tool].parameters["properties"])}
    for args in (values, plausible):
        before = env.state_hash()
        result = env.call(tool, args)
        assert result.code in set(ResultCode)
        assert isinstance(result.value, str) or json.loads(result.text()) == result.value
        if not result.ok:
            assert env.state_hash() == before


@pytest.mark.parametrize(
    ("parameters", "loops"),
    [
        ({"$ref": "#"}, True),  # the root is its own subschema, on the same value
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, True),
        ({"type": "object", "properties": {"child": {"$ref": "#"}}}, False),  # steps into .child: a tree, finite
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}}, False),
    ],
)
def test_a_schema_whose_refs_loop_on_the_same_value_is_refused_when_the_tool_is_built(
    parameters: dict[str, Any], loops: bool
) -> None:
    def build() -> ToolSpec:
        return ToolSpec("t", "A tool.", parameters, "read", lambda conn: None)

    if loops:
        with pytest.raises(ValueError, match="leads back to itself"):
            build()
    else:  # a recursive schema that steps into the value validates, deep values included
        assert build().violation({"child": {"child": {}}}) is None
