"""One environment shared by threads, arguments that are not JSON, and databases that cannot be right."""

from __future__ import annotations

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rewardkit.envs import make_env
from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.tool import ResultCode

THREADS = 8


def pending_orders(n: int) -> list[str]:
    with make_env("retail") as env:
        rows = env.conn.execute("SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT ?", (n,))
        return [r[0] for r in rows]


class TestSharedEnvironment:
    """Calls on one environment are serialised: no raw sqlite3 error, no lost audit row, no half-write."""

    def test_threads_on_one_environment(self) -> None:
        orders = pending_orders(2 * THREADS)
        env = make_env("retail")
        barrier = threading.Barrier(THREADS)

        def worker(i: int) -> list[ResultCode]:
            barrier.wait()  # start together: maximum contention
            codes = []
            # Each thread cancels its own two orders, reads, and races everyone for the first order.
            for order in (orders[2 * i], orders[2 * i + 1], orders[0]):
                codes.append(env.call("cancel_pending_order", {"order_id": order, "reason": "no longer needed"}).code)
                codes.append(env.call("get_order_details", {"order_id": order}).code)
            codes.append(env.call("modify_user_address", {"user_id": "nope"}).code)  # schema violation
            return codes

        with ThreadPoolExecutor(THREADS) as pool:
            codes = [c for result in pool.map(worker, range(THREADS)) for c in result]
        audit = env.audit()
        assert len(audit) == len(codes) == THREADS * 7  # every call has its audit row
        assert [a["seq"] for a in audit] == list(range(1, len(audit) + 1))
        # 2 own cancels per thread succeed; the race for orders[0] has exactly one winner overall
        # (thread 0 owns it too): 2 * 8 OK cancels, the other 8 attempts on orders[0] fail.
        cancels = [a for a in audit if a["tool"] == "cancel_pending_order"]
        assert sum(a["code"] == "OK" for a in cancels) == 2 * THREADS
        state = env.export()
        for order in orders:
            history = state["orders"][order]["payment_history"]
            paid = sum(p["amount"] for p in history if p["transaction_type"] == "payment")
            refunded = sum(p["amount"] for p in history if p["transaction_type"] == "refund")
            assert state["orders"][order]["status"] == "cancelled" and math.isclose(paid, refunded), order
        # The result is that of some sequential order: replaying the audit on a fresh copy gives the same state.
        with make_env("retail") as fresh:
            fresh.replay([{"name": a["tool"], "arguments": a["arguments"]} for a in audit])
            assert fresh.state_hash() == env.state_hash()
        env.conn.close()

    def test_hash_and_export_while_others_write(self) -> None:
        orders = pending_orders(THREADS)
        env = make_env("retail")

        def write(order: str) -> ResultCode:
            return env.call("cancel_pending_order", {"order_id": order, "reason": "ordered by mistake"}).code

        with ThreadPoolExecutor(THREADS) as pool:
            hashes = list(pool.map(lambda _: env.state_hash(), range(THREADS)))
            assert set(pool.map(write, orders)) == {ResultCode.OK}
        assert all(isinstance(h, str) and len(h) == 64 for h in hashes)
        assert len(env.audit()) == THREADS


DEEP: Any = []
for _ in range(10_000):
    DEEP = [DEEP]


class TestArgumentsThatAreNotJson:
    @pytest.mark.parametrize(
        "arguments",
        [
            {"order_id": b"#W5918442"},  # bytes
            {"order_id": {"#W5918442"}},  # a set
            {"order_id": DEEP},  # nested 10,000 deep: json and jsonschema would recurse out
            {"order_id": "#W5918442", "reason": float("nan")},  # NaN is not JSON
            {"order_id": "#W5918442", "reason": float("inf")},
            {"order_id": object()},
            ["#W5918442"],  # not an object at all
            "order_id=#W5918442",
        ],
        ids=["bytes", "set", "deep", "nan", "inf", "object", "list", "string"],
    )
    def test_schema_violation_and_nothing_written(self, arguments: Any) -> None:
        with make_env("retail") as env:
            before = env.state_hash()
            result = env.call("cancel_pending_order", arguments)
            assert result.code is ResultCode.SCHEMA_VIOLATION
            assert result.value["error"]["code"] == "SCHEMA_VIOLATION"
            assert env.state_hash() == before
            [row] = env.audit()  # the audit row is written, with arguments it can store
            assert row["code"] == "SCHEMA_VIOLATION" and row["tool"] == "cancel_pending_order"

    def test_a_name_that_is_not_a_string_is_an_unknown_tool(self) -> None:
        with make_env("retail") as env:
            assert env.call(42, {}).code is ResultCode.UNKNOWN_TOOL  # type: ignore[arg-type]


def db_with(tmp_path: Path, edit: Any) -> Path:
    db = json.loads((DATA_DIR / "db.json").read_text(encoding="utf-8"))
    text = edit(db)
    path = tmp_path / "db.json"
    path.write_text(text, encoding="utf-8")
    return path


def _balance(db: dict, literal: str) -> str:
    user = next(u for u in db["users"].values() if any("balance" in m for m in u["payment_methods"].values()))
    method = next(m for m in user["payment_methods"].values() if "balance" in m)
    method["balance"] = 1.5
    return json.dumps(db).replace('"balance": 1.5', f'"balance": {literal}', 1)


class TestCustomDatabase:
    @pytest.mark.parametrize(
        ("edit", "message"),
        [
            (lambda db: _balance(db, "NaN"), "non-finite number NaN"),
            (lambda db: _balance(db, "Infinity"), "non-finite number Infinity"),
            (lambda db: _balance(db, "-Infinity"), "non-finite number -Infinity"),
            (lambda db: _balance(db, "1e999"), "non-finite number 1e999"),  # parses to inf
            (lambda db: json.dumps({k: v for k, v in db.items() if k != "users"}), "missing or malformed field"),
            (lambda db: "{not json", "not a usable db.json"),
        ],
        ids=["nan", "inf", "-inf", "overflow", "no-users", "not-json"],
    )
    def test_rejected_at_load_naming_the_file(self, tmp_path: Path, edit: Any, message: str) -> None:
        path = db_with(tmp_path, edit)
        with pytest.raises(DomainDataError, match=message) as info:
            make_env("retail", path)
        assert str(path) in str(info.value)

    def test_a_finite_custom_database_loads(self, tmp_path: Path) -> None:
        path = db_with(tmp_path, lambda db: _balance(db, "2.25"))
        with make_env("retail", path) as env:
            assert env.state_hash() != make_env("retail").state_hash()
