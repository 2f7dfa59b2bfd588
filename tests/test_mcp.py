"""The retail tools over MCP, round trip on this machine: `rewardkit env serve --mcp` as a real subprocess
(stdio and streamable HTTP) and :class:`MCPEnvironment` as its client; nothing is mocked."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")  # the optional extra: rewardkit[mcp]

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_servers import STDIO, http_server
from sim_server import free_port

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.mcp_domain import mcp_domain
from rewardkit.envs.mcp_env import MCPEnvironment, MCPServerError, MCPUnavailableError
from rewardkit.envs.tool import ResultCode
from rewardkit.envs.tool_calls import ToolCall
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion
from rewardkit.runs.episodes.episode_log import EpisodeLog
from rewardkit.runs.episodes.trials import TrialPlan, run_trials
from rewardkit.runs.stats.metrics import summarize_episodes

RETAIL = get_domain("retail")
TASKS = RETAIL.tasks()
GOLD = {tid: t["evaluation_criteria"]["actions"] for tid, t in TASKS.items() if t["evaluation_criteria"].get("actions")}
ORDER = "#W8268610"  # pending in the template
CANCEL = {"order_id": ORDER, "reason": "no longer needed"}


def in_process(calls: Sequence[Any]) -> tuple[str, list[tuple[ResultCode, str]], list[dict[str, Any]]]:
    """State hash, (code, text) per call and audit of ``calls`` on the harness itself."""
    with RETAIL.make_env(None) as env:
        results = env.replay(calls)
        return env.state_hash(), [(r.code, r.text()) for r in results], env.audit()


def over_mcp(
    env: MCPEnvironment, calls: Sequence[Any]
) -> tuple[str, list[tuple[ResultCode, str]], list[dict[str, Any]]]:
    results = env.replay(calls)
    return env.state_hash(), [(r.code, r.text()) for r in results], env.audit()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the whole module."""
    with http_server(free_port(), tmp_path_factory.mktemp("mcp") / "server.log") as served:
        yield served


@pytest.fixture(scope="module")
def tools(url: str) -> Mapping[str, Any]:
    with MCPEnvironment(url) as env:
        return env.tools


class TestGoldReplay:
    def test_every_gold_task_over_http_ends_in_the_in_process_state(self, url: str, tools: Mapping[str, Any]) -> None:
        assert len(GOLD) > 100

        def one(actions: list[Any]) -> Any:
            with MCPEnvironment(url, tools=tools) as env:  # a fresh session: a fresh database
                return over_mcp(env, actions)

        with ThreadPoolExecutor(4) as pool:  # concurrent sessions on the one shared client loop
            got = dict(zip(GOLD, pool.map(one, GOLD.values()), strict=True))
        for tid, actions in GOLD.items():
            assert got[tid] == in_process(actions), f"task {tid}"

    def test_gold_over_stdio_ends_in_the_in_process_state(self) -> None:
        def one(tid: str) -> Any:
            with MCPEnvironment(STDIO) as env:  # spawns `python -m rewardkit.cli env serve --domain retail --mcp`
                return over_mcp(env, GOLD[tid]), env.export()

        tids = ["0", "59", "10"]  # an exchange; a cancel and an address change; a transfer to a human
        with ThreadPoolExecutor(len(tids)) as pool:  # one server process each: started side by side
            got = dict(zip(tids, pool.map(one, tids), strict=True))
        for tid in tids:
            assert got[tid][0] == in_process(GOLD[tid]), f"task {tid}"
        with RETAIL.make_env(None) as env:
            env.replay(GOLD["59"])
            assert got["59"][1] == env.export()


