"""The harness's own record (audit, idempotency keys, approval requests, the dirty marks) out of reach of a domain's
schema and of what a tool model or memory model sends; every value a model sends that SQLite cannot hold is a
refusal, never an exception of sqlite3's. Real SQLite, real domains, the real env check."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from spec_domains import KEY, task, write_spec

from rewardkit.envs import get_domain
from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.memory import MemorySchemaError, apply_writes, open_memory
from rewardkit.envs.registry import DomainError
from rewardkit.envs.simulated import SimCall, ToolSimError, by_rule, contradiction
from rewardkit.envs.spec_domain import load_spec
from rewardkit.envs.sqlite_env import Tables, environment
from rewardkit.envs.tool import ResultCode, ToolSpec
from rewardkit.runs.domains.domain_check import check_domain

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "merchant_spec"
HARNESS_TABLES = ("audit", "idempotency", "approvals")
# Tables a domain may declare under the harness's names: its own, with columns of its own.
SAME_NAMES = """
CREATE TABLE audit (entry_id TEXT PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE idempotency (key TEXT PRIMARY KEY, seen INTEGER NOT NULL);
CREATE TABLE approvals (approval_id TEXT PRIMARY KEY, who TEXT NOT NULL);
"""
FORGED = {
    "audit": {"seq": 99, "tool": '"change_price"', "arguments": "{}", "code": "OK"},
    "idempotency": {"key": "k9", "call": '["change_price", {}]', "result": "{}"},
    "approvals": {"id": "req-9", "call": "[]", "rule": "R", "reason": "r", "status": "approved"},
    "_rewardkit_dirty": {"kind": "products", "id": 1},
    "rewardkit.audit": {"seq": 99, "tool": '"x"', "arguments": "{}", "code": "OK"},
    "sqlite_master": {"name": "x"},
}
GOOD_79 = {
    "ok": True,
    "result": {"sku": "SP002", "name": "每日坚果礼盒", "price": 79, "stock": 40},
    "writes": [{"op": "update", "table": "products", "key": {"sku": "SP002"}, "values": {"price": 79}}],
}


def plus(write: dict[str, Any]) -> Any:
    """A tool model whose answer to ``change_price`` is the right one with ``write`` reported besides; every other
    call it answers by rule."""

    def answer(call: SimCall) -> dict[str, Any]:
        if call.tool.name != "change_price":
            return by_rule(call)
        return {**GOOD_79, "writes": [*GOOD_79["writes"], write]}

    return answer


def harness_rows(env: Any) -> tuple[int, int, int]:
    return tuple(env.conn.execute(f"SELECT count(*) FROM rewardkit.{t}").fetchone()[0] for t in HARNESS_TABLES)


@pytest.mark.parametrize("table", list(FORGED))
@pytest.mark.parametrize("op", ["insert", "upsert"])
def test_a_simulated_write_to_anything_but_a_domain_table_is_refused(table: str, op: str) -> None:
    domain = get_domain(str(SPEC))
    sim = replace(domain.simulation, answer=plus({"op": op, "table": table, "values": FORGED[table]}))
    with sim.env(None) as env:
        env.call("get_product", {"sku": "SP001"})
        before = harness_rows(env)
        with pytest.raises(ToolSimError, match=rf"{op} {table}: no such table \(tables: products, rooms"):
            env.call("change_price", {"sku": "SP002", "price": 79, "idempotency_key": "k9"})
        assert harness_rows(env) == before and env.export()["products"][1]["price"] == 89  # nothing was written
        # The key was never stored: the same call is answered (by rule) and writes.
        env.simulation = domain.simulation
        assert env.call("change_price", {"sku": "SP002", "price": 79, "idempotency_key": "k9"}).ok
        assert [a["replayed"] for a in env.audit()] == [False, False]


@pytest.mark.parametrize("op", ["update", "delete"])
@pytest.mark.parametrize(("table", "key"), [("audit", {"seq": 1}), ("idempotency", {"key": "k1"})])
def test_an_update_or_delete_of_the_harness_record_is_refused(op: str, table: str, key: dict[str, Any]) -> None:
    domain = get_domain(str(SPEC))
    with domain.simulation.env(None) as env:
        assert env.call("change_price", {"sku": "SP002", "price": 99, "idempotency_key": "k1"}).ok  # by rule
        before = (env.audit(), harness_rows(env))
        env.simulation = replace(
            domain.simulation, answer=plus({"op": op, "table": table, "key": key, "values": {"code": "HARD_GATE"}})
        )
        with pytest.raises(ToolSimError, match=f"{op} {table}: no such table"):
            env.call("change_price", {"sku": "SP002", "price": 79})
        assert (env.audit(), harness_rows(env)) == before


def test_a_memory_model_cannot_fill_the_harness_record() -> None:
    schema = get_domain(str(SPEC)).simulation.tables.schema
    with pytest.raises(MemorySchemaError, match=r"tables \['audit'\] are not in the schema"):
        open_memory(schema, {"products": [], "audit": [FORGED["audit"]]})


NOTE = {"type": "object", "properties": {"entry_id": {"type": "string"}, "note": {"type": "string"}}}
NOTES_TOOLS = [
    {
        "name": "add_note",
        "description": "Add a note.",
        "risk": "write",
        "returns": NOTE,
        "parameters": {"type": "object", "properties": {"note": {"type": "string"}, **KEY}, "required": ["note"]},
        "rule": {"insert": "audit", "values": {"note": "note"}, "id": {"column": "entry_id", "prefix": "N"}},
    },
    {
        "name": "get_note",
        "description": "Read a note.",
        "risk": "read",
        "returns": NOTE,
        "parameters": {"type": "object", "properties": {"entry_id": {"type": "string"}}, "required": ["entry_id"]},
        "rule": {"get": "audit", "key": {"entry_id": "entry_id"}},
    },
]
NOTES_TASKS = [
    task("n1", "You want the note 'call Bo' kept.", [{"name": "add_note", "arguments": {"note": "call Bo"}}]),
    task("n2", "You want to read note N001.", [{"name": "get_note", "arguments": {"entry_id": "N001"}}], ["buy milk"]),
]
NOTES_SEED = {"audit": [{"entry_id": "N001", "note": "buy milk"}], "idempotency": [], "approvals": []}


def test_a_spec_domain_may_name_its_tables_as_the_harness_does(tmp_path: Path) -> None:
    folder = write_spec(tmp_path / "notes_spec", SAME_NAMES, NOTES_TOOLS, NOTES_TASKS, NOTES_SEED)
    with load_spec(folder).env_for(None) as env:
        added = env.call("add_note", {"note": "call Bo", "idempotency_key": "k1"})
        again = env.call("add_note", {"note": "call Bo", "idempotency_key": "k1"})
        # The domain's own audit table holds its notes; the harness's record is its own.
        assert added.value["entry_id"] == "N002" and again.value == added.value
        assert env.export()["audit"] == [NOTES_SEED["audit"][0], {"entry_id": "N002", "note": "call Bo"}]
        assert [(a["tool"], a["replayed"]) for a in env.audit()] == [("add_note", False), ("add_note", True)]
        assert env.export()["idempotency"] == []
    report = check_domain(str(folder))
    assert report.passed, [(c.name, c.detail) for c in report.failed()]


PY_SCHEMA = 'SCHEMA = """\n'
PY_LEND = '    conn.execute("INSERT INTO loans VALUES (?, ?)", (book_id, member_id))\n'


def test_a_python_domain_may_name_its_tables_as_the_harness_does(tmp_path: Path) -> None:
    from rewardkit.envs.registry import new_domain

    folder = tmp_path / "library_same_names"
    new_domain("library_same_names", folder)
    module = folder / "__init__.py"
    text = module.read_text(encoding="utf-8")
    assert text.count(PY_SCHEMA) == 1 and text.count(PY_LEND) == 1
    text = text.replace(PY_SCHEMA, PY_SCHEMA + SAME_NAMES.lstrip("\n"))
    text = text.replace(
        PY_LEND, PY_LEND + '    conn.execute("INSERT INTO audit VALUES (?, ?)", (book_id, member_id))\n'
    )
    module.write_text(text, encoding="utf-8")
    domain = get_domain(str(folder))
    with domain.make_env(None) as env:
        assert env.call("lend_book", {"book_id": "b1", "member_id": "m7", "idempotency_key": "k"}).ok
        assert env.call("lend_book", {"book_id": "b1", "member_id": "m7", "idempotency_key": "k"}).ok  # the key
        assert env.export()["audit"] == [{"entry_id": "b1", "note": "m7"}]
        assert [a["replayed"] for a in env.audit()] == [False, True]
    report = check_domain(str(folder))
    assert report.passed, [(c.name, c.detail) for c in report.failed()]


@pytest.mark.parametrize(
    ("schema", "message", "spec_message"),
    [
        ("CREATE TABLE _rewardkit_dirty (kind TEXT, id TEXT);", "table '_rewardkit_dirty'", None),
        ("CREATE TABLE t (a TEXT); CREATE TABLE _REWARDKIT_LOG (a TEXT);", "table '_REWARDKIT_LOG'", None),
        ("CREATE TABLE t (a TEXT); CREATE INDEX _rewardkit_i ON t (a);", "index '_rewardkit_i'", None),
        ("CREATE TABLE t (a TEXT, _rewardkit_rowid INTEGER);", "column '_rewardkit_rowid' of table t", None),
        # A schema runs nothing but table and index definitions: the ATTACH is refused before it runs.
        ("ATTACH ':memory:' AS rewardkit; CREATE TABLE t (a TEXT);", "schema:1: .* found ATTACH", "found ATTACH"),
    ],
)
def test_a_schema_that_takes_a_name_the_harness_keeps_is_refused_naming_it(
    tmp_path: Path, schema: str, message: str, spec_message: str | None
) -> None:
    with pytest.raises(DomainDataError, match=message) as python:
        environment(Tables(schema, {}), {})()
    said = str(python.value)
    assert "\n" not in said and ("rename" in said or "found ATTACH" in said)
    folder = tmp_path / "spec"
    shutil.copytree(SPEC, folder)
    (folder / "schema.sql").write_text(schema, encoding="utf-8")
    (folder / "seed.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DomainError, match=spec_message or message) as spec:
        get_domain(str(folder))
    assert f"domain {folder}: " in str(spec.value) and "\n" not in str(spec.value)


UNFIT = [
    pytest.param("SP\ud800", id="lone_surrogate"),
    pytest.param(2**63, id="int_past_2_63"),
    pytest.param(-(2**63) - 1, id="int_below_minus_2_63"),
    pytest.param([1], id="list"),
    pytest.param({"a": 1}, id="object"),
    pytest.param(float("inf"), id="infinity"),
]
MEMORY_SCHEMA = "CREATE TABLE books (id TEXT PRIMARY KEY, copies INTEGER NOT NULL, note);"


@pytest.mark.parametrize("value", UNFIT)
@pytest.mark.parametrize(
    "where",
    [
        "memory",
        "insert.values",
        "upsert.values",
        "update.values",
        "update.key",
        "delete.key",
        "insert.column_name",
        "delete.table_name",
    ],
)
def test_a_value_sqlite_cannot_hold_is_a_memory_error(value: Any, where: str) -> None:
    row = {"id": "b1", "copies": 1, "note": "x"}
    if where == "memory":
        with pytest.raises(MemorySchemaError, match=r"books\[0\]: note: ") as info:
            open_memory(MEMORY_SCHEMA, {"books": [{**row, "note": value}]})
        str(info.value).encode("utf-8")  # the message goes back to the model: nothing in it that UTF-8 cannot hold
        return
    conn = open_memory(MEMORY_SCHEMA, {"books": [row]})
    op, part = where.split(".")
    write: dict[str, Any] = {"op": op, "table": "books", "values": {"note": value}, "key": {"id": "b1"}}
    if part == "key":
        write["key"] = {"id": value}
    if part == "column_name":
        write["values"] = {str(value): 1}
    if part == "table_name":
        write["table"] = f"books{value}"
    if op in ("insert", "upsert"):
        write["values"] = {"id": "b2", "copies": 1, **write["values"]}
    with pytest.raises(MemorySchemaError, match=rf"writes\[0\]: {op} books") as info:
        apply_writes(conn, [write], ["books"])
    str(info.value).encode("utf-8")
    assert tuple(conn.execute("SELECT count(*), max(note) FROM books").fetchone()) == (1, "x")


@pytest.mark.parametrize("value", UNFIT)
def test_a_result_key_sqlite_cannot_hold_is_no_row_of_the_memory(value: Any) -> None:
    conn = open_memory(MEMORY_SCHEMA, {"books": [{"id": "b1", "copies": 1}]})
    assert contradiction(conn, {"id": value, "copies": 5}, ["books"]) is None
    assert "holds 1" in contradiction(conn, [{"id": "b1", "copies": 5}], ["books"])


BIG = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def count_at_least(conn: Any, n: int) -> int:
    return conn.execute("SELECT count(*) FROM items WHERE qty >= ?", (n,)).fetchone()[0]


@pytest.mark.parametrize("n", [2**63, -(2**63) - 1, 10**30])
def test_an_agent_integer_past_64_bits_is_a_schema_violation(n: int) -> None:
    make = environment(
        Tables("CREATE TABLE items (qty INTEGER);", {"items": [{"qty": 1}]}),
        {"count": ToolSpec("count", "Count.", BIG, "read", count_at_least)},
    )
    with make() as env:
        result = env.call("count", {"n": n})
        assert result.code is ResultCode.SCHEMA_VIOLATION and "64 bits" in result.value["error"]["message"]
        assert env.call("count", {"n": 2**63 - 1}).value == 0 and env.audit()[0]["code"] == "SCHEMA_VIOLATION"


def test_a_rule_read_of_an_unbounded_integer_argument_is_refused_not_raised(tmp_path: Path) -> None:
    tools = [
        {
            "name": "get_slot",
            "description": "A slot.",
            "risk": "read",
            "returns": {"type": "object"},
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "rule": {"get": "slots", "key": {"n": "n"}},
        }
    ]
    folder = write_spec(tmp_path / "slots_spec", "CREATE TABLE slots (n INTEGER PRIMARY KEY);", tools, [], {})
    with load_spec(folder).env_for(None) as env:
        assert env.call("get_slot", {"n": 2**64}).code is ResultCode.SCHEMA_VIOLATION


@pytest.mark.parametrize("price", ["\ud800", 2**64, [1]])
def test_by_rule_refuses_a_write_of_an_argument_sqlite_cannot_hold(price: Any) -> None:
    sim = get_domain(str(SPEC)).simulation
    conn = open_memory(sim.tables.schema, sim.tables.seed_rows())
    call = SimCall(
        sim.tools["change_price"],
        {"sku": "SP002", "price": price},
        sim.returns["change_price"],
        sim.rules["change_price"],
        conn,
        sim.tables,
    )
    assert by_rule(call)["code"] == "PRECONDITION_FAILED"
