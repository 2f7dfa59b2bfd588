"""rewardkit.envs.sqlite_env: a domain's tables from a schema and seed rows, with private copies and a state hash
that is order-free and kept incrementally. Real SQLite throughout."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from pathlib import Path

import pytest

from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.sqlite_env import Nested, Tables, environment
from rewardkit.envs.tool import ResultCode, ToolError, ToolSpec

SCHEMA = """
CREATE TABLE items (item_id TEXT PRIMARY KEY, qty INTEGER NOT NULL CHECK (qty >= 0));
CREATE TABLE notes (item_id TEXT NOT NULL REFERENCES items(item_id), text TEXT NOT NULL);
"""
SEED = {"items": [{"item_id": "a", "qty": 2}, {"item_id": "b", "qty": 0}], "notes": []}


def take(conn, item_id: str) -> dict:
    row = conn.execute("SELECT qty FROM items WHERE item_id = ?", (item_id,)).fetchone()
    if row is None or row["qty"] == 0:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"no {item_id} left")
    conn.execute("UPDATE items SET qty = qty - 1 WHERE item_id = ?", (item_id,))
    return {"left": row["qty"] - 1}


def note(conn, item_id: str, text: str) -> dict:
    conn.execute("INSERT INTO notes VALUES (?, ?)", (item_id, text))
    return {"ok": True}


KEY = {"idempotency_key": {"type": "string"}}
TOOLS = {
    "take": ToolSpec(
        "take",
        "Take one.",
        {"type": "object", "properties": {"item_id": {"type": "string"}, **KEY}, "required": ["item_id"]},
        "write",
        take,
    ),
    "note": ToolSpec(
        "note",
        "Note.",
        {
            "type": "object",
            "properties": {"item_id": {"type": "string"}, "text": {"type": "string"}, **KEY},
            "required": ["item_id", "text"],
        },
        "write",
        note,
    ),
}


@pytest.fixture
def make_env():
    return environment(Tables(SCHEMA, SEED), TOOLS)


def test_each_environment_is_a_private_copy(make_env) -> None:
    one, two = make_env(), make_env()
    assert one.call("take", {"item_id": "a"}).ok
    # one took an "a" (2 -> 1); two still has the template's 2.
    assert one.export()["items"][0]["qty"] == 1 and two.export()["items"][0]["qty"] == 2
    assert one.state_hash() != two.state_hash()


def test_the_state_hash_is_order_free_and_incremental(make_env) -> None:
    first, second, fresh = make_env(), make_env(), make_env()
    for env, order in ((first, ["x", "y"]), (second, ["y", "x"])):
        for text in order:
            assert env.call("note", {"item_id": "a", "text": text}).ok
    # The same two notes written in the other order: other rowids, the same state, the same hash.
    assert first.state_hash() == second.state_hash() != fresh.state_hash()
    # Incremental equals a hash of a full rebuild of the same rows (a new Tables seeded with the exported state).
    rebuilt = environment(Tables(SCHEMA, first.export()), TOOLS)()
    assert rebuilt.state_hash() == first.state_hash()


@pytest.mark.parametrize(
    "write",
    [
        "INSERT OR REPLACE INTO items VALUES ('a', 5)",  # deletes the old row, then inserts: two rows touched
        "UPDATE items SET qty = 5 WHERE item_id = 'a'",
        "REPLACE INTO items VALUES ('a', 5)",
    ],
)
def test_every_way_to_the_same_row_hashes_the_same(make_env, write: str) -> None:
    env, updated = make_env(), make_env()
    env.conn.execute(write)
    updated.conn.execute("UPDATE items SET qty = 5 WHERE item_id = 'a'")
    # Incremental and from scratch agree, and equal the same state reached by an UPDATE.
    tables = Tables(SCHEMA, SEED)
    assert env.state_hash() == updated.state_hash() == tables.full_hash(env.conn)


def test_a_write_undone_hashes_as_the_template(make_env) -> None:
    env, fresh = make_env(), make_env()
    assert env.call("note", {"item_id": "a", "text": "x"}).ok
    env.conn.execute("DELETE FROM notes")  # the row touched, then gone again: the dirty mark must not matter
    assert env.state_hash() == fresh.state_hash()


def test_a_refused_write_changes_nothing_and_a_key_applies_once(make_env) -> None:
    env, fresh = make_env(), make_env()
    assert env.call("take", {"item_id": "b"}).code is ResultCode.PRECONDITION_FAILED  # qty 0
    assert env.state_hash() == fresh.state_hash()
    for _ in range(2):  # the same idempotency key twice: one take (2 -> 1), the second replayed
        assert env.call("take", {"item_id": "a", "idempotency_key": "k1"}).ok
    assert env.export()["items"][0]["qty"] == 1 and [a["replayed"] for a in env.audit()][-2:] == [False, True]


def test_a_seed_file_replaces_the_seed(make_env, tmp_path: Path) -> None:
    path = tmp_path / "seed.json"
    path.write_text(json.dumps({"items": [{"item_id": "z", "qty": 5}]}), encoding="utf-8")
    assert make_env(path).export() == {"items": [{"item_id": "z", "qty": 5}], "notes": []}


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ({"itemz": []}, "tables ['itemz'] are not in the schema"),  # a typo in a table name
        ({"items": [{"item_id": "a", "qty": -1}]}, "items[0] cannot be stored (CHECK constraint failed"),
        ({"items": [{"item_id": "a", "size": 1}]}, "items[0] cannot be stored (table items has no column named size"),
        ({"items": ["a"]}, "items[0] must be an object of column values"),
        ({"items": None}, "items must be a list of rows, got NoneType"),
    ],
    ids=["unknown-table", "constraint", "unknown-column", "not-an-object", "not-a-list"],
)
def test_bad_seed_rows_name_the_table_and_row(seed: dict, message: str) -> None:
    with pytest.raises(DomainDataError, match=message.replace("(", r"\(").replace("[", r"\[")):
        environment(Tables(SCHEMA, seed), TOOLS)()


def nested(owners: dict | None = None, collections: tuple[str, ...] = ("items",)) -> Nested:
    """The tables as a nested format of their own: item id -> {"qty", "notes": [text, ...]}."""

    def entity(conn, collection: str, key: str) -> dict | None:
        row = conn.execute("SELECT qty FROM items WHERE item_id = ?", (key,)).fetchone()
        notes = conn.execute("SELECT text FROM notes WHERE item_id = ? ORDER BY rowid", (key,))
        return None if row is None else {"qty": row["qty"], "notes": [n["text"] for n in notes]}

    def export(conn) -> dict:
        keys = [r["item_id"] for r in conn.execute("SELECT item_id FROM items ORDER BY rowid")]
        return {c: {k: entity(conn, c, k) for k in keys} for c in collections}

    return Nested(owners or {"items": ("items", "item_id"), "notes": ("items", "item_id")}, entity, export)


def test_a_nested_format_is_read_exported_and_hashed_as_itself(tmp_path: Path) -> None:
    path = tmp_path / "seed.json"  # the format's own file: item id -> quantity
    path.write_text(json.dumps({"a": 2, "b": 0}), encoding="utf-8")

    def read(p: Path) -> dict:
        return {"items": [{"item_id": k, "qty": v} for k, v in json.loads(p.read_text(encoding="utf-8")).items()]}

    tables = Tables(SCHEMA, path, read_seed=read, nested=nested())
    env = environment(tables, TOOLS)()
    assert env.export() == {"items": {"a": {"qty": 2, "notes": []}, "b": {"qty": 0, "notes": []}}}
    assert env.call("take", {"item_id": "a"}).ok and env.call("note", {"item_id": "b", "text": "x"}).ok
    text = json.dumps(env.export(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # The hash is the export's, kept incrementally (only a and b built again) and equal to a full rebuild.
    assert env.state_hash() == hashlib.sha256(text.encode()).hexdigest() == tables.full_hash(env.conn)


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (nested(owners={"items": ("items", "item_id")}), "Nested.owners: tables ['notes'] of the schema"),
        (nested(collections=("items", "extra")), "export() gives collections ['extra', 'items'], owners name"),
        (Nested({"items": ("items", "item_id")}, lambda *_: None, lambda _: {}, ("notes", "items")), "['items'] also"),
    ],
    ids=["table-without-owner", "collection-without-owner", "own-table-also-owned"],
)
def test_a_nested_format_that_would_miss_writes_is_refused(declared: Nested, message: str) -> None:
    with pytest.raises(DomainDataError, match=re.escape(message)):
        environment(Tables(SCHEMA, SEED, nested=declared), TOOLS)()


def test_a_table_no_collection_owns_is_rows_beside_the_collections() -> None:
    # notes is the domain's own (Nested.rows; an item is its quantity alone): it is exported and hashed as rows next
    # to the items collection, and a write to it reaches the hash (incrementally, equal to a full rebuild, equal to
    # the sha256 of the export's canonical JSON).
    def item(conn, collection: str, key: str) -> dict | None:
        row = conn.execute("SELECT qty FROM items WHERE item_id = ?", (key,)).fetchone()
        return None if row is None else {"qty": row["qty"]}

    def export(conn) -> dict:
        return {"items": {r["item_id"]: {"qty": r["qty"]} for r in conn.execute("SELECT * FROM items")}}

    tables = Tables(SCHEMA, SEED, nested=Nested({"items": ("items", "item_id")}, item, export, rows=("notes",)))
    env = environment(tables, TOOLS)()
    fresh = env.state_hash()
    assert set(env.export()) == {"items", "notes"} and env.export()["notes"] == []
    assert env.call("note", {"item_id": "a", "text": "x"}).ok
    assert env.export()["notes"] == [{"item_id": "a", "text": "x"}]
    assert env.call("note", {"item_id": "a", "text": "a"}).ok  # written second, its text sorts first
    assert [n["text"] for n in env.export()["notes"]] == ["a", "x"]
    text = json.dumps(env.export(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert env.state_hash() != fresh and env.state_hash() == tables.full_hash(env.conn)
    assert env.state_hash() == hashlib.sha256(text.encode()).hexdigest()
    assert env.changes()["notes"]['{"item_id":"a","text":"x"}'] == (None, {"item_id": "a", "text": "x"})


def test_copies_made_at_once_read_the_seed_once(tmp_path: Path) -> None:
    """32 rollouts open their copies at the same moment on a cold domain: the seed file is read once (reads == 1),
    not once per thread, and every copy holds the seed's 2 items."""
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(SEED), encoding="utf-8")
    reads: list[int] = []

    def read(p: Path) -> dict:
        reads.append(1)
        time.sleep(0.05)  # a large seed: the other threads arrive while it is read
        return json.loads(p.read_text(encoding="utf-8"))

    make = environment(Tables(SCHEMA, path, read_seed=read), TOOLS)
    barrier, counts = threading.Barrier(32), []

    def open_copy() -> None:
        barrier.wait()
        with make() as env:
            counts.append(env.conn.execute("SELECT count(*) FROM items").fetchone()[0])

    threads = [threading.Thread(target=open_copy) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reads) == 1 and counts == [2] * 32
