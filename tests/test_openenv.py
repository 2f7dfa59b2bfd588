"""A domain as an OpenEnv environment: `rewardkit env serve --openenv` as a real subprocess, driven by OpenEnv's
own client (``GenericEnvClient``, its defaults); nothing is mocked. Runs in the ms-swift 4.6 job, whose stack holds
the openenv package (`make test-compat`)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("openenv")  # the optional extra, rewardkit[openenv]: the ms-swift 4.6 job's stack holds it

from _retail_gold import VALID
from openenv.core.generic_client import GenericEnvClient
from openenv_servers import remote_play, served
from sim_server import SimServer, free_port
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidStatus
from websockets.sync.client import connect as ws_connect

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.envs.tasks import task_digest
from rewardkit.loop.agents import as_reply
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode, run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.remote_env import RemoteEpisode
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion
from rewardkit.runs.stats.metrics import task_order

pytestmark = pytest.mark.openenv
TOKEN = "0123456789abcdef0123"


@pytest.fixture(scope="module")
def retail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("openenv")) as (url, _):
        yield url


def play(url: str, task: Mapping[str, Any]) -> Any:
    """The gold agent through the server, as a trainer's rollout would: the last step's result (the reward, the
    episode's record, the messages that ended it)."""
    agent = GoldAgent(task)
    with GenericEnvClient(base_url=url).sync() as env:
        result = env.reset(task_id=str(task["id"]))
        messages = list(result.observation["messages"])
        while not result.done:
            reply = as_reply(agent(messages))
            messages.append({"role": "assistant", "content": reply.text})
            result = env.step({"content": reply.text, "tool_calls": reply.tool_calls})
            messages += result.observation["messages"]
        return result


def in_process(domain_name: str) -> dict[str, str]:
    """Task id -> the gold state hash, for every task whose in-process gold episode scores 1 (the usable ones)."""
    domain, reward = get_domain(domain_name), TaskCompletion()
    out = {}
    for tid, task in domain.tasks().items():
        if not task_verdict(domain_name, task).playable:  # a task the reward refuses: the server refuses it too
            continue
        result = run_episode(domain, task, GoldAgent(task), ScriptedSimulator(), RolloutLimits(user_review="exclude"))
        cells = {"messages": [result.messages], "task": [task], "domain": [domain_name]}
        if reward([""], **cells, rollout_infos=[result.infos]) == [1.0]:
            out[tid] = str(result.infos.state_hash)
    return out


@pytest.mark.parametrize("domain_name", ["retail", "livestream"])
def test_openenvs_client_reaches_the_gold_state_of_every_usable_task(
    domain_name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    gold = in_process(domain_name)
    tasks = get_domain(domain_name).tasks()
    # every task the reward can score (retail's valid ones, the console's all, approvals included) plays in process
    assert set(gold) == set({"retail": VALID, "livestream": list(tasks)}[domain_name])
    with served(tmp_path_factory.mktemp("openenv"), domain_name) as (url, _), ThreadPoolExecutor(4) as pool:
        got = dict(zip(gold, pool.map(lambda tid: play(url, tasks[tid]), gold), strict=True))  # 4 sessions at once
    for tid, state in gold.items():
        reward, record = got[tid].reward, got[tid].observation["record"]
        assert (reward, record["state_hash"]) == (1.0, state), f"task {tid}: {record['termination']}"


def test_an_episode_is_the_loops_episode_from_reset_to_record(retail: str) -> None:
    with GenericEnvClient(base_url=retail).sync() as env:
        opened = env.reset(task_id="0")
        roles = [m["role"] for m in opened.observation["messages"]]
        tools = {t["function"]["name"] for t in opened.observation["tools"]}
        assert roles == ["system", "user"] and "exchange_delivered_order_items" in tools and not opened.done
        asked = env.step({"content": "Could you give me your e-mail address?"})  # no call: the user answers
        assert [m["role"] for m in asked.observation["messages"]] == ["user"] and asked.reward is None
        ended = env.step({"content": "I cannot help with that. ###STOP###"})  # the agent ends it: scored 0
        assert (ended.done, ended.reward, ended.observation["termination"]) == (True, 0.0, "agent_stop")
        with pytest.raises(RuntimeError, match="reset first"):  # an ended episode takes no further step
            env.step({"content": "Hello?"})
        assert env.reset(seed=3, split="test").observation["task_id"] in get_domain("retail").splits()["test"]


def test_the_last_observation_carries_the_customers_closing_line(retail: str) -> None:
    # The customer ends task 0 ("... ###STOP###"): a client that appends each observation's messages reads that
    # line as it reads every other reply, not only in the record's transcript.
    ended = play(retail, get_domain("retail").tasks()["0"])
    record, closing = ended.observation["record"], ended.observation["messages"]
    assert record["termination"] == "user_stop" and [m["role"] for m in closing] == ["user"]
    assert "###STOP###" in closing[0]["content"] and record["transcript"].endswith(f"user: {closing[0]['content']}")


DIGEST_0 = task_digest(get_domain("retail").tasks()["0"])


@pytest.mark.parametrize(
    ("opening", "refused"),
    [
        ({"task_sha256": DIGEST_0}, "task_sha256 names a task: send its task_id"),  # never a task drawn at random
        ({"taskid": "0"}, "taskid: unknown field"),  # a misspelt id neither
        ({"task_id": "0", "task_sha256": "0" * 64}, "reset: task '0' is not the caller's"),
        ({"task_id": "nope"}, "reset: no task 'nope'"),
        ({"task_id": ["0"]}, "task_id: "),
        ({"seed": "x"}, "seed: "),
        ({"user_review": "maybe"}, "user_review: "),
    ],
)
def test_a_reset_that_names_a_task_plays_it_or_is_refused(retail: str, opening: dict[str, Any], refused: str) -> None:
    with GenericEnvClient(base_url=retail).sync() as env:
        with pytest.raises(RuntimeError, match=refused):
            env.reset(**opening)
        assert env.reset(task_id="0", task_sha256=DIGEST_0).observation["task_id"] == "0"  # the session goes on


@pytest.mark.parametrize(
    "argv",
    [
        ["env", "serve", "--openenv", "--host", "0.0.0.0"],
        ["env", "serve", "--mcp", "--transport", "http", "--host", "0.0.0.0"],
        ["env", "serve", "--openenv", "--token", "short"],  # a token too short to protect anything
    ],
)
def test_a_wider_bind_without_a_token_is_refused_before_anything_loads(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--token" in err and err.count("\n") == 1  # one line, naming the fix


@pytest.mark.parametrize(
    ("token", "refused"),
    [
        ("abcdefgh/ijklmnop1234", "'/'"),  # never the URL's first segment: the path form can never match
        ("abcd%2Fefghijklmnop12", "'%'"),  # the server reads the path decoded: %2F is a '/' again
        ("abcd?efghijklmnop1234", "'?'"),  # the query starts there: the segment is cut
        ("abcdefgh ijklmnop1234", "' '"),  # an HTTP client refuses a raw space in the path
        ("ключ-ключ-ключ-ключ", "'к'"),  # a header cannot carry it (rewardkit's own client sends one)
        ("short", "5 characters"),
    ],
)
def test_a_token_that_cannot_travel_unchanged_in_a_path_and_a_header_is_refused(token: str, refused: str) -> None:
    from rewardkit.envs.access import BindError, check_bind

    with pytest.raises(BindError, match=re.escape(refused)):
        check_bind("127.0.0.1", token)
    check_bind("127.0.0.1", "aB3-._~" * 3)  # RFC 3986's unreserved characters: as they are in both


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("openenv"), "retail", "--token", TOKEN) as (url, _):
        yield url


WRONG = "x" * len(TOKEN)  # a wrong token of the right length: compared in constant time, refused all the same


@pytest.mark.parametrize(
    ("path", "header"),
    [
        pytest.param("", None, id="no token"),
        pytest.param(f"/{WRONG}", None, id="a wrong token in the path"),
        pytest.param("", f"Bearer {WRONG}", id="a wrong token in the header"),
        pytest.param(f"/x/{TOKEN}", None, id="the token as the second segment"),
        pytest.param(f"/{TOKEN}", f"Bearer {WRONG}", id="a wrong header beside the right path"),  # the header decides
        pytest.param("", f"bearer{TOKEN}", id="no Bearer scheme"),
    ],
)
def test_a_request_without_the_token_is_refused_with_the_reason(gated: str, path: str, header: str | None) -> None:
    # HTTP and WebSocket alike: 401, the same body naming both ways to send the token (a WebSocket's refusal is the
    # handshake's answer, not a bare close that reaches the client as an empty HTTP 403).
    headers = {"Authorization": header} if header else {}
    with pytest.raises(urllib.error.HTTPError) as http:
        urllib.request.urlopen(urllib.request.Request(f"{gated}{path}/health", headers=headers), timeout=10)
    with pytest.raises(InvalidStatus) as ws:
        ws_connect(f"{gated.replace('http', 'ws', 1)}{path}/ws", additional_headers=headers, open_timeout=30)
    for status, body in [(http.value.code, http.value.read()), (ws.value.response.status_code, ws.value.response.body)]:
        assert status == 401 and "a token is required: Authorization: Bearer TOKEN" in json.loads(body)["error"]


def test_the_token_opens_sessions_in_the_path_or_the_header(gated: str) -> None:
    with GenericEnvClient(base_url=f"{gated}/{TOKEN}").sync() as env:  # the token as the first path segment
        assert env.reset(task_id="0").observation["task_id"] == "0"
    ws = ws_connect(f"{gated.replace('http', 'ws', 1)}/ws", additional_headers={"Authorization": f"Bearer {TOKEN}"})
    with ws:
        ws.send(OPEN)
        assert json.loads(ws.recv(timeout=60))["data"]["observation"]["task_id"] == "0"
    with urllib.request.urlopen(f"{gated}/{TOKEN}/health", timeout=10) as answer:
        assert answer.status == 200


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def test_under_load_no_session_is_lost_and_memory_stays_bounded(tmp_path: Path) -> None:
    # 8 clients at once, 240 episodes through a server capped at 8 sessions: every episode ends with its reward,
    # and the server holds no more memory after the last 160 than after the first 80 (plus 20% for the allocator).
    tasks = get_domain("retail").tasks()
    ids = [tid for tid in sorted(tasks, key=task_order) if task_verdict("retail", tasks[tid]).playable][:80]
    with served(tmp_path, "retail", "--max-sessions", "8") as (url, proc):
        with ThreadPoolExecutor(8) as pool:
            first = list(pool.map(lambda tid: play(url, tasks[tid]).reward, ids))
            warm = rss_kib(proc.pid)
            rest = list(pool.map(lambda tid: play(url, tasks[tid]).reward, ids * 2))
        after = rss_kib(proc.pid)
    assert len(first) + len(rest) == 240 and all(r is not None for r in first + rest)
    assert after <= warm * 1.2, f"RSS {warm} KiB after 80 episodes, {after} KiB after 240"


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("openenv"), "retail", "--max-sessions", "2", "--idle-s", "3") as (url, _):
        yield url


def connected(url: str) -> Any:
    """A client whose session is open (a slot a closing session frees is waited for, by the server)."""
    return GenericEnvClient(base_url=url).sync().connect()


def refusal(url: str) -> tuple[int, str]:
    """How the server refuses a session at the handshake (OpenEnv's client raises ConnectionError there): the
    HTTP status and the reason its body gives."""
    env = GenericEnvClient(base_url=url).sync()
    with pytest.raises(ConnectionError) as refused:
        env.connect()
    env.close()
    response = refused.value.__cause__.response  # websockets' InvalidStatus: the handshake's answer
    return response.status_code, json.loads(response.body)["error"]


def test_a_session_over_the_cap_is_refused_at_the_handshake_with_the_reason(capped: str) -> None:
    first, second = connected(capped), connected(capped)
    with first, second:
        for _ in range(3):  # every time, not when a race allows: the socket never opens
            for env in (first, second):  # busy: neither is idle (--idle-s 3) while the third waits
                env.reset(task_id="0")
            status, reason = refusal(capped)  # after 2 s of waiting for a slot to free
            assert status == 503 and "--max-sessions 2" in reason, reason
    with connected(capped) as third:  # the slots are the connections': closed, they are free
        assert third.reset(task_id="1").observation["task_id"] == "1"


def test_an_idle_session_is_closed_with_its_socket_and_its_slot_freed(capped: str) -> None:
    # Two sessions fill the cap and go idle past --idle-s: each is closed, its socket too, so two new sessions get
    # their slots. Raw sockets, not OpenEnv's client, which since 0.10 opens a new connection after a close: what is
    # tested is the server's close, its code and reason.
    ws = capped.replace("http://", "ws://") + "/ws"
    idle = [ws_connect(ws), ws_connect(ws)]
    for sock in idle:
        sock.send(json.dumps({"type": "reset", "data": {"task_id": "0"}}))
        assert json.loads(sock.recv(timeout=60))["type"] == "observation"
    for sock in idle:
        with pytest.raises(ConnectionClosedError) as closed:
            sock.recv(timeout=30)  # nothing comes but the close frame, past --idle-s 3
        assert closed.value.rcvd.code == 4408 and "idle for 3 s" in closed.value.rcvd.reason
    with connected(capped) as third, connected(capped) as fourth:
        assert [env.reset(task_id="1").observation["task_id"] for env in (third, fourth)] == ["1", "1"]


def test_a_remote_episode_refused_over_the_cap_records_the_servers_reason(capped: str) -> None:
    # rewardkit's own client at a full server: the episode is left out (env_error) and says why, in the server's
    # words (the 503's body), not only "HTTP 503".
    first, second = connected(capped), connected(capped)
    with first, second:
        for env in (first, second):  # busy: neither is idle (--idle-s 3) while the third waits 2 s for a slot
            env.reset(task_id="0")
        episode = RemoteEpisode(capped, get_domain("retail").tasks()["0"], RolloutLimits(), "exclude")
        assert episode.open() is None
    record = episode.infos()
    assert record.termination == "env_error" and "HTTP 503" in record.error, record.error
    assert "no session slot is free: 2 are open (--max-sessions 2)" in record.error, record.error


@pytest.mark.parametrize(
    ("max_sessions", "idle_s", "refused"),
    [
        (4, float("nan"), "idle_s=nan is not a finite number in (0, 86400]"),  # NaN passes every comparison
        (4, float("inf"), "idle_s=inf is not a finite number in (0, 86400]"),
        (4, -1.0, "idle_s=-1.0 is not a finite number in (0, 86400]"),
        (4, 0, "idle_s=0 is not a finite number in (0, 86400]"),  # the range is open at 0: every session idle
        (4, 86401, "idle_s=86401 is not a finite number in (0, 86400]"),  # --idle-s's bound too
        (4, "60", "idle_s='60' is not a finite number in (0, 86400]"),
        (0, 60, "max_sessions=0 is not an integer >= 1"),  # no session could ever open
        (-3, 60, "max_sessions=-3 is not an integer >= 1"),
        (2.5, 60, "max_sessions=2.5 is not an integer >= 1"),
        (True, 60, "max_sessions=True is not an integer >= 1"),
    ],
)
def test_create_app_refuses_limits_the_flags_refuse(max_sessions: Any, idle_s: Any, refused: str) -> None:
    # From Python, the same rules as --max-sessions and --idle-s, named, before the domain loads.
    from rewardkit.errors import UserError
    from rewardkit.serve.openenv_server import create_app

    with pytest.raises(UserError, match=re.escape(f"create_app: {refused}")):
        create_app("retail", max_sessions, idle_s)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}),
        ("POST", "/reset", {}),
        ("POST", "/step", {"action": {"content": "hi"}}),
        ("GET", "/state", None),
    ],
)
def test_no_http_route_opens_a_session(capped: str, method: str, path: str, body: Any) -> None:
    # OpenEnv's HTTP routes would open sessions (or build an episode's database) with no connection held:
    # none is mounted, so two calls cannot take the two slots and lock every WebSocket client out.
    for _ in range(2):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(capped + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(request, timeout=10)
        assert missing.value.code == 404
    with connected(capped) as first, connected(capped) as second:
        assert [env.reset(task_id="0").observation["task_id"] for env in (first, second)] == ["0", "0"]


def test_only_the_info_routes_and_the_session_socket_are_mounted(capped: str) -> None:
    with urllib.request.urlopen(f"{capped}/openapi.json", timeout=10) as answer:
        assert set(json.load(answer)["paths"]) == {"/health", "/schema", "/metadata"}  # /ws is a WebSocket route


def test_a_session_waiting_on_its_own_simulator_is_not_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server's user answers in 6 s, past --idle-s 1: meanwhile the session waits on its server, not on its
    # client, so its episode stays open through the reset and the step.
    with SimServer(delay_s=6) as user:
        config = tmp_path / "config.yaml"
        config.write_text(f"user_sim:\n  kind: openai\n  base_url: {user.base_url}\n  model: m\n  timeout_s: 60\n")
        monkeypatch.setenv("REWARDKIT_CONFIG", str(config))
        with served(tmp_path, "retail", "--idle-s", "1") as (url, _), GenericEnvClient(base_url=url).sync() as env:
            opened = env.reset(task_id="0")
            assert opened.observation["messages"][-1] == {"role": "user", "content": "My email is a@b.c"}
            asked = env.step({"content": "Could you give me your e-mail address?"})
            assert asked.observation["messages"] == [{"role": "user", "content": "My email is a@b.c"}]


# --- any message a client sends ------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
TOOL = st.sampled_from(["find_user_id_by_email", "get_order_details", "cancel_pending_order", "nope", ""])
CALL = st.fixed_dictionaries({"name": TOOL | JSON, "arguments": JSON | st.just('{"order_id": "#W1"}')})
CALLS = st.lists(CALL | st.fixed_dictionaries({"function": CALL}) | JSON, max_size=3)
TEXT = st.text(max_size=40) | CALL.map(lambda c: f"<tool_call>{json.dumps(c)}</tool_call>") | st.just("bye ###STOP###")
FIELDS = {  # each field's plausible values, and any JSON
    "reset": {
        "task_id": st.sampled_from(["0", "1", "10", "nope"]) | JSON,
        "split": st.sampled_from(["train", "test"]) | JSON,
        "seed": st.integers() | JSON,
        "user_review": st.sampled_from(["exclude", "count", "off"]) | JSON,
        "task_sha256": st.just(DIGEST_0) | JSON,
        "episode_id": JSON,
    },
    "step": {
        "content": TEXT | JSON,
        "tool_calls": CALLS | JSON,
        "finish_reason": st.sampled_from(["stop", "length"]) | JSON,
        "n_tokens": st.integers() | JSON,
        "end": st.sampled_from(["max_turns", "agent_error"]) | JSON,
        "metadata": JSON,
    },
}
MESSAGE = st.one_of(
    *(
        st.fixed_dictionaries({"type": st.just(kind), "data": st.fixed_dictionaries({}, optional=fields) | JSON})
        for kind, fields in FIELDS.items()
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["state", "close", "mcp"]) | JSON}, optional={"data": JSON}),
    JSON,
)
FRAME = MESSAGE.map(json.dumps) | st.text() | st.binary()
OPEN = json.dumps({"type": "reset", "data": {"task_id": "0"}})
HOSTILE = [
    pytest.param("[" * 100_000, id="nested past the parser's recursion limit"),
    pytest.param("1" * 5000, id="an int past Python's digits limit"),
    pytest.param('{"type": "step", "data": {"content": "\\ud800"}}', id="a lone surrogate"),
    pytest.param('{"type": "reset", "data": {"seed": 1e999}}', id="an infinite seed"),
    pytest.param(b"\xff\xfe", id="a binary frame, not UTF-8"),
]


