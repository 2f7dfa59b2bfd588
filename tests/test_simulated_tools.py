"""Simulated tools (B1): a spec-only domain answered by rule or by a tool LLM over real HTTP, from a memory database
in which writes are kept, so a later read agrees; every refusal, retry and ending is reached."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sim_server import SimServer
from spec_domains import KEY, write_spec
from spec_domains import task as spec_task

from rewardkit.envs import get_domain
from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.memory import open_memory
from rewardkit.envs.simulated import SimCall, ToolSimError, by_rule, contradiction
from rewardkit.envs.spec_domain import load_spec
from rewardkit.envs.task_verdict import gold_outcome, task_verdict
from rewardkit.envs.tasks import held_out
from rewardkit.loop.roles import JsonRole
from rewardkit.loop.tool_sim import MemoryWriter, ToolModel, simulated_domain
from rewardkit.runs.domains.domain_check import check_domain
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.episodes.spec import RunSpec
from rewardkit.runs.episodes.synthesis import synthesize_run

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "merchant_spec"
NUTS = {"sku": "SP002", "name": "每日坚果礼盒", "price": 89.0, "stock": 40}
WRITE_79 = {
    "ok": True,
    "result": {**NUTS, "price": 79},
    "writes": [{"op": "update", "table": "products", "key": {"sku": "SP002"}, "values": {"price": 79}}],
}


def request(body: dict[str, Any]) -> dict[str, Any]:
    """The tool model's request: the last user message, JSON (a retry's last message is the refusal)."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return json.loads(users[0])


