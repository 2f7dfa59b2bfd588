"""The tau2 retail database on SQLite: exact round trip, constraints, isolated copies."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
from _retail_gold import db_state

from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail.db import TABLES
from rewardkit.envs.sqlite_env import drop_nulls

RAW = json.loads((DATA_DIR / "db.json").read_text(encoding="utf-8"))
STATE = db_state()


@pytest.fixture(scope="module")
def template() -> sqlite3.Connection:
    return TABLES.template()[0]  # the process's template: the tests write only to copies of it


class TestRetailDb:
    def test_import_export_reproduces_db_json(self, template: sqlite3.Connection) -> None:
        assert drop_nulls(TABLES.export(template)) == STATE

    def test_sizes(self, template: sqlite3.Connection) -> None:
        counts = {
            t: template.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("users", "orders", "products")
        }
        assert counts == {"users": 500, "orders": 1000, "products": 50}

    def test_money_is_bit_exact(self, template: sqlite3.Connection) -> None:
        raw = [p["amount"] for o in RAW["orders"].values() for p in o["payment_history"]]
        stored = [r[0] for r in template.execute("SELECT amount FROM payment_history ORDER BY rowid")]
        assert sorted(stored) == sorted(raw)  # floats compared exactly, not approximately

    def test_copies_are_isolated_from_the_template(self, template: sqlite3.Connection) -> None:
        copy = TABLES.copy()
        copy.execute("UPDATE orders SET status = 'cancelled', cancel_reason = 'no longer needed'")
        copy.execute("DELETE FROM user_orders")
        assert drop_nulls(TABLES.export(template)) == STATE
        exported = TABLES.export(copy)
        assert all(o["status"] == "cancelled" and o["cancel_reason"] for o in exported["orders"].values())

    def test_foreign_keys_and_checks_are_enforced(self, template: sqlite3.Connection) -> None:
        copy = TABLES.copy()
        with pytest.raises(sqlite3.IntegrityError):
            copy.execute(
                "INSERT INTO payment_methods VALUES ('gift_card_x', 'nobody_1', 0, 'gift_card', NULL, NULL, 5)"
            )
        gift = copy.execute("SELECT id FROM payment_methods WHERE source = 'gift_card' LIMIT 1").fetchone()[0]
        with pytest.raises(sqlite3.IntegrityError):
            copy.execute("UPDATE payment_methods SET balance = -0.01 WHERE id = ?", (gift,))
        with pytest.raises(sqlite3.IntegrityError):
            copy.execute("UPDATE payment_history SET transaction_type = 'gift' WHERE position = 0")

    def test_injection_strings_are_plain_data(self, template: sqlite3.Connection) -> None:
        copy = TABLES.copy()
        evil = "'; DROP TABLE users; --"
        copy.execute("UPDATE users SET address1 = ? WHERE position = 0", (evil,))
        assert copy.execute("SELECT COUNT(*) FROM users").fetchone()[0] == 500
        assert copy.execute("SELECT address1 FROM users WHERE position = 0").fetchone()[0] == evil

    def test_64_concurrent_copies_stay_isolated(self, template: sqlite3.Connection) -> None:
        def rollout(i: int) -> float:
            db = TABLES.copy()
            gift = db.execute(
                "SELECT id FROM payment_methods WHERE source = 'gift_card' ORDER BY id LIMIT 1"
            ).fetchone()[0]
            db.execute("UPDATE payment_methods SET balance = ? WHERE id = ?", (float(i), gift))
            return db.execute("SELECT balance FROM payment_methods WHERE id = ?", (gift,)).fetchone()[0]

        with ThreadPoolExecutor(max_workers=16) as pool:
            assert list(pool.map(rollout, range(64))) == [float(i) for i in range(64)]
        assert drop_nulls(TABLES.export(template)) == STATE