def exchange(url: str, frames: list[str | bytes]) -> None:
    """Each frame on one session (after an opened episode): every answer is an observation or an error, within 60 s,
    until a close; a session not closed still answers a state request."""
    with ws_connect(url.replace("http", "ws", 1) + "/ws", open_timeout=30) as ws:
        for frame in [OPEN, *frames]:
            ws.send(frame)
            try:
                answer = json.loads(ws.recv(timeout=60))
            except ConnectionClosedOK:  # a close message: the session ends cleanly
                return
            assert answer["type"] in ("observation", "state", "error"), answer
            assert answer["type"] != "error" or answer["data"]["message"], answer  # an error says what
            assert "the server failed" not in str(answer), answer  # a clean error: not a bug of the server
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=60))["type"] == "state"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(frames=st.lists(FRAME, min_size=1, max_size=4))
def test_any_message_gets_an_answer_and_the_server_goes_on(retail: str, frames: list[str | bytes]) -> None:
    exchange(retail, frames)


@pytest.mark.parametrize("frame", HOSTILE)
def test_a_hostile_message_gets_an_error(retail: str, frame: str | bytes) -> None:
    exchange(retail, [frame])


MIB = 1 << 20


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(json.dumps({"type": "step", "data": {"content": "x" * MIB}}), id="text just over 1 MiB"),
        pytest.param(b" " * (3 * MIB), id="3 MiB of bytes"),  # under the 4 MiB frame limit: read, not parsed
    ],
)
def test_a_message_over_1_mib_is_refused_unread_and_the_session_goes_on(retail: str, frame: str | bytes) -> None:
    with ws_connect(retail.replace("http", "ws", 1) + "/ws", open_timeout=30, max_size=None) as ws:
        ws.send(frame)
        answer = json.loads(ws.recv(timeout=60))
        assert answer["type"] == "error" and "over 1 MiB" in answer["data"]["message"], answer
        ws.send(OPEN)
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"


