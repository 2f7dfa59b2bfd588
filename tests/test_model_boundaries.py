"""Whatever a model answers, as long as it is JSON, never crashes a run: the agent's reply is scored, a role's
answer (the user, the tool and memory models, the task proposer, the judges) is refused and asked again, then
counted as a failure, and every file a run writes reads back as strict UTF-8 JSON (a lone surrogate, which
``json.loads`` makes of ``"\\ud800"``, is written escaped).

Real HTTP servers (``sim_server.SimServer``) serve the replies Hypothesis picks: a chat completion's content and
tool calls for the agent and the user, a JSON answer for the roles; the commands run in this process as the CLI
runs them (``rewardkit eval agent``, ``rewardkit synth agent``, ``rewardkit tasks generate``), the tool and memory
models as ``rewardkit.loop.tool_sim`` calls them.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_server import SimServer

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.memory import open_memory
from rewardkit.envs.registry import new_domain
from rewardkit.envs.schemas import unencodable
from rewardkit.envs.simulated import CODES, ToolSimError
from rewardkit.envs.spec_domain import load_spec
from rewardkit.envs.termination import Termination
from rewardkit.files.jsonl import dumps, read_jsonl
from rewardkit.loop.roles import JsonRole
from rewardkit.loop.tool_sim import MemoryWriter, ToolModel, simulated_domain

Folders = Callable[[], Path]
ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "merchant_spec"
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# Any character, lone surrogates included: st.text leaves them out of a mixed alphabet, hence the lists.
ANY = st.characters(blacklist_categories=())
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.text(ANY, max_size=12) | st.lists(ANY | SURROGATE, max_size=12).map("".join)
BIG = st.integers(min_value=2**63 - 1, max_value=2**70) | st.integers(min_value=-(2**70), max_value=-(2**63) - 1)
SCALARS = st.none() | st.booleans() | st.integers() | BIG | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)


def shaped(keys: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """An object with these keys, each value what its strategy picks or any JSON, or any JSON at all: the shape a
    check asks for, with anything where a key, an id or a text belongs."""
    return st.fixed_dictionaries({k: v | JSON for k, v in keys.items()}) | JSON


def lone(value: Any) -> bool:
    """Whether ``value`` holds a lone surrogate once its client reads it off the wire (as JSON: a high surrogate
    followed by a low one is one character there)."""
    return unencodable(json.loads(json.dumps(value)))


def read_outputs(folder: Path) -> None:
    """Every file a run wrote reads as strict UTF-8 JSON (JSONL line by line)."""
    for path in folder.iterdir():
        if path.suffix == ".jsonl":
            read_jsonl(path, strict=True)
        elif path.suffix == ".json":
            json.loads(path.read_bytes().decode("utf-8"))


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Folders]:
    """A fresh folder per example (Hypothesis runs a test's body many times under one fixture)."""
    with tempfile.TemporaryDirectory() as base:
        yield lambda: Path(tempfile.mkdtemp(dir=base))


def run(command: str, folder: Path, *args: str) -> list[dict[str, Any]]:
    """``rewardkit synth agent`` or ``eval agent`` on one retail task, one trial, its outputs in ``folder``; the
    episode records, after every output was read strictly."""
    outputs = ["--out-dir", str(folder)]
    if command == "synth":
        outputs = ["--out", str(folder / "sft.jsonl"), "--report", str(folder / "report.json")]
        outputs += ["--episodes", str(folder / "episodes.jsonl")]
    loop = ["--split", "train", "--trials", "1", "--workers", "1", "--max-turns", "4", "--no-progress"]
    assert main([command, "agent", *loop, *outputs, *args]) == 0
    read_outputs(folder)
    return read_jsonl(folder / "episodes.jsonl", strict=True)


# --- the one JSON writer ------------------------------------------------------------------------------------------


@SETTINGS
@given(value=JSON)
def test_the_writer_writes_any_json_as_utf8_that_reads_back(value: Any) -> None:
    written = dumps(value, sort_keys=True).encode("utf-8")  # json.dumps(ensure_ascii=False) raised here
    assert json.loads(written) == json.loads(json.dumps(value))  # the value ensure_ascii would have written


# --- the agent ----------------------------------------------------------------------------------------------------

RETAIL_TOOLS = st.sampled_from(sorted(get_domain("retail").tools))
ARGUMENTS = st.dictionaries(st.sampled_from(["user_id", "order_id", "email"]) | TEXT, JSON, max_size=3)
CALL = shaped({"name": RETAIL_TOOLS, "arguments": ARGUMENTS | ARGUMENTS.map(json.dumps)})
OPENAI_CALLS = st.lists(shaped({"id": TEXT, "type": st.just("function"), "function": CALL}), max_size=2) | JSON
CONTENT = TEXT | JSON | CALL.map(lambda call: f"Let me look.<tool_call>{json.dumps(call)}</tool_call>")


@pytest.mark.parametrize("command", ["synth", "eval"])
@settings(SETTINGS, max_examples=50)  # an eval run draws its plot: 0.3 s
@given(content=CONTENT, calls=OPENAI_CALLS)
def test_an_agent_reply_of_any_json_is_scored(run_dir: Folders, command: str, content: Any, calls: Any) -> None:
    with SimServer(reply=lambda body: content, calls=lambda body: calls, models=["agent"]) as agent:
        records = run(command, run_dir(), "--agent", agent.base_url, "--user", "scripted", "--tasks", "0")
    assert [(r["status"], r["reward"] in (0.0, 1.0)) for r in records] == [("ok", True)]  # the policy's: scored


# --- the user -----------------------------------------------------------------------------------------------------


@SETTINGS
@given(content=JSON | TEXT.map(lambda text: f"My email is a@b.c {text}"))
def test_a_user_reply_of_any_json_is_taken_or_a_user_sim_error(run_dir: Folders, content: Any) -> None:
    folder = run_dir()
    with SimServer(reply=lambda body: content, models=["user"]) as user:
        records = run(
            "synth", folder, "--agent", "gold", "--user", user.base_url, "--user-retries", "0", "--tasks", "0"
        )
    (record,) = records
    if isinstance(content, str) and content.strip() and lone(content):  # refused: the simulator failed
        assert (record["status"], record["termination"]) == ("infra_error", Termination.USER_SIM_ERROR.value)
    else:
        assert record["status"] == "ok" or record["termination"] == Termination.USER_SIM_ERROR.value


# --- the tool and memory models -----------------------------------------------------------------------------------

TABLES = ["products", "rooms", "coupons", "cue_cards"]
COLUMNS = st.sampled_from(["sku", "name", "price", "stock"]) | TEXT
ROW = st.dictionaries(COLUMNS, JSON, max_size=4)
NUMBER = st.integers(1, 1000) | st.floats(0.01, 1000.0) | BIG | JSON
PRODUCT = st.fixed_dictionaries({"sku": st.just("SP002"), "name": TEXT, "price": NUMBER, "stock": NUMBER})
WRITE = shaped(
    {
        "op": st.sampled_from(["insert", "upsert", "update", "delete"]),
        "table": st.sampled_from([*TABLES, "sqlite_master", "sqlite_sequence"]),
        "key": ROW,
        "values": ROW,
    }
)
PRICE = st.fixed_dictionaries(
    {
        "op": st.just("update"),
        "table": st.just("products"),
        "key": st.just({"sku": "SP002"}),
        "values": st.dictionaries(COLUMNS, NUMBER, min_size=1, max_size=2),
    }
)
NUTS = {"sku": "SP002", "name": "每日坚果礼盒", "price": 89.0, "stock": 40}  # the seed's row


def changed(values: dict[str, Any]) -> dict[str, Any]:
    """A write tool's answer that agrees with itself: the row with ``values``, and the write that puts them there."""
    write = {"op": "update", "table": "products", "key": {"sku": "SP002"}, "values": values}
    return {"ok": True, "result": {**NUTS, **values}, "writes": [write]}


# Answers that agree with the memory, with anything in the values they write; then the shape the check wants with
# anything in it; then any shape.
ANSWER = (
    st.fixed_dictionaries({}, optional={"name": TEXT, "price": NUMBER, "stock": NUMBER}).map(changed)
    | st.fixed_dictionaries({"ok": st.just(True), "result": PRODUCT, "writes": st.lists(PRICE | WRITE, max_size=2)})
    | shaped({"ok": st.just(True), "result": ROW, "writes": st.lists(WRITE, max_size=2)})
    | shaped({"ok": st.just(False), "code": st.sampled_from(CODES), "message": TEXT})
)
CALLS = st.sampled_from([("get_product", {"sku": "SP002"}), ("change_price", {"sku": "SP002", "price": 79})])


class Served:
    """One model server for a test's examples; each example sets what it answers (as JSON text, every time)."""

    def __init__(self) -> None:
        self.answer: Any = None
        self.server = SimServer(reply=lambda body: json.dumps(self.answer), models=["sim"])


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    found = Served()
    with found.server:
        yield found


@SETTINGS
@given(answer=ANSWER, call=CALLS)
def test_a_tool_model_answer_is_taken_or_a_tool_sim_error(served: Served, answer: Any, call: Any) -> None:
    served.answer = answer
    domain = simulated_domain(get_domain(str(SPEC)), ToolModel(JsonRole("tool", served.server.base_url, "sim")), None)
    with domain.env_for(None) as env:
        before = env.state_hash(), set(env.export())
        try:
            result = env.call(*call)
        except ToolSimError:  # refused on every attempt: the episode's tool_sim_error
            result = None
        assert set(env.export()) == before[1]  # no write outside the domain's tables
        if result is None or not result.ok:
            assert env.state_hash() == before[0]
    if lone(answer):  # a lone surrogate is refused on every attempt
        assert result is None


@SETTINGS
@given(memory=JSON | st.dictionaries(st.sampled_from([*TABLES, "sqlite_master"]) | TEXT, st.lists(ROW, max_size=2)))
def test_a_memory_model_answer_is_a_memory_or_a_tool_sim_error(served: Served, memory: Any) -> None:
    served.answer = memory
    spec = load_spec(SPEC)
    assert spec.simulation is not None
    writer = MemoryWriter(JsonRole("memory", served.server.base_url, "sim", attempts=2), spec)
    try:
        rows = writer(spec.tasks()["m01"])
    except ToolSimError:  # refused on every attempt: every episode of the task is a tool_sim_error
        return
    assert not lone(memory)  # a lone surrogate is refused
    conn = open_memory(spec.simulation.tables.schema, rows)
    try:
        assert set(spec.simulation.tables.export(conn)) == set(TABLES)  # no table but the domain's
    finally:
        conn.close()


# --- the task proposer and the judges -----------------------------------------------------------------------------

GOOD = {
    "kind": "plain",
    "user_scenario": {"reason_for_call": "Please lend me Beloved; I am member m9.", "known_info": ""},
    "actions": [
        {"name": "find_book", "arguments": {"title": "Beloved"}},
        {"name": "lend_book", "arguments": {"book_id": "b4", "member_id": "m9"}},
    ],
    "outputs": ["14"],
}
ACTION = shaped({"name": st.sampled_from(["find_book", "lend_book"]), "arguments": st.dictionaries(TEXT, JSON)})
SCENARIO = st.fixed_dictionaries({"reason_for_call": TEXT, "known_info": TEXT})
# GOOD with any texts (kept as they are, or refused), or the shape with anything anywhere.
BLUEPRINT = SCENARIO.map(lambda scenario: {**GOOD, "user_scenario": scenario}) | shaped(
    {
        "kind": st.just("plain"),
        "user_scenario": SCENARIO,
        "actions": st.lists(ACTION, max_size=3),
        "outputs": st.lists(TEXT, max_size=2),
    }
)
VERDICT_KEYS = {
    "verdict": st.sampled_from(["accept", "reject"]),
    "reason": TEXT,
    "fault": st.sampled_from(["agent", "user", "tool", None]),
}
VERDICT = st.fixed_dictionaries(VERDICT_KEYS) | shaped(VERDICT_KEYS)


@pytest.fixture(scope="module")
def starter(tmp_path_factory: pytest.TempPathFactory) -> str:
    name = f"library_{uuid.uuid4().hex[:8]}"  # domains register by name, once per process
    folder = tmp_path_factory.mktemp("starter") / name
    new_domain(name, folder)
    return str(folder)


def generate(folder: Path, starter: str, proposer: str, *extra: str) -> dict[str, Any]:
    """``rewardkit tasks generate`` of one task; its report, every output read strictly."""
    outputs = ["--out", str(folder / "tasks.json"), "--report", str(folder / "report.json")]
    one = ["--n", "1", "--attempts", "2", "--workers", "1"]
    code = main(
        ["tasks", "generate", "--domain", starter, "--model", proposer, "--model-name", "sim", *one, *outputs, *extra]
    )
    assert code == 0
    read_outputs(folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert report["requested"] == 1 == report["kept"] + sum(report["rejected"].values())
    return report


@SETTINGS
@given(blueprint=BLUEPRINT)
def test_a_proposed_blueprint_is_kept_or_rejected(
    served: Served, starter: str, run_dir: Folders, blueprint: Any
) -> None:
    served.answer = blueprint
    folder = run_dir()
    report = generate(folder, starter, served.server.base_url)
    assert len(json.loads((folder / "tasks.json").read_text(encoding="utf-8"))) == report["kept"]
    if lone(blueprint):  # refused on every attempt
        assert report["rejected"] == {"proposer_error": 1}


@SETTINGS
@given(verdict=VERDICT)
def test_a_task_judge_verdict_is_taken_or_a_judge_error(
    served: Served, starter: str, run_dir: Folders, verdict: Any
) -> None:
    served.answer = verdict
    with SimServer(reply=json.dumps(GOOD), models=["sim"]) as proposer:
        judge = ["--judge", served.server.base_url, "--judge-model", "sim"]
        report = generate(run_dir(), starter, proposer.base_url, *judge)
    assert report["kept"] == 1 or set(report["rejected"]) <= {"judge_rejected", "judge_error"}
    if lone(verdict):  # refused on every attempt
        assert report["rejected"] == {"judge_error": 1}


@SETTINGS
@given(verdict=VERDICT)
def test_a_trajectory_judge_verdict_is_taken_or_a_judge_error(served: Served, run_dir: Folders, verdict: Any) -> None:
    served.answer = verdict
    folder = run_dir()
    judge = ["--judge", served.server.base_url, "--judge-model", "sim", "--judge-retries", "0"]
    records = run("synth", folder, "--agent", "gold", "--user", "scripted", "--tasks", "50", *judge)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert [r["status"] for r in records] == ["ok"]
    assert report["kept"] == 1 or set(report["rejected"]) <= {"judge_rejected", "judge_error"}
    if lone(verdict):  # refused on every attempt
        assert report["rejected"] == {"judge_error": 1}