class TestSessions:
    def test_concurrent_http_sessions_do_not_share_a_database(self, url: str, tools: Mapping[str, Any]) -> None:
        template = in_process([])[0]
        with MCPEnvironment(url, tools=tools) as a, MCPEnvironment(url, tools=tools) as b:
            assert a.call("cancel_pending_order", CANCEL).ok
            assert a.call("get_order_details", {"order_id": ORDER}).value["status"] == "cancelled"
            assert b.call("get_order_details", {"order_id": ORDER}).value["status"] == "pending"
            assert a.state_hash() != template and b.state_hash() == template
            assert b.call("cancel_pending_order", CANCEL).ok  # b's order was still pending
            assert (
                a.state_hash()
                == b.state_hash()
                == in_process([{"name": "cancel_pending_order", "arguments": CANCEL}])[0]
            )

    def test_a_threaded_caller_gets_one_audit_row_per_call(self, url: str, tools: Mapping[str, Any]) -> None:
        with MCPEnvironment(url, tools=tools) as env, ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: env.call("get_order_details", {"order_id": ORDER}), range(24)))
            assert all(r.ok for r in results)
            assert [row["seq"] for row in env.audit()] == list(range(1, 25))

    def test_a_closed_session_frees_its_database(self) -> None:
        import uvicorn

        from rewardkit.envs.mcp_server import http_app

        app, sessions = http_app(RETAIL)  # in this process, to look at the server's session table
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not server.started:
                assert time.monotonic() < deadline, "the in-process server did not start"
                time.sleep(0.05)
            envs = [MCPEnvironment(f"http://127.0.0.1:{port}/mcp") for _ in range(3)]
            for env in envs:
                assert env.call("get_order_details", {"order_id": ORDER}).ok
            assert len(sessions) == 3
            for env in envs:
                env.close()  # the client's DELETE ends the session
            assert len(sessions) == 0
        finally:
            server.should_exit = True
            thread.join(timeout=10)

    def test_sessionless_clients_are_refused(self, url: str) -> None:
        async def modern() -> str:  # 2026-07-28 requests carry no session to keep a database in
            async with Client(url, mode="2026-07-28", cache=None) as client:
                try:
                    await client.call_tool("get_order_details", {"order_id": ORDER})
                except MCPError as exc:
                    return exc.message
            return "answered"

        assert "one database per MCP session" in anyio.run(modern)


class TestTools:
    def test_the_listing_is_the_domains(self, tools: Mapping[str, Any]) -> None:
        assert [spec.openai() for spec in tools.values()] == RETAIL.tool_specs()
        assert {n: s.risk for n, s in tools.items()} == {n: s.risk for n, s in RETAIL.tools.items()}
        for name, spec in tools.items():
            hints = spec.annotations
            assert hints["readOnlyHint"] is (RETAIL.tools[name].risk == "read") and hints["openWorldHint"] is False
            if spec.risk == "write":
                assert hints["destructiveHint"] is True and hints["idempotentHint"] is False

    def test_errors_read_as_in_process(self, url: str, tools: Mapping[str, Any]) -> None:
        calls: list[Any] = [
            {"name": "cancel_pending_order", "arguments": {**CANCEL, "idempotency_key": "k"}},
            {"name": "cancel_pending_order", "arguments": {**CANCEL, "idempotency_key": "k"}},  # replayed
            {"name": "cancel_pending_order", "arguments": {**CANCEL, "idempotency_key": "k", "reason": "other"}},
            {"name": "get_order_details", "arguments": {}},  # a required argument missing
            {"name": "get_order_details", "arguments": {"order_id": 5}},
            {"name": "get_order_details", "arguments": {"order_id": "#W0000000"}},
            {"name": "refund_everything", "arguments": {}},
            ToolCall("get_order_details", {}, "arguments are not valid JSON: '{'"),
        ]
        with MCPEnvironment(url, tools=tools) as env:
            got = over_mcp(env, calls)
            assert env.call("get_order_details", ["not", "an", "object"]).code is ResultCode.SCHEMA_VIOLATION
        assert got == in_process(calls)
        codes = [code for code, _ in got[1]]
        bad, missing, unknown = ResultCode.SCHEMA_VIOLATION, ResultCode.NOT_FOUND, ResultCode.UNKNOWN_TOOL
        assert codes[3:] == [bad, bad, missing, unknown, bad]
        assert '"code": "SCHEMA_VIOLATION"' in got[1][3][1] and "order_id" in got[1][3][1]
        assert [row["replayed"] for row in got[2][:2]] == [False, True]

    def test_an_unreachable_server_fails_at_construction(self) -> None:
        down = f"http://127.0.0.1:{free_port()}/mcp"
        with pytest.raises(MCPUnavailableError, match=rf"cannot reach the MCP server '{down}'.*rewardkit env serve"):
            MCPEnvironment(down, timeout=10)
        with pytest.raises(MCPUnavailableError, match="cannot reach the MCP server 'no-such-mcp-server --x'"):
            mcp_domain("no-such-mcp-server --x", "retail", name="mcp:nowhere")

    def test_a_server_without_state_or_tools_says_so(self, tmp_path: Path) -> None:
        script = tmp_path / "plain.py"
        script.write_text(
            "import sys\nfrom mcp.server.mcpserver import MCPServer\nserver = MCPServer('plain')\n"
            "if sys.argv[1:] != ['--no-tools']:\n"
            "    @server.tool()\n    def echo(text: str) -> str:\n        '''Say it back.'''\n        return text\n"
            "server.run()\n",
            encoding="utf-8",
        )
        with MCPEnvironment(f"{sys.executable} {script}") as env:
            assert env.call("echo", {"text": "hi"}).text() == "hi"
            assert env.tools["echo"].risk == "write"  # no readOnlyHint: it may write
            bad = env.call("echo", {"text": 5})  # the server's own error text, flagged isError
            assert not bad.ok and "text" in bad.text()
            with pytest.raises(MCPServerError, match="does not expose rewardkit://state/hash"):
                env.state_hash()
        with pytest.raises(MCPServerError, match="lists no tools"):
            MCPEnvironment(f"{sys.executable} {script} --no-tools")