def test_a_frame_over_4_mib_closes_the_socket_unbuffered(retail: str) -> None:
    # uvicorn buffers a frame up to the limit env serve gives it (4 x the 1 MiB message limit), not its 16 MiB.
    with ws_connect(retail.replace("http", "ws", 1) + "/ws", open_timeout=30, max_size=None) as ws:
        ws.send(b" " * (10 * MIB))
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=60)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big


# Just under 1 MiB: 340,000 tool calls that are not objects. Each refused by the step's validation held the
# interpreter for seconds (pydantic's errors are built in one call), and the error named them all (18 MB of text).
LIST_BOMB = json.dumps({"type": "step", "data": {"tool_calls": [[]] * 340_000}}, separators=(",", ":"))


def test_a_step_of_too_many_calls_is_refused_by_its_count_and_the_server_goes_on(retail: str) -> None:
    assert len(LIST_BOMB) < MIB
    with ws_connect(retail.replace("http", "ws", 1) + "/ws", open_timeout=30) as bomb:
        bomb.send(LIST_BOMB)
        error = json.loads(bomb.recv(timeout=60))["data"]["message"]
        assert "tool_calls: List should have at most 256 items" in error and len(error) < 500, error[:300]
        with urllib.request.urlopen(f"{retail}/health", timeout=10) as answer:
            assert answer.status == 200
        with GenericEnvClient(base_url=retail).sync() as env:
            assert env.reset(task_id="0").observation["task_id"] == "0"