def refusals(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"][2:] if m["role"] == "user"]


def from_memory(body: dict[str, Any]) -> dict[str, Any]:
    """A good tool model's read: the row as the memory in its prompt holds it."""
    asked = request(body)
    sku = asked["call"]["arguments"]["sku"]
    (row,) = [r for r in asked["memory"]["products"] if r["sku"] == sku]
    return {"ok": True, "result": row, "writes": []}


def tool_server(answers: dict[str, Callable[[dict[str, Any]], Any]]) -> SimServer:
    """A tool LLM: per tool, ``answer(body)`` (the n-th attempt sees n-1 refusals)."""
    return SimServer(reply=lambda body: json.dumps(answers[request(body)["call"]["name"]](body), ensure_ascii=False))


def simulated(server: SimServer, attempts: int = 3, memory: SimServer | None = None) -> Any:
    tool = ToolModel(JsonRole("tool", server.base_url, "sim", attempts=attempts))
    writer = MemoryWriter(JsonRole("memory", memory.base_url, "sim"), load_spec(SPEC)) if memory else None
    return simulated_domain(get_domain(str(SPEC)), tool, writer)


def test_a_rule_write_is_what_a_later_rule_read_returns() -> None:
    with get_domain(str(SPEC)).env_for(None) as env:
        before = env.state_hash()
        wrote = env.call("change_price", {"sku": "SP002", "price": 79})
        read = env.call("get_product", {"sku": "SP002"})
        assert (wrote.ok, read.value["price"], env.state_hash() != before) == (True, 79, True)
        # A write the schema refuses (a room that is not there) is the tool's refusal, and changes nothing.
        refused = env.call("put_product_on_air", {"room_id": "R999", "sku": "SP001"})
        assert refused.code.value == "NOT_FOUND" and env.export()["rooms"][0]["on_air_sku"] == "SP001"


def test_a_simulated_write_is_what_a_later_simulated_read_returns() -> None:
    with tool_server({"change_price": lambda b: WRITE_79, "get_product": from_memory}) as server:
        domain = simulated(server)
        with domain.env_for(None) as env:
            assert env.call("change_price", {"sku": "SP002", "price": 79}).ok
            read = env.call("get_product", {"sku": "SP002"})
        # The read's prompt held the memory after the write: the model read 79 off it.
        assert read.value["price"] == 79 and request(server.requests[1])["memory"]["products"][1]["price"] == 79
        # The second call's prompt also listed the first call and its answer.
        assert [c["tool"] for c in request(server.requests[1])["calls_so_far"]] == ["change_price"]


def stale_then_fresh(body: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "result": NUTS, "writes": []} if not refusals(body) else from_memory(body)


@pytest.mark.parametrize(
    ("name", "answer", "refused_for"),
    [
        # The stale price contradicts the earlier write: refused, asked again, then answered from the memory.
        ("contradiction", stale_then_fresh, "the memory holds 79"),
        # Not JSON at all, then a good answer.
        ("not_json", lambda b: from_memory(b) if refusals(b) else "the price is 79", "no JSON object"),
        # The result breaks the declared return schema (no stock), then a good answer.
        (
            "schema",
            lambda b: from_memory(b) if refusals(b) else {"ok": True, "result": {"sku": "SP002"}},
            "does not fit what get_product returns",
        ),
        # A read that claims to write.
        ("read_writes", lambda b: from_memory(b) if refusals(b) else {**WRITE_79, "result": NUTS}, "is a read tool"),
    ],
)
def test_a_refused_answer_is_asked_again_with_the_problem(name: str, answer: Any, refused_for: str) -> None:
    answers = {"change_price": lambda b: WRITE_79, "get_product": answer}
    with tool_server(answers) as server:
        domain = simulated(server)
        with domain.env_for(None) as env:
            env.call("change_price", {"sku": "SP002", "price": 79})
            read = env.call("get_product", {"sku": "SP002"})
        ledger = domain.simulation.answer.ledger.summary()
    # 1 write + 2 attempts at the read = 3 requests; the refused one is counted invalid.
    assert (read.value["price"], server.count, ledger["invalid"]) == (79, 3, 1)
    assert refused_for in refusals(server.requests[2])[0]


def test_a_tool_model_that_never_answers_right_ends_the_episode_as_tool_sim_error(tmp_path: Path) -> None:
    bad = {"ok": True, "result": {"sku": "SP002"}, "writes": []}  # breaks the return schema every time
    with tool_server({"change_price": lambda b: bad, "get_product": lambda b: bad}) as server:
        spec = RunSpec(
            agent="gold",
            domain=str(SPEC),
            split="train",
            tasks=("m01",),
            simulated=True,
            tool_model=server.base_url,
            tool_model_name="sim",
        )
        report = synthesize_run(spec, tmp_path / "sft.jsonl", None, tmp_path / "ep.jsonl", progress=False)
    # m01's gold replay is the first call, 3 attempts when the task is selected (the simulator's failure is not the
    # task's) and 3 more when its episode needs the gold state: then tool_sim_error before any turn.
    assert (report["kept"], report["rejected"]) == (0, {"tool_sim_error": 1})
    (tool,) = [e for e in report["ledger"] if e["role"] == "tool"]
    assert (tool["requests"], tool["invalid"], tool["failures"]) == (6, 6, 0)


GOOD_MEMORY = {"products": [NUTS], "rooms": [], "coupons": [], "cue_cards": []}


@pytest.mark.parametrize(
    ("memories", "kept", "rejected", "requests"),
    [
        # Written once for m01's gold replay and both its trials; the second trial repeats the first trajectory.
        ([GOOD_MEMORY], 1, {"duplicate": 1}, 1),
        ([{"warehouse": []}, GOOD_MEMORY], 1, {"duplicate": 1}, 2),  # an unknown table is refused, then a good one
        # CHECK (price > 0) refuses all 3 attempts: both trials end as tool_sim_error, with no fourth request.
        ([{"products": [{"sku": "SP002", "name": "x", "price": -1, "stock": 1}]}] * 3, 0, {"tool_sim_error": 2}, 3),
    ],
)
def test_the_memory_model_writes_each_tasks_memory(
    tmp_path: Path, memories: list, kept: int, rejected: dict, requests: int
) -> None:
    served = iter(memories)
    with SimServer(reply=lambda body: json.dumps(next(served)), models=["sim"]) as memory:
        spec = RunSpec(
            agent="gold",
            domain=str(SPEC),
            split="train",
            tasks=("m01",),
            simulated=True,
            memory_model=memory.base_url,
            trials=2,
        )
        report = synthesize_run(spec, tmp_path / "sft.jsonl", None, tmp_path / "ep.jsonl", progress=False)
        seen = memory.count
    assert (report["kept"], report["rejected"], seen) == (kept, rejected, requests)


def test_the_spec_domain_by_rule_ends_every_gold_episode_in_the_gold_memory(tmp_path: Path) -> None:
    spec = RunSpec(agent="gold", domain=str(SPEC), split="train", simulated=True)
    report = synthesize_run(spec, tmp_path / "sft.jsonl", None, tmp_path / "ep.jsonl", progress=False)
    records = [json.loads(line) for line in (tmp_path / "ep.jsonl").read_text(encoding="utf-8").splitlines()]
    domain, tasks = get_domain(str(SPEC)), get_domain(str(SPEC)).tasks()
    with domain.env_for(None) as env:
        seed = env.state_hash()
    finals = {r["task_id"]: r["state_hash"] for r in records if "task_id" in r}
    golds = {t: gold_outcome(domain.name, tasks[t]).state_hash for t in finals}
    # 6 training tasks, each kept; each final memory is its gold memory; 5 of them (all but m05, a read) wrote.
    assert (report["kept"], finals == golds) == (6, True)
    assert sum(h != seed for h in finals.values()) == 5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s["tools"][0].pop("returns"), "tools[0]"),
        (lambda s: s["tools"][0]["rule"].update(key={"code": "sku"}), "no column 'code' in the table"),
        (lambda s: s["tools"][3]["rule"].update(set={"price": "cost"}), "'cost' is not an argument of change_price"),
        (lambda s: s["tools"][1].update(rule={"update": "rooms"}), "risk must be 'write'"),
        (lambda s: s.update(schema="missing.sql"), "cannot read"),
        (lambda s: s["tools"][3]["parameters"]["properties"].pop("idempotency_key"), "idempotency_key"),
    ],
)
def test_a_bad_spec_names_the_key(tmp_path: Path, change: Callable[[dict], Any], message: str) -> None:
    folder = tmp_path / "spec"
    folder.mkdir()
    for file in SPEC.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    spec = json.loads((SPEC / "domain.json").read_text(encoding="utf-8"))
    change(spec)
    (folder / "domain.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DomainDataError, match=r"domain\.json") as info:
        load_spec(folder)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"domain": "retail", "simulated": True, "memory_model": "http://127.0.0.1:9/v1"}, "has Python tools"),
        ({"domain": str(SPEC), "tool_model": "http://127.0.0.1:9/v1"}, "add --tools simulated"),
        ({"domain": str(SPEC), "simulated": True, "tool_model": "ftp://x"}, "must be an http(s):// URL"),
    ],
)
def test_simulated_tools_refuse_what_they_cannot_run(tmp_path: Path, options: dict, message: str) -> None:
    spec = RunSpec(agent="gold", split="train", **options)
    with pytest.raises(RunError) as info:
        synthesize_run(spec, tmp_path / "sft.jsonl", None, tmp_path / "ep.jsonl", progress=False)
    assert message in str(info.value)