class TestEpisode:
    def test_a_gold_episode_over_mcp_scores_one(self, url: str) -> None:
        domain = mcp_domain(url, "retail", name="mcp:retail-http")
        assert mcp_domain(url, "retail", name="mcp:retail-http") is domain and get_domain("mcp:retail-http") is domain
        assert domain.tasks is RETAIL.tasks and domain.stop_tools == RETAIL.stop_tools
        task = TASKS["59"]
        run = run_episode(domain, task, GoldAgent(task), ScriptedSimulator(), RolloutLimits())
        assert run.infos.termination == "user_stop" and run.infos.tool_errors == 0
        assert run.infos.state_hash == in_process(GOLD["59"])[0]
        score = TaskCompletion()(
            ["x"], messages=[run.messages], task=[task], domain=[domain.name], rollout_infos=[run.infos]
        )
        assert score == [1.0]


class TestCli:
    def test_serve_needs_mcp_flag(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit_:
            main(["env", "serve", "--domain", "retail"])
        assert exit_.value.code == 2 and "--mcp" in capsys.readouterr().err

    def test_serve_without_the_mcp_package_says_what_to_install(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now fails as if it were not installed
        monkeypatch.delitem(sys.modules, "rewardkit.envs.mcp_server", raising=False)
        assert main(["env", "serve", "--mcp"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install 'rewardkit[mcp]'" in err

    def test_synthesis_and_evaluation_run_on_an_mcp_server(self, url: str, tmp_path: Path) -> None:
        """`--mcp URL`: the loop's tools come from the server, and so does the state the rewards check."""
        tasks = ["24", "10", "59"]  # no action, two materials to say; a transfer; a lookup and an exchange
        common = ["--agent", "gold", "--mcp", url, "--tasks", ",".join(tasks), "--no-progress", "--workers", "3"]
        out = tmp_path / "sft.jsonl"
        assert (
            main(
                ["synth", "agent", *common, "--split", "train", "--out", str(out), "--report", str(tmp_path / "r.json")]
            )
            == 0
        )
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["domain"] == "mcp:retail" and report["kept"] == 3 == report["read"]
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert json.loads(rows[0]["tools"]) == RETAIL.tool_specs()  # the listing from the server, same specs
        eval_dir = tmp_path / "eval"
        assert main(["eval", "agent", *common, "--split", "train", "--trials", "1", "--out-dir", str(eval_dir)]) == 0
        summary = json.loads((eval_dir / "summary.json").read_text())
        assert summary["pass_hat_k"][0]["value"] == 1.0 and summary["episodes"]["infra_error"] == 0

    def test_a_server_gone_is_infrastructure_and_resume_completes(self, tmp_path: Path) -> None:
        """An MCP server that stops mid-run: its episodes end as env_error (excluded, counted), not as failures."""
        port = free_port()
        with http_server(port, tmp_path / "first.log") as served:
            domain = mcp_domain(served, "retail", name="mcp:retail-restarted")  # the tools are listed while it is up
        tasks = [TASKS["24"], TASKS["10"]]
        plan = TrialPlan(domain, tasks, 1, GoldAgent, ScriptedSimulator(), RolloutLimits(), workers=1)
        log_path = tmp_path / "episodes.jsonl"
        records = run_trials(plan, EpisodeLog(log_path, "run", resume=False), progress=False)  # the server is gone
        ended = [(r["status"], r["termination"], r["reward"]) for r in records]
        assert ended == [("infra_error", "env_error", None)] * 2
        assert all(served in r["error"] for r in records)
        summary = summarize_episodes(records, trials=1)
        assert summary["pass_hat_k"][0]["value"] is None and summary["episodes"]["infra_error"] == 2  # none scored 0
        with http_server(port, tmp_path / "second.log"):  # back on the same URL
            records = run_trials(plan, EpisodeLog(log_path, "run", resume=True), progress=False)
        assert [(r["status"], r["reward"]) for r in records] == [("ok", 1.0)] * 2