# --- ms-swift's scheduler apart from the environment: the remote episode ------------------------------------------


def test_a_remote_episode_reaches_the_gold_state_as_the_in_process_one(retail: str) -> None:
    gold = in_process("retail")
    tasks = get_domain("retail").tasks()
    picked = ["0", "59", "10"]  # an exchange; a cancel and an address change; a transfer to a human
    with ThreadPoolExecutor(3) as pool:
        episodes = dict(zip(picked, pool.map(lambda tid: remote_play(retail, tasks[tid]), picked), strict=True))
    for tid in picked:
        record = episodes[tid].infos()
        assert record.natural and record.state_hash == gold[tid], f"task {tid}: {record.termination}"


def test_a_task_the_server_holds_otherwise_is_refused_at_reset(retail: str) -> None:
    # The trainer's dataset and the server's domain disagree on task 0 (another version of its data): the episode
    # never starts, left out of training and saying why, instead of being scored against the trainer's gold.
    task = get_domain("retail").tasks()["0"]
    edited = {**task, "evaluation_criteria": {**task["evaluation_criteria"], "communicate_info": ["a refund"]}}
    episode = RemoteEpisode(retail, edited, RolloutLimits(), "exclude")
    assert episode.open() is None
    record = episode.infos()
    assert record.termination == "env_error" and "reset: task '0' is not the caller's: its sha256 is" in record.error
    assert remote_play(retail, task).infos().natural  # the same task as the server's opens