def test_a_rule_less_tool_raises_tool_sim_error() -> None:
    domain = get_domain(str(SPEC))
    rules = {k: v for k, v in domain.simulation.rules.items() if k != "get_product"}
    sim = type(domain.simulation)(domain.simulation.tables, domain.simulation.tools, domain.simulation.returns, rules)
    with sim.env(None) as env, pytest.raises(ToolSimError, match="has no rule"):
        env.call("get_product", {"sku": "SP002"})


def rule_played(body: dict[str, Any]) -> str:
    """A tool model that answers right: each tool's rule, run on the memory its prompt holds."""
    asked = request(body)
    domain = get_domain(str(SPEC))
    sim = domain.simulation
    name = asked["call"]["name"]
    conn = open_memory(sim.tables.schema, asked["memory"])
    call = SimCall(sim.tools[name], asked["call"]["arguments"], sim.returns[name], sim.rules[name], conn, sim.tables)
    return json.dumps(by_rule(call), ensure_ascii=False)


def test_a_tool_model_that_answers_right_ends_gold_episodes_in_the_gold_memory_and_replays(tmp_path: Path) -> None:
    cache = tmp_path / "sim.sqlite"
    with SimServer(reply=rule_played) as server:
        spec = RunSpec(
            agent="gold",
            domain=str(SPEC),
            split="train",
            simulated=True,
            tool_model=server.base_url,
            tool_model_name="sim",
            sim_cache=cache,
        )
        first = synthesize_run(spec, tmp_path / "a.jsonl", None, tmp_path / "a.episodes.jsonl", progress=False)
        sent = server.count
        again = synthesize_run(spec, tmp_path / "b.jsonl", None, tmp_path / "b.episodes.jsonl", progress=False)
        resent = server.count - sent
    # Every gold episode ends in its gold memory: 6 of 6 kept, as by rule; the same rows the second time.
    assert (first["kept"], again["kept"]) == (6, 6)
    assert (tmp_path / "a.jsonl").read_text(encoding="utf-8") == (tmp_path / "b.jsonl").read_text(encoding="utf-8")
    # The gold replay and the episode ask the same questions of one memory: 7 gold calls over 6 tasks, each sent
    # once (the episode's are the gold replay's, answered from the store); the second run sends nothing.
    assert (sent, resent) == (7, 0)


