"""MCP faults, on real servers: the export read by the SDK's own client with its defaults, a server that goes
away (killed, or restarted without the episode's session) at a tool call or during a user turn, and servers that do
not speak MCP at all."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")  # the optional extra: rewardkit[mcp]

import anyio
from mcp import Client
from mcp_servers import ROOT, faulty, http_process, http_server
from sim_server import free_port

from rewardkit.envs import get_domain
from rewardkit.envs.mcp_domain import mcp_domain
from rewardkit.envs.mcp_env import MCPEnvironment, MCPUnavailableError
from rewardkit.envs.mcp_server import STATE_EXPORT_URI, STATE_HASH_URI
from rewardkit.envs.tasks import gold_actions
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.base import Progress, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.runs.episodes.episode_log import EpisodeLog
from rewardkit.runs.episodes.trials import TrialPlan, run_trials

RETAIL = get_domain("retail")
TASKS = RETAIL.tasks()
DEFAULT_SSE_LIMIT = 1024 * 1024  # the SDK's max_sse_event_size


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with http_server(free_port(), tmp_path_factory.mktemp("mcp") / "server.log") as served:
        yield served


class TestExport:
    def test_the_sdk_client_with_default_settings_reads_the_whole_export(self, url: str) -> None:
        async def read() -> tuple[str, str]:
            async with Client(url) as client:  # no option changed: the SDK's limits, as any client has them
                await client.call_tool("cancel_pending_order", {"order_id": "#W8268610", "reason": "no longer needed"})
                exported = await client.read_resource(STATE_EXPORT_URI)
                hashed = await client.read_resource(STATE_HASH_URI)
                return exported.contents[0].text, hashed.contents[0].text  # type: ignore[union-attr]

        text, state_hash = anyio.run(read)
        with RETAIL.make_env(None) as env:
            env.call("cancel_pending_order", {"order_id": "#W8268610", "reason": "no longer needed"})
            assert json.loads(text) == env.export() and state_hash == env.state_hash()
        assert len(text.encode()) > DEFAULT_SSE_LIMIT  # what broke it: one answer larger than one SSE event may be

    def test_rewardkit_reads_it_with_default_limits_too(self, url: str) -> None:
        with MCPEnvironment(url) as env, RETAIL.make_env(None) as local:
            assert env.export() == local.export()


class Failing:
    """A real `rewardkit env serve --mcp --transport http` that a test kills, or restarts on its port (a restarted
    server holds none of the sessions it had: the episode's is gone, as after a crash and a supervisor's restart)."""

    def __init__(self, stack: contextlib.ExitStack, tmp_path: Path, how: str) -> None:
        self.stack, self.tmp_path, self.how, self.port = stack, tmp_path, how, free_port()
        self.url, self.proc = stack.enter_context(http_process(self.port, tmp_path / "server.log"))
        self.failed = False

    def fail(self) -> None:
        if self.failed:
            return
        self.failed = True
        self.proc.kill()
        self.proc.wait(timeout=10)
        if self.how == "restarted":
            self.stack.enter_context(http_process(self.port, self.tmp_path / "restarted.log"))


@pytest.fixture(params=["killed", "restarted"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Failing]:
    with contextlib.ExitStack() as stack:
        yield Failing(stack, tmp_path, request.param)


class FailsAfterTheOpening(ScriptedSimulator):
    """The scripted customer, whose opening message is the last thing the server lives to see."""

    def __init__(self, server: Failing) -> None:
        self.server = server

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        text = super().reply(task, dialogue, progress)
        if not any(turn.role == "user" for turn in dialogue):
            self.server.fail()
        return text


class FailsAtItsFirstCall(GoldAgent):
    """The gold agent, whose first tool call is the first request the failed server gets."""

    def __init__(self, task: Mapping[str, Any], server: Failing) -> None:
        super().__init__(task)
        self.server = server

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> str:
        reply = super().__call__(messages)
        if "<tool_call>" in reply:
            self.server.fail()
        return reply


class TestServerGoneDuringAUserTurn:
    # Task 24 has no gold action: the agent's first turn is text saying the two materials, so the next step is a
    # user turn, whose progress reads the state hash from the (dead) server. That read used to escape and end the
    # whole run.
    TASK = TASKS["24"]

    def test_the_episode_ends_as_env_error(self, server: Failing) -> None:
        domain = mcp_domain(server.url, "retail", name=f"mcp:retail-{server.how}-user", timeout=20)
        run = run_episode(domain, self.TASK, GoldAgent(self.TASK), FailsAfterTheOpening(server), RolloutLimits())
        assert run.infos.termination == "env_error" and run.infos.state_hash is None
        assert run.infos.error.startswith("the state hash: ") and server.url in run.infos.error
        assert run.infos.turns == 1  # the agent's one turn happened; the user's answer could not

    def test_the_run_records_it_and_goes_on(self, server: Failing, tmp_path: Path) -> None:
        domain = mcp_domain(server.url, "retail", name=f"mcp:retail-{server.how}-run", timeout=20)
        plan = TrialPlan(domain, [self.TASK], 1, GoldAgent, FailsAfterTheOpening(server), RolloutLimits(), workers=1)
        records = run_trials(plan, EpisodeLog(tmp_path / "episodes.jsonl", "run", resume=False), progress=False)
        assert [(r["status"], r["termination"], r["reward"]) for r in records] == [("infra_error", "env_error", None)]
        assert len((tmp_path / "episodes.jsonl").read_text(encoding="utf-8").splitlines()) == 1


class TestServerGoneAtAToolCall:
    # A restarted server answered the call "Session not found": it was scored as the agent's failed call.
    TASK = TASKS["0"]

    def test_the_episode_ends_as_env_error(self, server: Failing) -> None:
        domain = mcp_domain(server.url, "retail", name=f"mcp:retail-{server.how}-call", timeout=20)
        agent = FailsAtItsFirstCall(self.TASK, server)
        run = run_episode(domain, self.TASK, agent, ScriptedSimulator(), RolloutLimits())
        assert run.infos.termination == "env_error" and run.infos.state_hash is None
        error = run.infos.error
        assert error.startswith("tool call find_user_id_by_name_zip: ") and server.url in error
        assert (run.infos.turns, run.infos.tool_calls, run.infos.tool_errors) == (1, 0, 0)  # never scored


@pytest.mark.parametrize("use", ["tool call", "state hash", "export"])
def test_every_use_of_a_session_that_is_gone_raises_unavailable(server: Failing, use: str) -> None:
    """What the episode's guard turns into env_error: a killed server, and a restarted one that no longer knows the
    session (it used to answer a failed call, and the state reads raised MCPServerError, a configuration error)."""
    env = MCPEnvironment(server.url, timeout=20)
    try:
        server.fail()
        uses = {
            "tool call": lambda: env.call("find_user_id_by_email", {"email": "a@b.c"}),
            "state hash": env.state_hash,
            "export": env.export,
        }
        with pytest.raises(MCPUnavailableError, match=re.escape(server.url)):
            uses[use]()
    finally:
        env.close()


def _gold_calls(tasks: Sequence[Mapping[str, Any]], tool: str) -> int:
    return sum(action["name"] == tool for task in tasks for action in gold_actions(task))


# fault, what it fails at, and whether every process of the server fails at its first such request (each session
# over stdio is a process of its own) or the whole command once: after as many such requests as the task selection's
# gold replays make before the episodes run (each replays its task's gold actions and reads the state twice, before
# and after: whether the gold changes it tells whether an episode must show evidence), so the first episode's.
EVAL_CASES = {
    "dies-at-a-tool-call": ("dies", "tools/call:find_user_id_by_name_zip", False),
    "forgets-at-a-state-read": ("forgets", f"resources/read:{STATE_HASH_URI}", False),
    # `--mcp "python server.py"` that exits at its first tool call: the gold replay of task 0 meets it first, and
    # that used to end the run with exit 2 and no report. Task 24 has no gold call, and its episode makes none.
    "each-process-dies-at-its-first-call": ("dies", "tools/call:find_user_id_by_name_zip", True),
}


@pytest.mark.parametrize(("fault", "trigger", "each"), EVAL_CASES.values(), ids=EVAL_CASES)
def test_eval_agent_finishes_with_the_other_episodes_scored(
    tmp_path: Path, fault: str, trigger: str, each: bool
) -> None:
    tasks = [TASKS["0"], TASKS["24"]]  # split order: task 0's episode runs first, and meets the fault
    method, _, target = trigger.partition(":")
    before = _gold_calls(tasks, target) if method == "tools/call" else 2 * len(tasks)
    server = faulty(trigger, 1, None, fault) if each else faulty(trigger, before + 1, tmp_path / "count", fault)
    out = tmp_path / "eval"
    cmd = [sys.executable, "-m", "rewardkit.cli", "eval", "agent", "--agent", "gold", "--mcp", server]
    cmd += ["--tasks", "0,24", "--split", "train", "--trials", "1", "--workers", "1", "--no-progress"]
    cmd += ["--out-dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "1 episode(s) hit an infrastructure error; rerun with --resume" in done.stderr  # one lost of two
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
    ended = sorted((r["task_id"], r["status"], r["termination"], r["reward"]) for r in records)
    assert ended == [("0", "infra_error", "env_error", None), ("24", "ok", "user_stop", 1.0)]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["episodes"]["valid"], summary["episodes"]["infra_error"]) == (1, 1)


class _Html(BaseHTTPRequestHandler):
    """A plain web server: every request gets a 200 HTML page."""

    def _page(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b"<html><body>hello</body></html>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _page

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    "server",
    [
        "{web}",  # a web server: the SDK logged "Unexpected content type" once per request
        shlex.join([sys.executable, "-c", "print('hello')"]),  # prints text: the SDK logged a traceback per line
        shlex.join([sys.executable, "-c", "print('a'); print('b'); print('c')"]),
    ],
    ids=["web-page", "stdio-text", "stdio-lines"],
)
def test_a_server_that_is_not_mcp_is_one_line(tmp_path: Path, web: str, server: str) -> None:
    cmd = [sys.executable, "-m", "rewardkit.cli", "eval", "agent", "--agent", "gold", "--mcp", server.format(web=web)]
    cmd += ["--tasks", "24", "--split", "train", "--trials", "1", "--out-dir", str(tmp_path / "eval"), "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr  # rewardkit's own line, and nothing of the SDK's
    assert done.stderr.startswith("rewardkit eval agent: cannot reach the MCP server")
