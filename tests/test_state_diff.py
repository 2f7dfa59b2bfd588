"""Where two final states differ: the diff of their changes, and the changes a SQLite environment tracks.

The tracked changes name only the units a write touched; the diff they give must be the one the two whole exports
give, on real replays of retail episodes.
"""

from __future__ import annotations

from typing import Any

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.outcomes import replay
from rewardkit.envs.state_diff import state_diff, units
from rewardkit.envs.task_verdict import gold_outcome
from rewardkit.envs.tasks import approves, gold_actions

BEFORE = {"status": "pending", "note": None}
# (the agent's changes, the gold's, the diff): kind -> key -> (before, now); None is no such unit.
CASES = [
    ({}, {}, []),
    # Both changed the same field, differently: table, row, field, both values.
    (
        {"orders": {"#1": (BEFORE, {"status": "cancelled", "note": None})}},
        {"orders": {"#1": (BEFORE, {"status": "returned", "note": None})}},
        [{"table": "orders", "row": "#1", "field": "status", "agent": "cancelled", "gold": "returned"}],
    ),
    # Only the gold changed the row: the agent's side is the row as it was before.
    (
        {},
        {"orders": {"#1": (BEFORE, {"status": "cancelled", "note": None})}},
        [{"table": "orders", "row": "#1", "field": "status", "agent": "pending", "gold": "cancelled"}],
    ),
    # A row only the gold created: the agent's side is missing (no key), which is not a null.
    (
        {},
        {"users": {"u": (None, {"zip": "1", "name": None})}},
        [
            {"table": "users", "row": "u", "field": "name", "gold": None},
            {"table": "users", "row": "u", "field": "zip", "gold": "1"},
        ],
    ),
    # Nested fields and lists are dotted paths under the row.
    (
        {"orders": {"#1": (None, {"items": [{"id": "a"}]})}},
        {"orders": {"#1": (None, {"items": [{"id": "b"}]})}},
        [{"table": "orders", "row": "#1", "field": "items.0.id", "agent": "a", "gold": "b"}],
    ),
    # Both made the same change: nothing differs.
    ({"orders": {"#1": (BEFORE, {"status": "x"})}}, {"orders": {"#1": (BEFORE, {"status": "x"})}}, []),
    # An empty object against none: no scalar differs, the unit is shown whole.
    ({"carts": {"c": (None, {})}}, {}, [{"table": "carts", "row": "c", "field": "", "agent": {}}]),
]


@pytest.mark.parametrize(("agent", "gold", "expected"), CASES)
def test_state_diff(agent: dict, gold: dict, expected: list) -> None:
    assert state_diff(agent, gold) == expected


CANCEL = {"name": "cancel_pending_order", "arguments": {"order_id": "#W6779827", "reason": "no longer needed"}}
ADDRESS = {
    "name": "modify_user_address",
    "arguments": {
        "user_id": "yusuf_rossi_9620",
        "address1": "1 Main St",
        "address2": "",
        "city": "Austin",
        "state": "TX",
        "country": "USA",
        "zip": "73301",
    },
}


def test_a_sqlite_environment_names_only_what_its_writes_touched() -> None:
    with get_domain("retail").env_for(None) as env:
        assert env.changes() == {}  # fresh
        env.replay([CANCEL])
        changed = env.changes()
    # The order (its status, the refund in its payment history) and its user (the gift card refunded to), of the
    # database's 500 users, 1,000 orders and 50 products.
    assert {kind: list(found) for kind, found in changed.items()} == {
        "orders": ["#W6779827"],
        "users": ["ethan_lopez_6291"],
    }
    before, now = changed["orders"]["#W6779827"]
    assert (before["status"], now["status"]) == ("pending", "cancelled")
    assert len(now["payment_history"]) == len(before["payment_history"]) + 1


@pytest.mark.parametrize(
    ("agent_calls", "task"),
    [
        ([], {"evaluation_criteria": {"actions": [CANCEL]}}),  # did nothing
        ([ADDRESS], {"evaluation_criteria": {"actions": [CANCEL]}}),  # wrote the wrong thing
        ([CANCEL, ADDRESS], {"evaluation_criteria": {"actions": [CANCEL]}}),  # the right write and one more
    ],
    ids=["nothing", "wrong-write", "extra-write"],
)
def test_the_tracked_changes_give_the_diff_the_whole_exports_give(agent_calls: list, task: dict[str, Any]) -> None:
    def exported(calls: list) -> dict:
        with get_domain("retail").env_for(None) as env:
            env.replay(calls)
            return units(env.export())

    agent = replay("retail", agent_calls, changes=True).changes
    assert agent is not None
    tracked = state_diff(agent, gold_outcome("retail", task).changes)
    assert tracked and tracked == state_diff(exported(agent_calls), exported([CANCEL]))
    gold = gold_outcome("retail", task).changes  # the task's verdict keeps what its gold changed
    assert replay("retail", gold_actions(task), approves(task), changes=True).changes == gold


SCHEMA = """
CREATE TABLE rooms (room_id TEXT PRIMARY KEY, title TEXT NOT NULL, live INTEGER);
CREATE TABLE notes (text TEXT NOT NULL);
"""
SEED = {"rooms": [{"room_id": "R1", "title": "a", "live": 0}, {"room_id": "R2", "title": "b", "live": 0}], "notes": []}


def test_flat_rows_are_keyed_by_their_primary_key_and_compared_as_the_hash_compares_them() -> None:
    from rewardkit.envs.sqlite_env import Tables

    tables = Tables(SCHEMA, SEED)
    one, two = tables.copy(), tables.copy()
    # The same end state reached two ways: an update, against a delete and a re-insert under a new rowid.
    one.execute("UPDATE rooms SET title = 'x' WHERE room_id = 'R1'")
    two.execute("DELETE FROM rooms WHERE room_id = 'R1'")
    two.execute("INSERT INTO rooms VALUES ('R1', 'x', 0)")
    assert (
        tables.changes(one)
        == tables.changes(two)
        == {"rooms": {"R1": ({"room_id": "R1", "title": "a", "live": 0}, {"room_id": "R1", "title": "x", "live": 0})}}
    )
    assert tables.state_hash(one) == tables.state_hash(two)
    # A row written back to what it was is no change; a table without a key names its rows by their content.
    one.execute("UPDATE rooms SET title = 'a' WHERE room_id = 'R1'")
    one.execute("INSERT INTO notes VALUES ('hi')")
    assert tables.changes(one) == {"notes": {'{"text":"hi"}': (None, {"text": "hi"})}}
    # 1 and true are one number to Python but two values to the hash: the diff tells them apart, as the hash does.
    flag = {"rooms": {"R2": (None, {"live": 1})}}
    assert state_diff(flag, {"rooms": {"R2": (None, {"live": True})}}) == [
        {"table": "rooms", "row": "R2", "field": "live", "agent": 1, "gold": True}
    ]
    assert state_diff(flag, {"rooms": {"R2": (None, {"live": 1.0})}}) == []  # 1.0 is stored as 1