def test_an_episode_the_server_ends_at_its_opening_keeps_the_servers_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server's simulated user cannot open (its model's endpoint is down): reset ends the episode there, and the
    # remote episode keeps the server's record of it (excluded, the simulator named) instead of one of its own.
    config = tmp_path / "config.yaml"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    config.write_text(f"user_sim:\n  kind: openai\n  base_url: {dead}\n  model: m\n  retries: 0\n  timeout_s: 2\n")
    monkeypatch.setenv("REWARDKIT_CONFIG", str(config))  # the server's, inherited by its process
    with served(tmp_path, "retail") as (url, _):
        episode = RemoteEpisode(url, get_domain("retail").tasks()["0"], RolloutLimits(), "exclude")
        assert episode.open() is None and episode.done
    record = episode.infos()
    assert (record.termination, record.excluded, record.turns) == ("user_sim_error", True, 0)
    assert record.user_sim != url  # the server's simulator, not the trainer's stand-in for a missing record


def test_the_trainers_turn_limit_ends_the_remote_episode_there(retail: str) -> None:
    episode = remote_play(retail, get_domain("retail").tasks()["0"], max_turns=2)
    assert (episode.infos().termination, episode.infos().turns) == ("max_turns", 2)


def test_an_unreachable_or_gated_server_ends_the_episode_as_env_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = get_domain("retail").tasks()["0"]
    down = RemoteEpisode(f"http://127.0.0.1:{free_port()}", task, RolloutLimits(), "exclude")
    assert down.open() is None and down.infos().termination == "env_error" and down.infos().excluded
    with served(tmp_path, "retail", "--token", TOKEN) as (url, _):
        refused = RemoteEpisode(url, task, RolloutLimits(), "exclude")
        assert refused.open() is None and refused.infos().termination == "env_error"
        assert "HTTP 401" in refused.infos().error and "a token is required" in refused.infos().error  # the reason
        monkeypatch.setenv("REWARDKIT_SERVE_TOKEN", TOKEN)  # the trainer's side: the same variable as the server's
        assert remote_play(url, task).infos().natural


def test_synthesis_and_evaluations_loop_runs_its_episodes_on_the_servers_too(retail: str) -> None:
    # run_episodes (synth agent, eval agent) with rollout.env_servers: the gold agent reaches the gold state there.
    gold = in_process("retail")
    tasks = [get_domain("retail").tasks()[tid] for tid in ("0", "59")]
    limits = RolloutLimits(env_servers=(retail,))
    results = run_episodes(get_domain("retail"), tasks, GoldAgent, ScriptedSimulator(), limits, workers=2)
    assert [r.infos.state_hash for r in results] == [gold["0"], gold["59"]]
    assert all(r.infos.natural and r.messages[0]["role"] == "system" for r in results)
    assert [r.changes for r in results] == [None, None]  # the server's database: the log's diff replays the calls