def test_a_spec_takes_its_tasks_from_several_files_and_holds_out_a_fifth_by_id(tmp_path: Path) -> None:
    folder = tmp_path / "spec"
    shutil.copytree(SPEC, folder)
    spec = json.loads((folder / "domain.json").read_text(encoding="utf-8"))
    more = [{**get_domain(str(SPEC)).tasks()["m01"], "id": f"extra-{i}"} for i in range(40)]
    (folder / "more.json").write_text(json.dumps(more), encoding="utf-8")
    spec["tasks"] = ["tasks.json", "more.json"]
    spec.pop("splits")
    (folder / "domain.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    domain = load_spec(folder)
    splits = domain.splits()
    # 8 + 40 tasks, each in one split; the held-out ones are those held_out() names, about a fifth (here 10 of 48).
    assert sorted(splits["train"] + splits["test"]) == sorted(domain.tasks()) and len(domain.tasks()) == 48
    assert splits["test"] == [t for t in domain.tasks() if held_out(t)] and 5 <= len(splits["test"]) <= 15
    assert folder / "more.json" in domain.data_files  # an input: no command may write over it
    # The same id in two files is refused, naming the file.
    (folder / "more.json").write_text(json.dumps([{**more[0], "id": "m01"}]), encoding="utf-8")
    with pytest.raises(DomainDataError, match=r"more\.json: task id 'm01'"):
        load_spec(folder).tasks()


# Two tables with a column of one name (status), one referring to the other (an appointment's slot_id): a result that
# carries slot_id is an appointment, not a slot.
CLINIC_SCHEMA = """
CREATE TABLE slots (slot_id TEXT PRIMARY KEY, status TEXT NOT NULL);
CREATE TABLE appointments (appt_id TEXT PRIMARY KEY, slot_id TEXT NOT NULL REFERENCES slots(slot_id),
                           patient TEXT NOT NULL, status TEXT NOT NULL);
"""
APPOINTMENT = {"type": "object", "required": ["appt_id", "slot_id", "status"]}
CLINIC_TOOLS = [
    {
        "name": "book",
        "description": "Book a slot.",
        "risk": "write",
        "returns": APPOINTMENT,
        "parameters": {
            "type": "object",
            "required": ["slot_id", "patient"],
            "properties": {"slot_id": {"type": "string"}, "patient": {"type": "string"}, **KEY},
        },
        "rule": {
            "insert": "appointments",
            "values": {"slot_id": "slot_id", "patient": "patient", "status": {"value": "booked"}},
            "id": {"column": "appt_id", "prefix": "A"},
        },
    },
    {
        "name": "get_appointment",
        "description": "An appointment.",
        "risk": "read",
        "returns": APPOINTMENT,
        "parameters": {"type": "object", "properties": {"appt_id": {"type": "string"}}, "required": ["appt_id"]},
        "rule": {"get": "appointments", "key": {"appt_id": "appt_id"}},
    },
    {
        "name": "close_slot",
        "description": "Close a slot.",
        "risk": "write",
        "returns": {"type": "object"},
        "parameters": {"type": "object", "properties": {"slot_id": {"type": "string"}, **KEY}, "required": ["slot_id"]},
    },
]
CLINIC_TASKS = [
    spec_task(
        "c1",
        "You want slot S1 booked for Bo.",
        [{"name": "book", "arguments": {"slot_id": "S1", "patient": "Bo"}}],
        ["A002"],
    ),
    spec_task(
        "c2",
        "You want to know whether appointment A001 stands.",
        [{"name": "get_appointment", "arguments": {"appt_id": "A001"}}],
        ["booked"],
    ),
]
CLINIC_SEED = {
    "slots": [{"slot_id": "S1", "status": "open"}, {"slot_id": "S2", "status": "taken"}],
    "appointments": [{"appt_id": "A001", "slot_id": "S2", "patient": "Al", "status": "booked"}],
}


CLINICS = itertools.count()


@pytest.fixture
def clinic(tmp_path: Path) -> Path:
    """The clinic spec, under a name of its own: a process registers each domain name once."""
    return write_spec(tmp_path / f"clinic_{next(CLINICS)}", CLINIC_SCHEMA, CLINIC_TOOLS, CLINIC_TASKS, CLINIC_SEED)


def test_a_row_that_refers_to_another_tables_row_is_compared_with_its_own_table(clinic: Path) -> None:
    domain = get_domain(str(clinic))
    with domain.env_for(None) as env:
        booked = env.call("book", {"slot_id": "S1", "patient": "Bo"})
        read = env.call("get_appointment", {"appt_id": "A001"})
    assert (booked.value["status"], read.value["status"]) == ("booked", "booked")
    assert gold_outcome(domain.name, CLINIC_TASKS[0]).calls[0].ok
    report = check_domain(str(clinic))
    assert report.passed, [(c.name, c.detail) for c in report.failed()]


@pytest.mark.parametrize(
    ("result", "refused"),
    [
        # The appointment's own status is checked against its row, whatever its slot's status is.
        ({"appt_id": "A001", "slot_id": "S2", "patient": "Al", "status": "cancelled"}, "appointments appt_id 'A001'"),
        ({"appt_id": "A001", "slot_id": "S2", "status": "booked"}, None),
        # A slot of its own (only the slot's columns) is checked against the slot.
        ({"slot_id": "S2", "status": "open"}, "slots slot_id 'S2' has status 'open'"),
        # Nested: each object against its own table.
        ({"appt_id": "A001", "slot_id": "S2", "status": "booked", "slot": {"slot_id": "S2", "status": "taken"}}, None),
        # A key that names no row is no claim about the memory.
        ({"appt_id": "A404", "slot_id": "S2", "status": "cancelled"}, None),
    ],
)
def test_an_object_is_compared_with_the_table_whose_columns_it_carries(
    clinic: Path, result: dict, refused: str | None
) -> None:
    tables = load_spec(clinic).simulation.tables
    conn = open_memory(tables.schema, CLINIC_SEED)
    found = contradiction(conn, result, tables.names)
    assert found is None if refused is None else refused in found


def test_build_tau2_grpo_counts_a_task_whose_gold_the_simulator_cannot_answer(
    clinic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rewardkit.cli import main

    tasks = json.loads((clinic / "tasks.json").read_text(encoding="utf-8"))
    tasks.append(spec_task("c3", "You want slot S1 closed.", [{"name": "close_slot", "arguments": {"slot_id": "S1"}}]))
    (clinic / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    spec = json.loads((clinic / "domain.json").read_text(encoding="utf-8"))
    spec["splits"]["train"] += [*spec["splits"].pop("test"), "c3"]
    (clinic / "domain.json").write_text(json.dumps(spec), encoding="utf-8")
    out, report = tmp_path / "rows.jsonl", tmp_path / "report.json"
    code = main(
        ["build", "tau2-grpo", "--domain", str(clinic), "--split", "train", "--out", str(out), "--report", str(report)]
    )
    # c1 and c2 replay their gold; c3's tool has no rule, so no gold state can be known: a counted reject.
    counts = json.loads(report.read_text(encoding="utf-8"))
    assert (code, counts["written"], counts["rejected"]) == (0, 2, {"tool_sim_error": 1}), capsys.readouterr().err


@pytest.mark.parametrize(
    ("result", "refused"),
    [
        ({"id": "r1", "status": "open"}, None),  # the first table's row as it is
        ({"id": "r1", "status": "shut"}, None),  # the second's
        ({"id": "r1", "status": "gone"}, "holds 'open'"),  # neither's
    ],
)
def test_an_object_that_fits_two_tables_alike_is_refused_only_when_it_agrees_with_neither(
    result: dict, refused: str | None
) -> None:
    schema = "CREATE TABLE a (id TEXT PRIMARY KEY, status TEXT); CREATE TABLE b (id TEXT PRIMARY KEY, status TEXT);"
    conn = open_memory(schema, {"a": [{"id": "r1", "status": "open"}], "b": [{"id": "r1", "status": "shut"}]})
    found = contradiction(conn, result, ["a", "b"])
    assert found is None if refused is None else refused in found


def test_an_episode_on_tools_a_model_answers_is_not_replayed_for_its_diff() -> None:
    # Its environment tracks no writes, and a replay would ask the model again (tokens, another answer): the episode
    # log records its checks and no diff. By rule the same episode replays, and its diff is the gold's writes undone.
    from rewardkit.envs.episode_record import EpisodeRecord
    from rewardkit.envs.task_verdict import task_goal
    from rewardkit.runs.episodes.scorer import Scorer

    silent = EpisodeRecord(termination="user_stop", state_hash="not the gold's", audit=(), agent_said=())
    said = [{"role": "user", "content": "hi"}]
    by_rule_domain = get_domain(str(SPEC))
    task = next(t for t in by_rule_domain.tasks().values() if task_verdict(by_rule_domain.name, t).changes_state)
    checks, diff = Scorer(by_rule_domain.name, True).explain(said, task, silent)
    assert diff and ("the final database equals the gold state", False) in [(c["check"], c["passed"]) for c in checks]
    with SimServer(reply=rule_played) as server:
        domain = simulated(server)
        task_goal(domain.name, task)  # the gold's outcome: asked of the model once per task
        sent = server.count
        checks, diff = Scorer(domain.name, True).explain(said, task, silent)
        assert diff is None and checks and server.count == sent
