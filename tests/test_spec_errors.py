"""A domain given as a spec (``domain.json``) refuses every bad value in one line, naming the file and the key.

The spec is a small valid one written into ``tmp_path`` (a shop of items and notes, one tool per rule kind); each
case changes one thing. ``schema.sql`` holds table and index definitions only, checked by SQLite's own parser before
anything runs. ``rewardkit env check`` on a spec speaks of its ``domain.json`` keys; ``env tools`` shows each tool's
first sentence whole. Nothing is mocked: SQLite, the simulator and the reward really run.
"""

from __future__ import annotations

import copy
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rewardkit.cli import main
from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.spec_domain import load_spec
from rewardkit.runs.domains.domain_check import check_domain
from rewardkit.runs.domains.domain_data_check import splits_check

ITEM_ID = {"type": "string", "pattern": "^I[0-9]{2}$"}
KEY = {"type": "string", "minLength": 1}
ITEM = {
    "type": "object",
    "properties": {"item_id": {"type": "string"}, "name": {"type": "string"}, "qty": {"type": "integer"}},
    "required": ["item_id", "name", "qty"],
}
NOTE = {"type": "object", "properties": {"note_id": {"type": "string"}, "item_id": {"type": "string"}}}


def _params(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TOOLS = [
    {
        "name": "get_item",
        "description": "Show an item, e.g. its quantity. Read only.",
        "risk": "read",
        "parameters": {**_params(["item_id"], item_id={"$ref": "#/$defs/item_id"}), "$defs": {"item_id": ITEM_ID}},
        "returns": ITEM,
        "rule": {"get": "items", "key": {"item_id": "item_id"}},
    },
    {
        "name": "list_notes",
        "description": "List the notes on an item.",
        "risk": "read",
        "parameters": _params(["item_id"], item_id=ITEM_ID),
        "returns": {"type": "array", "items": NOTE},
        "rule": {"list": "notes", "where": {"item_id": "item_id"}},
    },
    {
        "name": "set_qty",
        "description": "Set an item's quantity.",
        "risk": "write",
        "parameters": _params(["item_id", "qty"], item_id=ITEM_ID, qty={"type": "integer"}, idempotency_key=KEY),
        "returns": ITEM,
        "rule": {"update": "items", "key": {"item_id": "item_id"}, "set": {"qty": "qty"}},
    },
    {
        "name": "add_note",
        "description": "Add a note to an item; returns its id.",
        "risk": "write",
        "parameters": _params(["item_id", "body"], item_id=ITEM_ID, body={"type": "string"}, idempotency_key=KEY),
        "returns": NOTE,
        "rule": {
            "insert": "notes",
            "values": {"item_id": "item_id", "body": "body", "kind": {"value": "memo"}},
            "id": {"column": "note_id", "prefix": "N", "width": 3},
        },
    },
    {
        "name": "put_item",
        "description": "Add an item, or replace the one with its id.",
        "risk": "write",
        "parameters": _params(
            ["item_id", "name", "qty"],
            item_id=ITEM_ID,
            name={"type": "string"},
            qty={"type": "integer"},
            idempotency_key=KEY,
        ),
        "returns": ITEM,
        "rule": {"upsert": "items", "values": {"item_id": "item_id", "name": "name", "qty": "qty"}},
    },
]
SPEC = {
    "name": "tiny_shop",
    "language": "en",
    "policy": "policy.md",
    "guidelines": "guidelines.md",
    "schema": "schema.sql",
    "seed": "seed.json",
    "tasks": "tasks.json",
    "splits": {"train": ["t1", "t2"], "test": ["t3"]},
    "tools": TOOLS,
}
SCHEMA = """-- A tiny shop: items, and notes on them (a ';' in a comment is no statement's end).
CREATE TABLE items (item_id TEXT PRIMARY KEY, name TEXT NOT NULL CHECK (name != ';'),
                    qty INTEGER NOT NULL CHECK (qty >= 0));
CREATE TABLE notes (note_id TEXT PRIMARY KEY, item_id TEXT NOT NULL REFERENCES items(item_id),
                    body TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'memo');
CREATE INDEX notes_by_item ON notes (item_id);
"""
SEED = {
    "items": [{"item_id": "I01", "name": "Pen", "qty": 3}, {"item_id": "I02", "name": "Cup", "qty": 0}],
    "notes": [{"note_id": "N001", "item_id": "I01", "body": "blue ink"}],
}


def _task(task_id: str, reason: str, actions: list[dict[str, Any]], said: list[str]) -> dict[str, Any]:
    return {
        "id": task_id,
        "user_scenario": {"instructions": {"reason_for_call": reason, "known_info": "I run it."}},
        "evaluation_criteria": {"actions": actions, "communicate_info": said, "nl_assertions": []},
    }


TASKS = [
    _task(
        "t1",
        "Set the stock of the cup I02 to 5.",
        [{"name": "set_qty", "arguments": {"item_id": "I02", "qty": 5}}],
        ["5"],
    ),
    _task(
        "t2",
        "Add the note 'fragile' to the pen I01 and tell me its id.",
        [{"name": "add_note", "arguments": {"item_id": "I01", "body": "fragile"}}],
        ["N002"],
    ),
    _task("t3", "How many pens (I01) are there?", [{"name": "get_item", "arguments": {"item_id": "I01"}}], ["3"]),
]
FILES = {
    "policy.md": "You run a tiny shop's stock. Look an item up before changing it.\n",
    "guidelines.md": "You are the shop's owner. Say only what your instructions hold.\n",
    "schema.sql": SCHEMA,
    "seed.json": json.dumps(SEED),
    "tasks.json": json.dumps(TASKS),
}


def write_spec(folder: Path, spec: Any = None, files: dict[str, str] | None = None) -> Path:
    """The small valid spec in ``folder`` (made), with ``spec`` as its domain.json (raw text when a string)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**FILES, **(files or {})}.items():
        (folder / name).write_text(text, encoding="utf-8")
    spec = SPEC if spec is None else spec
    text = spec if isinstance(spec, str) else json.dumps(spec)  # a lone surrogate as its \udXXX escape
    (folder / "domain.json").write_text(text, encoding="utf-8")
    return folder


def fresh_name(path: Path) -> str:
    """A domain name no other test took: a process registers each domain's name once."""
    return f"tiny_{zlib.crc32(str(path).encode()):08x}"


def changed(change: Callable[[dict[str, Any]], Any], name: str | None = None) -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    spec["name"] = name or spec["name"]
    change(spec)
    return spec


def tool(i: int, **values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda s: s["tools"][i].update(values)


def rule(i: int, **values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda s: s["tools"][i]["rule"].update(values)


def drop(*path: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        for key in path[:-1]:
            spec = spec[key]
        del spec[path[-1]]

    return change


def test_the_small_spec_loads_and_passes_every_check(tmp_path: Path) -> None:
    folder = write_spec(tmp_path / "spec", changed(lambda s: None, fresh_name(tmp_path)))
    domain = load_spec(folder)
    report = check_domain(str(folder))
    assert sorted(domain.tools) == sorted(t["name"] for t in TOOLS)
    assert report.passed, report.failed()


BAD = "not-a-file-name"
# (case id, change of domain.json, what the one line holds besides "domain.json")
CASES = [
    ("name-number", lambda s: s.update(name=5), ["name"]),
    ("name-empty", lambda s: s.update(name=""), ["name"]),
    ("name-newline", lambda s: s.update(name="a\nb"), ["name"]),
    ("no-name", drop("name"), ["name"]),
    ("language-number", lambda s: s.update(language=5), ["language"]),
    ("language-list", lambda s: s.update(language=["en"]), ["language"]),
    ("policy-number", lambda s: s.update(policy=5), ["policy"]),
    ("policy-list", lambda s: s.update(policy=["policy.md"]), ["policy"]),
    ("no-policy", drop("policy"), ["policy"]),
    ("guidelines-object", lambda s: s.update(guidelines={}), ["guidelines"]),
    ("schema-null", lambda s: s.update(schema=None), ["schema"]),
    ("seed-true", lambda s: s.update(seed=True), ["seed"]),
    ("seed-number", lambda s: s.update(seed=5), ["seed"]),
    ("tasks-number", lambda s: s.update(tasks=5), ["tasks"]),
    ("tasks-object", lambda s: s.update(tasks={"a": "tasks.json"}), ["tasks"]),
    ("tasks-empty-list", lambda s: s.update(tasks=[]), ["tasks"]),
    ("tasks-list-number", lambda s: s.update(tasks=["tasks.json", 3]), ["tasks[1]"]),
    ("tasks-twice", lambda s: s.update(tasks=["tasks.json", "tasks.json"]), ["tasks[1]", "twice"]),
    ("no-tasks", drop("tasks"), ["tasks"]),
    ("splits-list", lambda s: s.update(splits=["t1"]), ["splits", "object of split name"]),
    ("splits-string", lambda s: s.update(splits="train"), ["splits"]),
    ("split-string", lambda s: s.update(splits={"train": "t1"}), ["splits.train"]),
    ("split-id-float", lambda s: s.update(splits={"train": [1.5]}), ["splits.train[0]"]),
    ("split-id-object", lambda s: s.update(splits={"train": [{}]}), ["splits.train[0]"]),
    ("tools-object", lambda s: s.update(tools={}), ["tools"]),
    ("tools-empty", lambda s: s.update(tools=[]), ["tools"]),
    ("tool-string", lambda s: s["tools"].__setitem__(0, "get_item"), ["tools[0]"]),
    ("tool-name-number", tool(0, name=5), ["tools[0].name"]),
    ("tool-name-spaces", tool(0, name="get item"), ["tools[0].name"]),
    ("tool-name-empty", tool(0, name=""), ["tools[0].name"]),
    ("tool-description-number", tool(0, description=5), ["tools[0].description"]),
    ("tool-description-list", tool(0, description=["x"]), ["tools[0].description"]),
    ("tool-parameters-list", tool(0, parameters=[]), ["tools[0].parameters"]),
    ("tool-parameters-not-object", tool(1, parameters={"type": "string"}), ["tools[1].parameters", "object"]),
    ("tool-properties-list", tool(1, parameters={"type": "object", "properties": []}), ["tools[1].parameters"]),
    ("tool-risk", tool(0, risk="delete"), ["tools[0].risk"]),
    ("tool-risk-list", tool(0, risk=["read"]), ["tools[0].risk"]),
    ("tool-returns-number", tool(0, returns=5), ["tools[0].returns"]),
    ("tool-no-returns", drop("tools", 0, "returns"), ["tools[0].returns"]),
    ("tool-unknown-key", tool(0, gates=["x"]), ["tools[0]", "gates"]),
    (
        "parameters-ref-nowhere",
        tool(1, parameters={**_params([], item_id={"$ref": "#/$defs/nope"})}),
        ["tools[1].parameters", "#/$defs/nope"],
    ),
    (
        "parameters-ref-remote",
        tool(1, parameters={**_params([], item_id={"$ref": "https://example.com/s.json"})}),
        ["tools[1].parameters", "https://example.com/s.json"],
    ),
    ("returns-ref-nowhere", tool(0, returns={"$ref": "#/definitions/item"}), ["tools[0].returns", "#/definitions"]),
    ("returns-ref-number", tool(0, returns={"$ref": 5}), ["tools[0].returns"]),
    # A $ref loop that never steps into the value: validating anything against it would recurse without end.
    ("returns-ref-self", tool(0, returns={"$ref": "#"}), ["tools[0].returns", "leads back to itself"]),
    (
        "parameters-refs-each-other",
        tool(
            1,
            parameters={
                **_params([], item_id={"$ref": "#/$defs/a"}),
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
            },
        ),
        ["tools[1].parameters", "leads back to itself"],
    ),
    ("tool-twice", lambda s: s["tools"].append(dict(s["tools"][0])), ["tools[0]", "tools[5]", "get_item"]),
    ("rule-list", tool(0, rule=[]), ["tools[0].rule"]),
    ("rule-string", tool(0, rule="get"), ["tools[0].rule"]),
    ("rule-two-ops", rule(0, list="items"), ["tools[0].rule"]),
    ("rule-table-number", rule(0, get=5), ["tools[0].rule: get"]),
    ("rule-table-list", rule(0, get=["items"]), ["tools[0].rule: get"]),
    ("rule-key-list", rule(0, key=["item_id"]), ["tools[0].rule: key"]),
    ("rule-key-null", rule(0, key=None), ["tools[0].rule: key"]),
    ("rule-key-value-list", rule(0, key={"item_id": ["item_id"]}), ["tools[0].rule: key.item_id"]),
    ("rule-key-value-number", rule(0, key={"item_id": 7}), ["tools[0].rule: key.item_id"]),
    ("rule-constant-list", rule(0, key={"item_id": {"value": [1]}}), ["tools[0].rule: key.item_id"]),
    ("rule-constant-huge", rule(0, key={"item_id": {"value": 2**70}}), ["tools[0].rule: key.item_id"]),
    ("rule-constant-misspelt", rule(0, key={"item_id": {"valu": "I01"}}), ["tools[0].rule: key.item_id"]),
    ("rule-where-string", rule(1, where="item_id"), ["tools[1].rule: where"]),
    ("rule-set-number", rule(2, set=5), ["tools[2].rule: set"]),
    ("rule-values-list", rule(3, values=[]), ["tools[3].rule: values"]),
    ("rule-id-string", rule(3, id="note_id"), ["tools[3].rule: id"]),
    ("rule-id-column-number", rule(3, id={"column": 5}), ["tools[3].rule: id.column"]),
    ("rule-id-no-column", rule(3, id={"prefix": "N"}), ["tools[3].rule: id.column"]),
    ("rule-id-prefix-number", rule(3, id={"column": "note_id", "prefix": 5}), ["tools[3].rule: id.prefix"]),
    ("rule-id-width-string", rule(3, id={"column": "note_id", "width": "3"}), ["tools[3].rule: id.width"]),
    ("rule-id-width-huge", rule(3, id={"column": "note_id", "width": 10**30}), ["tools[3].rule: id.width"]),
    ("rule-id-width-bool", rule(3, id={"column": "note_id", "width": True}), ["tools[3].rule: id.width"]),
    ("rule-id-unknown-key", rule(3, id={"column": "note_id", "step": 2}), ["tools[3].rule: id", "step"]),
    ("rule-id-on-update", rule(2, id={"column": "item_id"}), ["tools[2].rule", "id"]),
    ("rule-where-on-get", rule(0, where={"item_id": "item_id"}), ["tools[0].rule", "where"]),
    ("rule-unknown-part", rule(1, limit=5), ["tools[1].rule", "limit"]),
    ("unknown-key", lambda s: s.update(gates={}), ["gates"]),
    ("policy-leaves-folder", lambda s: s.update(policy="../../etc/passwd"), ["policy", "outside"]),
    ("policy-absolute", lambda s: s.update(policy="/etc/passwd"), ["policy", "outside"]),
    ("schema-leaves-folder", lambda s: s.update(schema="../schema.sql"), ["schema", "outside"]),
    ("seed-leaves-folder", lambda s: s.update(seed="../seed.json"), ["seed", "outside"]),
    ("guidelines-absolute", lambda s: s.update(guidelines="/etc/hostname"), ["guidelines", "outside"]),
    ("tasks-leave-folder", lambda s: s.update(tasks=["tasks.json", "../tasks.json"]), ["tasks[1]", "outside"]),
    ("policy-nul", lambda s: s.update(policy="policy\0.md"), ["policy"]),
    ("policy-lone-surrogate", lambda s: s.update(policy="\ud800.md"), ["policy"]),
    ("description-lone-surrogate", tool(0, description="Show \udcff an item."), ["tools[0].description"]),
    ("policy-is-the-folder", lambda s: s.update(policy="."), ["policy"]),
]


@pytest.mark.parametrize(("change", "fragments"), [pytest.param(c, f, id=i) for i, c, f in CASES])
def test_a_bad_value_is_one_line_naming_the_key(tmp_path: Path, change: Callable, fragments: list[str]) -> None:
    folder = write_spec(tmp_path / "spec", changed(change))
    (tmp_path / "schema.sql").write_text(SCHEMA, encoding="utf-8")  # outside the folder, readable: still refused
    (tmp_path / "seed.json").write_text(FILES["seed.json"], encoding="utf-8")
    (tmp_path / "tasks.json").write_text(FILES["tasks.json"], encoding="utf-8")
    with pytest.raises(DomainDataError) as info:
        load_spec(folder).tasks()
    message = str(info.value)
    assert "\n" not in message and "domain.json" in message, message
    assert all(f in message for f in fragments), (fragments, message)


# domain.json's text as written, not as json.dumps writes it
RAW_CASES = [
    ("nested-too-deep", "[" * 100_000 + "]" * 100_000, ["domain.json"]),
    ("nan", json.dumps(SPEC).replace('"language": "en"', '"language": NaN'), ["NaN"]),
    ("key-twice", json.dumps(SPEC).replace('"language": "en"', '"language": "en", "language": "zh"'), ["language"]),
    ("not-json", "{", ["domain.json"]),
    ("a-list", "[]", ["domain.json", "object"]),
]


@pytest.mark.parametrize(("text", "fragments"), [pytest.param(t, f, id=i) for i, t, f in RAW_CASES])
def test_a_bad_domain_json_text_is_one_line(tmp_path: Path, text: str, fragments: list[str]) -> None:
    with pytest.raises(DomainDataError) as info:
        load_spec(write_spec(tmp_path / "spec", text))
    message = str(info.value)
    assert "\n" not in message and all(f in message for f in fragments), message


# (case id, schema.sql, its line and what was found)
SCHEMA_CASES = [
    ("attach", "ATTACH DATABASE '{out}' AS x;\nCREATE TABLE x.t (a);\n", "schema.sql:1:", "found ATTACH"),
    ("attach-after-a-table", SCHEMA + "CREATE TABLE z (a); ATTACH '{out}' AS x;\n", "schema.sql:7:", "found ATTACH"),
    ("pragma", SCHEMA + "PRAGMA writable_schema = ON;\n", "schema.sql:7:", "found PRAGMA"),
    ("insert", SCHEMA + "\n-- rows\nINSERT INTO items VALUES ('I09', 'Box', 1);", "schema.sql:9:", "found INSERT"),
    (
        "trigger",
        SCHEMA + "CREATE TRIGGER t AFTER INSERT ON items BEGIN DELETE FROM notes; END;",
        "schema.sql:7:",
        "found CREATE TRIGGER",
    ),
    ("view", SCHEMA + "CREATE VIEW v AS SELECT * FROM items;", "schema.sql:7:", "found CREATE VIEW"),
    ("table-as-select", SCHEMA + "CREATE TABLE copy AS SELECT * FROM items;", "schema.sql:7:", "SELECT"),
    ("temp-table", SCHEMA + "CREATE TEMP TABLE t (a);", "schema.sql:7:", "found CREATE TEMP"),
    ("vacuum-into", SCHEMA + "VACUUM INTO '{out}';", "schema.sql:7:", "found VACUUM"),
    ("begin", "BEGIN;\n" + SCHEMA, "schema.sql:1:", "found BEGIN"),
    ("no-semicolon-select", SCHEMA + "SELECT 1", "schema.sql:7:", "found SELECT"),
    ("syntax-error", SCHEMA + "CREATE TABLE (;", "schema.sql:7:", "syntax error"),
    ("two-tables-one-name", SCHEMA + "CREATE TABLE items (a);", "schema.sql:7:", "already exists"),
]


@pytest.mark.parametrize(("schema", "where", "found"), [pytest.param(s, w, f, id=i) for i, s, w, f in SCHEMA_CASES])
def test_schema_sql_holds_table_definitions_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: str, where: str, found: str
) -> None:
    out = tmp_path / "written.db"
    spec = changed(lambda s: None, fresh_name(tmp_path))
    folder = write_spec(tmp_path / "spec", spec, files={"schema.sql": schema.format(out=out)})
    code = main(["env", "check", str(folder)])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("rewardkit env check: "), err
    assert f"{where} " in err and found in err, err
    assert not out.exists()  # nothing ran: the statement was refused before any schema was executed


def test_a_schema_without_a_final_semicolon_and_with_comments_loads(tmp_path: Path) -> None:
    schema = "/* items; notes */\n" + SCHEMA.rstrip().rstrip(";") + "  -- the last; no ';' after it\n"
    domain = load_spec(write_spec(tmp_path / "spec", files={"schema.sql": schema}))
    assert sorted(domain.simulation.tables.names) == ["items", "notes"]


# A bad spec through the CLI: exit 2, one line on stderr
CLI_CASES = [
    ("tasks-number", lambda s: s.update(tasks=5), "tasks"),
    ("tool-twice", lambda s: s["tools"].append(dict(s["tools"][2])), "tools[2] and tools[5]"),
    ("policy-outside", lambda s: s.update(policy="../../etc/passwd"), "policy"),
    ("width-huge", rule(3, id={"column": "note_id", "width": 10**30}), "tools[3].rule: id.width"),
]


@pytest.mark.parametrize(("change", "fragment"), [pytest.param(c, f, id=i) for i, c, f in CLI_CASES])
def test_env_check_on_a_bad_spec_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Callable, fragment: str
) -> None:
    folder = write_spec(tmp_path / "spec", changed(change, fresh_name(tmp_path)))
    capsys.readouterr()
    code = main(["env", "check", str(folder)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("rewardkit env check: ") and "domain.json" in err and fragment in err, err


def _checks(tmp_path: Path, change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    folder = write_spec(tmp_path / "spec", changed(change, fresh_name(tmp_path)))
    return {c.name: c for c in check_domain(str(folder)).checks}


def test_a_spec_without_guidelines_passes_the_guidelines_check(tmp_path: Path) -> None:
    checks = _checks(tmp_path, drop("guidelines"))
    assert checks["guidelines"].passed and "optional" in checks["guidelines"].detail, checks["guidelines"]


# (case id, change of the spec, the failing check, the domain.json key its hint names)
HINT_CASES = [
    ("empty-guidelines", lambda s: s.update(guidelines="blank.md"), "guidelines", "domain.json's guidelines"),
    ("empty-policy", lambda s: s.update(policy="blank.md"), "policy", "domain.json's policy"),
    ("empty-description", tool(1, description=" "), "schema:list_notes", "domain.json's tools[1].description"),
    ("split-of-no-task", lambda s: s.update(splits={"train": ["t1", "t9"], "test": ["t3"]}), "splits", "domain.json"),
]


@pytest.mark.parametrize(("change", "check", "key"), [pytest.param(c, n, k, id=i) for i, c, n, k in HINT_CASES])
def test_a_spec_checks_hints_speak_of_domain_json(tmp_path: Path, change: Callable, check: str, key: str) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "blank.md").write_text("  \n", encoding="utf-8")
    checks = _checks(tmp_path, change)
    failed = {n: c.detail for n, c in checks.items() if not c.passed}
    assert set(failed) == {check} and key in failed[check], failed
    assert not any(python in failed[check] for python in ("()", "Domain", "=")), failed[check]


@pytest.mark.parametrize(
    ("splits", "passed", "detail"),
    [
        ({"train": ["a", "b"], "test": []}, True, "train 2, test 0"),
        ({"base": ["a", "b"], "train": ["a", "b"], "test": []}, False, "share 2"),
        ({"base": ["a", "b"], "train": ["a"], "test": ["b"]}, True, "base holds all 2"),
        ({"train": ["a"], "test": []}, False, "1 task(s) in no split: 'b'"),
    ],
    ids=["empty-test", "base-train-all-empty-test", "base-whole", "really-missing"],
)
def test_an_empty_split_is_not_a_missing_task(splits: dict[str, list[str]], passed: bool, detail: str) -> None:
    found = splits_check(splits, {"a": {}, "b": {}})
    assert (found.passed, detail in found.detail) == (passed, True), found


@pytest.mark.parametrize(
    ("description", "shown"),
    [
        ("Show an item, e.g. its quantity. Read only.", "Show an item, e.g. its quantity."),
        ("Find a user, i.e. by email. More.", "Find a user, i.e. by email."),
        ("Costs 2.5 dollars. Pay first.", "Costs 2.5 dollars."),
        ("Rooms etc. are listed. Then more.", "Rooms etc. are listed."),
        ("查看商品详情。需审批。", "查看商品详情。"),
        ("No full stop at all", "No full stop at all"),
        ("First line.\nSecond line.", "First line."),
    ],
)
def test_env_tools_shows_each_tools_first_sentence_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], description: str, shown: str
) -> None:
    folder = write_spec(tmp_path / "spec", changed(tool(0, description=description), fresh_name(tmp_path)))
    capsys.readouterr()
    assert main(["env", "tools", "--domain", str(folder)]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("get_item"))
    assert line.endswith(f"(item_id)  {shown}"), line
