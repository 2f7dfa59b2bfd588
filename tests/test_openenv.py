"""A domain as an OpenEnv environment: `rewardkit env serve --openenv` as a real subprocess, driven by openenv-core's
own client (``GenericEnvClient``, its defaults); nothing is mocked. Runs in the OpenEnv job (`make test-openenv`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv")  # the optional extra: rewardkit[openenv], in its own stack (constraints/openenv.txt)

from openenv.core.generic_client import GenericEnvClient
from openenv_servers import remote_play, served
from sim_server import free_port

from rewardkit.cli import main
from rewardkit.envs import get_domain
from rewardkit.envs.outcomes import task_check
from rewardkit.loop.agents import as_reply
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode, run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.remote_env import RemoteEpisode
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

pytestmark = pytest.mark.openenv
TOKEN = "0123456789abcdef0123"


@pytest.fixture(scope="module")
def retail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("openenv")) as (url, _):
        yield url


def play(url: str, task: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
    """The gold agent through the server, as a trainer's rollout would: the reward and the episode's record."""
    agent = GoldAgent(task)
    with GenericEnvClient(base_url=url).sync() as env:
        result = env.reset(task_id=str(task["id"]))
        messages = list(result.observation["messages"])
        while not result.done:
            reply = as_reply(agent(messages))
            messages.append({"role": "assistant", "content": reply.text})
            result = env.step({"content": reply.text, "tool_calls": reply.tool_calls})
            messages += result.observation["messages"]
        return result.reward, result.observation["record"]


def in_process(domain_name: str) -> dict[str, str]:
    """Task id -> the gold state hash, for every task whose in-process gold episode scores 1 (the usable ones)."""
    domain, reward = get_domain(domain_name), TaskCompletion()
    out = {}
    for tid, task in domain.tasks().items():
        if task_check(task, domain_name) is not None:  # a task the reward refuses: the server refuses it too
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
    # every task the reward can score (retail 109 of 114, the console all 47, approvals included) plays in process
    assert len(gold) == {"retail": 109, "livestream": len(tasks)}[domain_name]
    with served(tmp_path_factory.mktemp("openenv"), domain_name) as (url, _), ThreadPoolExecutor(4) as pool:
        got = dict(zip(gold, pool.map(lambda tid: play(url, tasks[tid]), gold), strict=True))  # 4 sessions at once
    for tid, state in gold.items():
        reward, record = got[tid]
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


def test_a_token_gates_every_session(tmp_path: Path) -> None:
    with served(tmp_path, "retail", "--token", TOKEN) as (url, _):
        with pytest.raises(ConnectionError), GenericEnvClient(base_url=url).sync() as env:
            env.reset(task_id="0")
        with GenericEnvClient(base_url=f"{url}/{TOKEN}").sync() as env:  # the token as the first path segment
            assert env.reset(task_id="0").observation["task_id"] == "0"


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def test_under_load_no_session_is_lost_and_memory_stays_bounded(tmp_path: Path) -> None:
    # 8 clients at once, 240 episodes through a server capped at 8 sessions: every episode ends with its reward,
    # and the server holds no more memory after the last 160 than after the first 80 (plus 20% for the allocator).
    tasks = get_domain("retail").tasks()
    ids = [tid for tid in sorted(tasks, key=int) if task_check(tasks[tid], "retail") is None][:80]
    with served(tmp_path, "retail", "--max-sessions", "8") as (url, proc):
        with ThreadPoolExecutor(8) as pool:
            first = list(pool.map(lambda tid: play(url, tasks[tid])[0], ids))
            warm = rss_kib(proc.pid)
            rest = list(pool.map(lambda tid: play(url, tasks[tid])[0], ids * 2))
        after = rss_kib(proc.pid)
    assert len(first) + len(rest) == 240 and all(r is not None for r in first + rest)
    assert after <= warm * 1.2, f"RSS {warm} KiB after 80 episodes, {after} KiB after 240"


def test_sessions_over_the_cap_are_refused_and_an_idle_one_expires(tmp_path: Path) -> None:
    with served(tmp_path, "retail", "--max-sessions", "1", "--idle-s", "1") as (url, _):
        with GenericEnvClient(base_url=url).sync() as first:
            first.reset(task_id="0")
            with pytest.raises(Exception), GenericEnvClient(base_url=url).sync() as second:  # noqa: B017
                second.reset(task_id="1")  # refused: the one session the server holds is taken
            time.sleep(7)  # idle past --idle-s, and past the reaper's round (every 5 s at least): closed
            with pytest.raises(RuntimeError, match="reset first"):  # its episode and database are gone
                first.step({"content": "Still there?"})
        with GenericEnvClient(base_url=url).sync() as third:  # the slot is free again
            assert third.reset(task_id="1").observation["task_id"] == "1"


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
